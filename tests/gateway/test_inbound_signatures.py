"""Inbound federation authentication, attack by attack (RFC 9421 §3.2, §7.2)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gateway.store import peers as peers_store
from tests.gateway.fakepeer import FakePeer, run_fake_peer
from tests.gateway.harness import Instance, User, next_event, run_instance
from tests.gateway.statements import counting


@pytest.fixture
async def setup(database_url: str) -> AsyncIterator[tuple[Instance, User, FakePeer]]:
    async with run_instance(database_url) as b, run_fake_peer() as peer:
        bob = await b.register("bob")
        yield b, bob, peer


def endpoint(b: Instance) -> str:
    return f"{b.base_url}/users/bob/a2a"


async def count(b: Instance, sql: str) -> int:
    async with b.state.pool.acquire() as conn:
        return int(await conn.fetchval(sql))


async def test_a_valid_signed_message_is_stored_and_pushed(setup) -> None:
    b, bob, peer = setup
    body = peer.rpc("psst")
    async with bob.websocket() as ws:
        response = await b.client.post(
            "/users/bob/a2a", content=body, headers=peer.signed_headers(endpoint(b), body)
        )
        assert response.status_code == 200, response.text
        task = response.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        result = task["status"]["message"]
        assert result["role"] == "ROLE_AGENT"
        event = await next_event(ws, "message.created")
    assert event["data"]["content"] == "psst"
    assert event["data"]["sender_did"] == peer.did
    assert result["parts"][1]["data"]["messageId"] == event["data"]["id"]


async def test_a_retry_with_the_same_message_id_is_deduplicated(setup) -> None:
    b, _, peer = setup
    body = peer.rpc("once", message_id="m-1")
    answers = []
    for _ in range(3):
        response = await b.client.post(
            "/users/bob/a2a", content=body, headers=peer.signed_headers(endpoint(b), body)
        )
        assert response.status_code == 200
        answers.append(response.json()["result"]["task"]["id"])
    assert len(set(answers)) == 1
    assert await count(b, "SELECT count(*) FROM messages") == 1


def _tamper_body(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    headers = peer.signed_headers(url, peer.rpc("original"))
    return peer.rpc("tampered"), headers


def _wrong_key(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    body = peer.rpc()
    return body, peer.signed_headers(url, body, key=Ed25519PrivateKey.generate())


def _expired(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    body = peer.rpc()
    old = int(time.time()) - 3600
    return body, peer.signed_headers(url, body, created=old, expires=old + 60)


def _future(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    body = peer.rpc()
    return body, peer.signed_headers(url, body, created=int(time.time()) + 600)


def _other_path(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    body = peer.rpc()
    return body, peer.signed_headers(url.replace("/users/bob/", "/users/eve/"), body)


def _no_digest(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    body = peer.rpc()
    components = ("@method", "@authority", "@path", "@query", "content-type")
    return body, peer.signed_headers(url, body, components=components)


def _no_nonce(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    body = peer.rpc()
    return body, peer.signed_headers(url, body, nonce=None)


def _unknown_key(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    body = peer.rpc()
    return body, peer.signed_headers(url, body, keyid=f"{peer.did}#key-9")


def _unsigned(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    return peer.rpc(), {"Content-Type": "application/json"}


def _garbage(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    return peer.rpc(), {
        "Content-Type": "application/json",
        "Signature-Input": "sig1=(((",
        "Signature": "sig1=:!!:",
    }


def _long_nonce(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    body = peer.rpc()  # signature_nonces.nonce is VARCHAR(128)
    return body, peer.signed_headers(url, body, nonce="n" * 129)


def _long_keyid(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    body = peer.rpc()  # signature_nonces.keyid is VARCHAR(512)
    return body, peer.signed_headers(url, body, keyid=f"{peer.did}#{'k' * 600}")


def _long_did(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    body = peer.rpc()  # peer_agents.did is VARCHAR(255)
    return body, peer.signed_headers(url, body, keyid=f"{peer.did}:{'u' * 300}#key-1")


def _far_expires(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    body = peer.rpc()  # beyond datetime's range: the nonce horizon cannot even be computed
    return body, peer.signed_headers(url, body, expires=999_999_999_999_999)


def _year_later_expires(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    body = peer.rpc()  # representable, but a nonce kept for a year per request is a flood
    return body, peer.signed_headers(url, body, expires=int(time.time()) + 365 * 86400)


def _unresolvable_did(peer: FakePeer, url: str) -> tuple[bytes, dict[str, str]]:
    body = peer.rpc()
    return body, peer.signed_headers(url, body, keyid="did:web:localhost%3A1:users:x#key-1")


@pytest.mark.parametrize(
    ("attack", "code"),
    [
        (_tamper_body, "content_digest_mismatch"),
        (_wrong_key, "signature_invalid"),
        (_expired, "signature_expired"),
        (_future, "signature_expired"),
        (_other_path, "signature_invalid"),
        (_no_digest, "signature_components_missing"),
        (_no_nonce, "signature_malformed"),
        (_unknown_key, "did_key_unknown"),
        (_unsigned, "signature_missing"),
        (_garbage, "signature_malformed"),
        (_unresolvable_did, "did_unresolvable"),
        (_long_nonce, "signature_malformed"),
        (_long_keyid, "signature_malformed"),
        (_long_did, "did_invalid"),
        (_far_expires, "signature_expired"),
        (_year_later_expires, "signature_expired"),
    ],
)
async def test_attacks_are_401_with_a_precise_code(setup, attack, code: str) -> None:
    b, _, peer = setup
    body, headers = attack(peer, endpoint(b))
    response = await b.client.post("/users/bob/a2a", content=body, headers=headers)
    assert response.status_code == 401, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == code
    assert await count(b, "SELECT count(*) FROM messages") == 0
    assert (
        await count(
            b, "SELECT count(*) FROM audit_log WHERE action = 'federation.inbound.rejected'"
        )
        == 1
    )


async def test_a_replayed_request_is_refused(setup) -> None:
    b, _, peer = setup
    body = peer.rpc()
    headers = peer.signed_headers(endpoint(b), body)
    first = await b.client.post("/users/bob/a2a", content=body, headers=headers)
    assert first.status_code == 200
    replay = await b.client.post("/users/bob/a2a", content=body, headers=headers)
    assert replay.status_code == 401
    assert replay.json()["code"] == "signature_replayed"


async def test_the_host_header_cannot_change_the_signed_authority(setup) -> None:
    b, _, peer = setup
    body = peer.rpc()
    spoofed = endpoint(b).replace("localhost", "evil.example")
    headers = peer.signed_headers(spoofed, body)
    headers["Host"] = "evil.example"
    response = await b.client.post("/users/bob/a2a", content=body, headers=headers)
    assert response.status_code == 401
    assert response.json()["code"] == "signature_invalid"


@pytest.mark.parametrize("change", [{}, {"delete": {"messageId": "m-1"}}])
async def test_claiming_another_sender_is_refused_and_audited(setup, change) -> None:
    b, _, peer = setup
    body = peer.rpc(sender=f"{b.did}:users:bob", **change)
    response = await b.client.post(
        "/users/bob/a2a", content=body, headers=peer.signed_headers(endpoint(b), body)
    )
    assert response.status_code == 401
    assert response.json()["code"] == "signature_sender_mismatch"
    assert await count(b, "SELECT count(*) FROM messages") == 0
    async with b.state.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT details_json FROM audit_log WHERE action = 'federation.inbound.rejected'"
        )
    assert [r["details_json"]["code"] for r in rows] == ["signature_sender_mismatch"]
    assert rows[0]["details_json"]["claimed"] == f"{b.did}:users:bob"
    assert rows[0]["details_json"]["keyid"] == peer.keyid


async def test_rotated_key_is_refetched_once_and_the_old_key_stops(setup) -> None:
    b, _, peer = setup

    async def post(key: Ed25519PrivateKey, keyid: str) -> int:
        body = peer.rpc()
        headers = peer.signed_headers(endpoint(b), body, key=key, keyid=keyid)
        return (await b.client.post("/users/bob/a2a", content=body, headers=headers)).status_code

    assert await post(peer.key, peer.keyid) == 200
    assert peer.fetches == 1
    new_key = Ed25519PrivateKey.generate()
    peer.publish(new_key, fragment="key-2")  # rotation: key-1 removed, key-2 added
    new_keyid = f"{peer.did}#key-2"
    # Within the refetch interval an unknown keyid is refused without a fetch.
    assert await post(new_key, new_keyid) == 401
    assert peer.fetches == 1
    b.state.clock.offset = 30  # past the refetch interval, still within the cache TTL
    try:
        assert await post(new_key, new_keyid) == 200
        assert peer.fetches == 2
        # The cache now holds the new document: the removed key no longer verifies.
        assert await post(peer.key, peer.keyid) == 401
    finally:
        b.state.clock.offset = 0


@pytest.mark.parametrize(
    ("body", "status", "rpc_code"),
    [
        (b"not json", 400, -32700),
        (b"[" * 100_000 + b"]" * 100_000, 400, -32700),  # deeper than any parser's stack
        (b'{"jsonrpc": "2.0"}', 400, -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "Nope", "params": {}}', 200, -32601),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}', 200, -32602),
    ],
)
async def test_signed_but_bad_json_rpc(setup, body: bytes, status: int, rpc_code: int) -> None:
    b, _, peer = setup
    response = await b.client.post(
        "/users/bob/a2a", content=body, headers=peer.signed_headers(endpoint(b), body)
    )
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == rpc_code
    assert await count(b, "SELECT count(*) FROM messages") == 0


async def test_unknown_recipient_is_404(setup) -> None:
    b, _, peer = setup
    body = peer.rpc()
    url = endpoint(b).replace("/users/bob/", "/users/nobody/")
    response = await b.client.post(
        "/users/nobody/a2a", content=body, headers=peer.signed_headers(url, body)
    )
    assert response.status_code == 404
    assert response.json()["code"] == "recipient_not_found"


async def test_cheap_checks_run_before_any_did_fetch(setup) -> None:
    b, _, peer = setup
    for attack, code in (
        (_expired, "signature_expired"),
        (_tamper_body, "content_digest_mismatch"),
    ):
        body, headers = attack(peer, endpoint(b))
        response = await b.client.post("/users/bob/a2a", content=body, headers=headers)
        assert response.json()["code"] == code
    assert peer.fetches == 0  # the stranger's DID document was never requested


async def test_failed_did_lookups_are_cached_briefly(setup) -> None:
    b, _, peer = setup
    peer.document = {"id": "did:web:somebody.else"}  # resolves, but fails validation
    for _ in range(5):
        body = peer.rpc()
        headers = peer.signed_headers(endpoint(b), body)
        response = await b.client.post("/users/bob/a2a", content=body, headers=headers)
        assert response.status_code == 401
        assert response.json()["code"] == "did_document_invalid"
    assert peer.fetches == 1  # one fetch, then the cached failure
    peer.publish()
    # past the failure cache: the fixed document is fetched again
    b.state.clock.offset = b.settings.did_failure_ttl_seconds + 1
    try:
        body = peer.rpc()
        response = await b.client.post(
            "/users/bob/a2a", content=body, headers=peer.signed_headers(endpoint(b), body)
        )
    finally:
        b.state.clock.offset = 0
    assert response.status_code == 200, response.text
    assert peer.fetches == 2


async def test_an_overlong_etag_is_refused_and_the_failure_cached(setup) -> None:
    b, _, peer = setup
    peer.headers = {"ETag": '"' + "e" * 300 + '"'}  # peer_agents.etag is VARCHAR(255)
    for _ in range(3):
        body = peer.rpc()
        response = await b.client.post(
            "/users/bob/a2a", content=body, headers=peer.signed_headers(endpoint(b), body)
        )
        assert response.status_code == 401, response.text
        assert response.json()["code"] == "did_unresolvable"
    assert peer.fetches == 1  # negative caching: the attacker's document is fetched once
    assert (
        await count(
            b, "SELECT count(*) FROM audit_log WHERE action = 'federation.inbound.rejected'"
        )
        == 3
    )


async def test_401s_name_the_schemes_the_endpoint_accepts(setup) -> None:
    """RFC 9110 §11.6.1: a 401 carries WWW-Authenticate; an A2A endpoint takes a signature
    (RFC 9421, asked for with Accept-Signature, §5.1) or an API key (Bearer)."""
    b, _, peer = setup
    body, headers = _unsigned(peer, endpoint(b))
    a2a = await b.client.post("/users/bob/a2a", content=body, headers=headers)
    assert a2a.status_code == 401
    schemes = [c.split()[0] for c in a2a.headers["www-authenticate"].split(", ")]
    assert schemes == ["Signature", "Bearer"]
    assert 'tag="confer-a2a"' in a2a.headers["accept-signature"]
    assert '"content-digest"' in a2a.headers["accept-signature"]
    body, headers = _garbage(peer, endpoint(b))
    garbage = await b.client.post("/users/bob/a2a", content=body, headers=headers)
    assert garbage.status_code == 401 and "www-authenticate" in garbage.headers
    rest = await b.client.get("/v1/me")
    assert rest.status_code == 401
    assert rest.headers["www-authenticate"].startswith("Bearer")
    assert "accept-signature" not in rest.headers


async def _written(b: Instance) -> dict[str, int]:
    tables = ("messages", "a2a_tasks", "federation_inbox", "audit_log")
    return {t: await count(b, f"SELECT count(*) FROM {t}") for t in tables}


async def _rejections(b: Instance) -> list[str]:
    async with b.state.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT details_json FROM audit_log WHERE action = 'federation.inbound.rejected'"
            " ORDER BY created_at"
        )
    return [r["details_json"]["code"] for r in rows]


async def test_one_send_message_is_validated_once_and_admitted_once(setup) -> None:
    b, bob, peer = setup
    instance_url = f"{b.base_url}/a2a"
    # Malformed params: -32602 on both doors, and nothing is stored or audited.
    bad = b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": 7}}'
    before = await _written(b)
    for path, url in (("/users/bob/a2a", endpoint(b)), ("/a2a", instance_url)):
        response = await b.client.post(path, content=bad, headers=peer.signed_headers(url, bad))
        assert response.status_code == 200, response.text
        assert response.json()["error"]["code"] == -32602
    assert await _written(b) == before

    body = peer.rpc("hello")
    first = await b.client.post(
        "/users/bob/a2a", content=body, headers=peer.signed_headers(endpoint(b), body)
    )
    assert first.status_code == 200, first.text
    [contact] = (await bob.request("GET", "/v1/contacts")).json()
    blocked = await bob.request(
        "PATCH", f"/v1/contacts/{contact['id']}", json={"trust_level": "blocked"}
    )
    assert blocked.status_code == 200
    # A blocked peer is refused once per request, whichever door: the endpoint's recipient
    # at the edge, the recipient a /a2a message names in the method. One audit row each.
    before = await _written(b)
    for path, url, body in (
        ("/users/bob/a2a", endpoint(b), peer.rpc("let me in")),
        ("/a2a", instance_url, peer.rpc("let me in", recipient=bob.did)),
    ):
        response = await b.client.post(path, content=body, headers=peer.signed_headers(url, body))
        assert response.status_code == 403, response.text
        assert response.json()["code"] == "peer_blocked"
    after = await _written(b)
    assert after == {**before, "audit_log": before["audit_log"] + 2}
    assert await _rejections(b) == ["peer_blocked", "peer_blocked"]


async def test_the_instance_endpoint_asks_for_a_recipient(setup) -> None:
    b, _, peer = setup
    url = f"{b.base_url}/a2a"
    body = peer.rpc("to whom?")  # signed, but names no recipient
    before = await _written(b)
    response = await b.client.post("/a2a", content=body, headers=peer.signed_headers(url, body))
    assert response.status_code == 200, response.text  # a JSON-RPC error (A2A §9.5)
    error = response.json()["error"]
    assert error["code"] == -32602
    assert "None" not in error["message"]
    assert "tenant" in error["message"] and "recipient" in error["message"]
    assert await _written(b) == before


async def test_a_signed_message_reads_each_contact_entry_once(setup) -> None:
    """A signed SendMessage to an agent reads the recipient's contact entries for the peer
    twice: at the door, the peer's and its instance's in one statement (no separate lookup of
    the instance), and in the transaction once, for the policy verdict and the first-contact
    check alike (:meth:`gateway.db.Transaction.remembered`)."""
    b, bob, peer = setup
    agent_id = bob.profile["agent_did"].rsplit(":", 1)[1]
    async with b.state.pool.acquire() as conn:  # the agent answers signed peers itself
        await conn.execute(
            """UPDATE agents SET policies_json = '{"default": "auto", "rules": []}'
               WHERE id = $1""",
            agent_id,
        )
    url = f"{b.base_url}/agents/{agent_id}/a2a"
    transport = httpx.ASGITransport(app=b.app)
    async with httpx.AsyncClient(transport=transport, base_url=b.base_url) as client:
        for i in range(3):  # the first ones fill per-process caches (the DID, the key)
            body = peer.rpc(f"hello {i}")
            with counting(b.state.pool) as statements:
                response = await client.post(
                    f"/agents/{agent_id}/a2a", content=body, headers=peer.signed_headers(url, body)
                )
            assert response.status_code == 200, response.text
    contact_reads = [s for s in statements if "FROM peer_contacts" in s]
    assert len(contact_reads) == 2, "\n".join(statements)
    lookups = [s for s in statements if s.startswith("SELECT * FROM peer_agents")]
    assert lookups == [], "\n".join(statements)  # the peer's row comes with its verified key


async def test_a_blocked_instance_blocks_its_users(setup) -> None:
    """Blocking a peer's instance (its ``did:web:<host>`` as a contact) refuses the peer's
    signed requests, while the peer's own contact entry is not blocked."""
    b, bob, peer = setup
    body = peer.rpc("before")
    first = await b.client.post(
        "/users/bob/a2a", content=body, headers=peer.signed_headers(endpoint(b), body)
    )
    assert first.status_code == 200, first.text
    instance_did = peer.did.split(":users:")[0]
    async with b.state.pool.acquire() as conn:
        instance = await peers_store.upsert_peer(
            conn,
            did=instance_did,
            name=None,
            endpoint=f"{peer.base_url}/a2a",
            public_key_json={},
            agent_facts_json={},
            etag=None,
            fetched_at=datetime.now(UTC),
        )
        contact = await peers_store.upsert_contact(
            conn, user_id=bob.profile["id"], peer_id=instance.id, alias=None, added_via="test"
        )
        again = await b.client.post(
            "/users/bob/a2a", content=body, headers=peer.signed_headers(endpoint(b), body)
        )
        assert again.status_code == 200, again.text  # known, not blocked
        await conn.execute(
            """UPDATE peer_contacts SET policy_overrides_json = '{"trust_level": "blocked"}'
               WHERE id = $1""",
            contact.id,
        )
    body = peer.rpc("after")
    refused = await b.client.post(
        "/users/bob/a2a", content=body, headers=peer.signed_headers(endpoint(b), body)
    )
    assert refused.status_code == 403, refused.text
    assert refused.json()["code"] == "peer_blocked"
    assert instance_did in refused.json()["detail"]
