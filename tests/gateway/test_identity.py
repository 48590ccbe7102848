"""DID documents served over HTTP parse, validate, and match the keys the instance signs with."""

from __future__ import annotations

from did.document import parse_did_document
from did.web import did_document_path
from tests.gateway.harness import run_instance


async def test_instance_user_and_agent_documents(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        signing = instance.state.identity.signing_key.public_key.public_bytes_raw()
        for did in (instance.did, alice.did, alice.profile["agent_did"]):
            response = await instance.client.get(did_document_path(did))
            assert response.status_code == 200, did
            assert response.headers["content-type"] == "application/did+json"
            document = parse_did_document(response.json(), expected_did=did)
            key = document.authentication_key(f"{did}#key-1")
            assert key.public_bytes_raw() == signing
            if did != instance.did:
                endpoint = document.service_endpoint("A2AService")
                assert endpoint and endpoint.startswith(instance.base_url)
            etag = response.headers["etag"]
            again = await instance.client.get(
                did_document_path(did), headers={"If-None-Match": etag}
            )
            assert again.status_code == 304
        missing = await instance.client.get("/users/nobody/did.json")
        assert missing.status_code == 404
        assert missing.json()["code"] == "not_found"


async def test_keys_survive_a_restart(database_url: str) -> None:
    async with run_instance(database_url) as first:
        before = first.state.identity.signing_key.public_key.public_bytes_raw()
    async with run_instance(database_url) as second:
        after = second.state.identity.signing_key.public_key.public_bytes_raw()
    assert before == after
