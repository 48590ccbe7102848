"""DID documents served over HTTP parse, validate, and match the keys the instance signs with."""

from __future__ import annotations

import pytest

from did.document import parse_did_document
from did.web import did_document_path
from gateway.errors import PublicURLChangedError
from gateway.services.identity import check_public_url, load_identity
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
            endpoint = document.service_endpoint("A2AService")
            assert endpoint and endpoint.startswith(instance.base_url)
            if did == instance.did:  # the instance itself signs (group events, relays)
                assert endpoint == f"{instance.base_url}/a2a"
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


async def test_a_changed_public_url_is_refused_at_start(database_url: str) -> None:
    async with run_instance(database_url) as first:
        await first.register("alice")
        await check_public_url(first.state.pool, first.state.identity)  # same URL: fine
        moved = await load_identity(first.state.pool, public_url="https://moved.example")
        with pytest.raises(PublicURLChangedError, match="users under another DID"):
            await check_public_url(first.state.pool, moved)


async def test_nul_characters_are_422_never_500(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        conversation = await alice.direct_with(bob.did)
        cases = [
            (
                "POST",
                "/v1/auth/register",
                {"username": "carol", "password": "long enough", "display_name": "a\x00b"},
            ),
            ("POST", "/v1/auth/login", {"username": "a\x00", "password": "whatever1"}),
            ("POST", f"/v1/conversations/{conversation['id']}/messages", {"content": "a\x00b"}),
        ]
        for method, path, body in cases:
            response = await alice.request(method, path, json=body)
            assert response.status_code in (401, 422), (path, response.text)
        for path in ("/users/%00/did.json", "/agents/a%00b/did.json"):
            assert (await instance.client.get(path)).status_code in (404, 422)
        response = await instance.client.post("/users/%00/a2a", content=b"{}")
        assert response.status_code == 401
        async with instance.state.pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM messages") == 0
            assert await conn.fetchval("SELECT count(*) FROM users") == 2
            rejected = await conn.fetchval(
                "SELECT count(*) FROM audit_log WHERE action = 'federation.inbound.rejected'"
            )
        assert rejected == 1


async def test_local_users_become_contacts_without_any_network(database_url: str) -> None:
    strict = {"allow_http_dids": False, "allow_private_networks": False}
    async with run_instance(database_url, **strict) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        response = await alice.request("POST", "/v1/contacts", json={"did": bob.did})
        assert response.status_code == 201, response.text
        assert response.json()["endpoint"] == f"{instance.base_url}/users/bob/a2a"
        ghost = await alice.request(
            "POST", "/v1/contacts", json={"did": f"{instance.did}:users:ghost"}
        )
        assert ghost.status_code == 422
        assert ghost.json()["code"] == "did_unresolvable"
