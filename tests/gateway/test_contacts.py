"""Contacts over real HTTP: CRUD, and what blocked and muted mean at the federation door."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.gateway.fakepeer import FakePeer, run_fake_peer
from tests.gateway.harness import Instance, User, next_event, run_instance


@pytest.fixture
async def setup(database_url: str) -> AsyncIterator[tuple[Instance, User, FakePeer]]:
    async with run_instance(database_url) as b, run_fake_peer() as peer:
        yield b, await b.register("bob"), peer


async def counts(b: Instance) -> dict[str, int]:
    async with b.state.pool.acquire() as conn:
        return {
            table: int(await conn.fetchval(f"SELECT count(*) FROM {table}"))
            for table in ("messages", "a2a_tasks", "federation_inbox", "peer_contacts")
        }


async def send(b: Instance, peer: FakePeer, text: str) -> int:
    body = peer.rpc(text)
    headers = peer.signed_headers(f"{b.base_url}/users/bob/a2a", body)
    response = await b.client.post("/users/bob/a2a", content=body, headers=headers)
    return response.status_code


async def test_contact_crud(setup) -> None:
    b, bob, peer = setup
    created = await bob.request(
        "POST",
        "/v1/contacts",
        json={
            "did": peer.did,
            "alias": "Mal",
            "tags": ["work", "ops"],
            "trust_level": "known",
            "policy_overrides": {
                "default": "deny",
                "rules": [{"action": "read", "effect": "allow"}],
            },
        },
    )
    assert created.status_code == 201, created.text
    contact = created.json()
    assert (contact["alias"], contact["tags"], contact["pinned"], contact["muted"]) == (
        "Mal",
        ["work", "ops"],
        False,
        False,
    )
    assert contact["trust_level"] == "known"
    assert contact["policy_overrides"]["default"] == "deny"
    assert contact["added_via"] == "did"
    cid = contact["id"]

    other = await b.register("carol")
    await other.request("POST", "/v1/contacts", json={"did": peer.did})
    assert [c["did"] for c in (await bob.request("GET", "/v1/contacts?tag=work")).json()] == [
        peer.did
    ]
    assert (await bob.request("GET", "/v1/contacts?tag=home")).json() == []

    patched = await bob.request(
        "PATCH", f"/v1/contacts/{cid}", json={"pinned": True, "alias": None}
    )
    assert patched.status_code == 200
    body = patched.json()
    assert body["pinned"] is True and body["alias"] is None
    assert body["tags"] == ["work", "ops"] and body["trust_level"] == "known"
    trust = await bob.request("PATCH", f"/v1/contacts/{cid}", json={"trust_level": "trusted"})
    assert trust.json()["policy_overrides"]["default"] == "deny"  # untouched
    assert (await bob.request("GET", f"/v1/contacts/{cid}")).json()["trust_level"] == "trusted"

    bad = await bob.request("PATCH", f"/v1/contacts/{cid}", json={"trust_level": "best friend"})
    assert bad.status_code == 422
    # Another user cannot see, change or remove bob's contact.
    for method in ("GET", "PATCH", "DELETE"):
        kwargs = {"json": {"pinned": False}} if method == "PATCH" else {}
        hidden = await other.request(method, f"/v1/contacts/{cid}", **kwargs)
        assert hidden.status_code == 404
        assert hidden.json()["code"] == "contact_not_found"

    assert (await bob.request("DELETE", f"/v1/contacts/{cid}")).status_code == 204
    assert (await bob.request("GET", f"/v1/contacts/{cid}")).status_code == 404
    assert (await bob.request("DELETE", f"/v1/contacts/{cid}")).status_code == 404
    assert (await bob.request("GET", "/v1/contacts")).json() == []


async def test_a_blocked_peer_is_refused_at_the_door_with_no_side_effects(setup) -> None:
    b, bob, peer = setup
    assert await send(b, peer, "first") == 200
    [contact] = (await bob.request("GET", "/v1/contacts")).json()
    blocked = await bob.request(
        "PATCH", f"/v1/contacts/{contact['id']}", json={"trust_level": "blocked"}
    )
    assert blocked.status_code == 200
    before = await counts(b)
    async with bob.websocket() as ws:
        body = peer.rpc("let me in")
        headers = peer.signed_headers(f"{b.base_url}/users/bob/a2a", body)
        response = await b.client.post("/users/bob/a2a", content=body, headers=headers)
        assert response.status_code == 403
        assert response.json()["code"] == "peer_blocked"
        assert await counts(b) == before
        # Unblocking lets the next message in, and it is the first event bob sees.
        await bob.request("PATCH", f"/v1/contacts/{contact['id']}", json={"trust_level": "known"})
        assert await send(b, peer, "sorry") == 200
        event = await next_event(ws, "message.created")
    assert event["data"]["content"] == "sorry"
    async with b.state.pool.acquire() as conn:
        actions = [
            r["details_json"]["code"]
            for r in await conn.fetch(
                "SELECT details_json FROM audit_log WHERE action = 'federation.inbound.rejected'"
            )
        ]
    assert actions == ["peer_blocked"]


async def test_a_muted_peer_is_stored_without_notification(setup) -> None:
    b, bob, peer = setup
    added = await bob.request("POST", "/v1/contacts", json={"did": peer.did, "muted": True})
    assert added.json()["muted"] is True
    async with bob.websocket() as ws:
        assert await send(b, peer, "quietly") == 200
        assert (await counts(b))["messages"] == 1
        await bob.request("PATCH", f"/v1/contacts/{added.json()['id']}", json={"muted": False})
        assert await send(b, peer, "loudly") == 200
        event = await next_event(ws, "message.created")
    assert event["data"]["content"] == "loudly"
    conversations = (await bob.request("GET", "/v1/conversations")).json()
    page = await bob.request("GET", f"/v1/conversations/{conversations[0]['id']}/messages")
    assert [m["content"] for m in page.json()["items"]] == ["loudly", "quietly"]
