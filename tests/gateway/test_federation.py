"""Two Confer instances on loopback exchange signed messages over real HTTP and WebSockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from did.keys import jwk_to_ed25519_public
from tests.gateway.harness import Instance, next_event, run_instance


@pytest.fixture
async def pair(make_database) -> AsyncIterator[tuple[Instance, Instance]]:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        yield a, b


async def test_message_a_to_b_and_reply_b_to_a(pair: tuple[Instance, Instance]) -> None:
    a, b = pair
    alice = await a.register("alice")
    bob = await b.register("bob")

    contact = await alice.request("POST", "/v1/contacts", json={"did": bob.did})
    assert contact.status_code == 201, contact.text
    assert contact.json()["endpoint"] == f"{b.base_url}/users/bob/a2a"
    conversation = await alice.direct_with(bob.did)
    assert [p["participant_type"] for p in conversation["participants"]] == ["user", "peer_agent"]

    async with bob.websocket() as bob_ws, alice.websocket() as alice_ws:
        sent = await alice.send(conversation["id"], "Hello Bob, from instance A")
        echo = await next_event(alice_ws, "message.created")
        assert echo["data"]["id"] == sent["id"]

        received = (await next_event(bob_ws, "message.created"))["data"]
        assert received["content"] == "Hello Bob, from instance A"
        assert received["sender_type"] == "peer_agent"
        assert received["sender_did"] == alice.did

        # Bob's instance resolved Alice's DID document over HTTP and cached it.
        async with b.state.pool.acquire() as conn:
            peer = await conn.fetchrow("SELECT * FROM peer_agents WHERE did = $1", alice.did)
        assert peer["endpoint"] == f"{a.base_url}/users/alice/a2a"
        assert peer["etag"] and peer["etag"].startswith('"')
        key = peer["public_key_json"]["authentication"][0]
        assert key["id"] == f"{alice.did}#key-1"
        expected = a.state.identity.signing_key.public_key.public_bytes_raw()
        assert jwk_to_ed25519_public(key["publicKeyJwk"]).public_bytes_raw() == expected

        # Bob replies in the conversation his instance created; it travels back signed.
        page = await bob.request("GET", "/v1/conversations")
        bob_conversation = page.json()[0]
        assert bob_conversation["type"] == "direct_user_user"
        await bob.send(bob_conversation["id"], "Hi Alice, B here")
        reply = (await next_event(alice_ws, "message.created"))["data"]
        assert reply["content"] == "Hi Alice, B here"
        assert reply["sender_did"] == bob.did
        assert reply["conversation_id"] == conversation["id"]

    history = await alice.request("GET", f"/v1/conversations/{conversation['id']}/messages")
    assert [m["content"] for m in history.json()["items"]] == [
        "Hi Alice, B here",
        "Hello Bob, from instance A",
    ]
    for instance in (a, b):
        # the sender records its attempt after the peer answered: poll for it
        async with asyncio.timeout(20):
            while True:
                async with instance.state.pool.acquire() as conn:
                    rows = await conn.fetch("SELECT action FROM audit_log")
                actions = [r["action"] for r in rows]
                if "federation.outbound" in actions:
                    break
                await asyncio.sleep(0.1)
        assert "federation.inbound" in actions


async def test_contact_with_unresolvable_did_is_a_clear_4xx(
    pair: tuple[Instance, Instance],
) -> None:
    a, _ = pair
    alice = await a.register("alice")
    for did, code in [
        ("did:web:localhost%3A1:users:ghost", "did_unresolvable"),
        ("did:web:Bad Host", "did_invalid"),
        ("did:example:123", "did_invalid"),
    ]:
        response = await alice.request("POST", "/v1/contacts", json={"did": did})
        assert response.status_code == 422, response.text
        assert response.json()["code"] == code
    async with a.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM peer_agents") == 0


async def test_unknown_user_on_the_other_instance(pair: tuple[Instance, Instance]) -> None:
    a, b = pair
    alice = await a.register("alice")
    response = await alice.request("POST", "/v1/contacts", json={"did": f"{b.did}:users:nobody"})
    assert response.status_code == 422
    assert response.json()["code"] == "did_unresolvable"


async def test_stale_peer_is_revalidated_with_its_etag(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database(), peer_cache_ttl_seconds=1) as b,
    ):
        alice = await a.register("alice")
        bob = await b.register("bob")
        conversation = await alice.direct_with(bob.did)
        async with bob.websocket() as bob_ws:
            await alice.send(conversation["id"], "first")
            await next_event(bob_ws, "message.created")
            async with b.state.pool.acquire() as conn:
                before = await conn.fetchrow("SELECT * FROM peer_agents WHERE did = $1", alice.did)
            await asyncio.sleep(1.2)  # past the (test-sized) freshness window
            await alice.send(conversation["id"], "second")
            assert (await next_event(bob_ws, "message.created"))["data"]["content"] == "second"
        async with b.state.pool.acquire() as conn:
            after = await conn.fetchrow("SELECT * FROM peer_agents WHERE did = $1", alice.did)
    assert after["etag"] == before["etag"]
    assert after["fetched_at"] > before["fetched_at"]
    assert after["id"] == before["id"]
    assert after["updated_at"] == before["updated_at"]  # a 304 only touches fetched_at


async def test_plain_http_dids_need_the_setting(make_database) -> None:
    async with (
        run_instance(await make_database(), allow_http_dids=False) as strict,
        run_instance(await make_database()) as b,
    ):
        alice = await strict.register("alice")
        bob = await b.register("bob")
        response = await alice.request("POST", "/v1/contacts", json={"did": bob.did})
        # did:web means https: the instance tried https://localhost:<port>/… and failed.
        assert response.status_code == 422
        assert response.json()["code"] == "did_unresolvable"
        assert "SSL" in response.json()["detail"]  # it spoke TLS to a plain-HTTP port
