"""Conversation types, participants, roles, archive and membership over real HTTP/WS."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import websockets

from tests.gateway.harness import Instance, User, next_event, run_instance


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


async def _create(user: User, **body: Any) -> Any:
    return await user.request("POST", "/v1/conversations", json=body)


async def _post(user: User, cid: str, text: str = "hi") -> Any:
    return await user.request("POST", f"/v1/conversations/{cid}/messages", json={"content": text})


async def test_all_four_conversation_types(instance: Instance) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    bob_agent = bob.profile["agent_did"]
    # Another user's agent joins only when public (test_key_consent covers the refusals).
    public = await bob.request("PATCH", "/v1/agents/me", json={"is_public": True})
    assert public.status_code == 200

    uu = await _create(alice, type="direct_user_user", participant_did=bob.did)
    assert uu.status_code == 201 and uu.json()["type"] == "direct_user_user"
    wrong = await _create(alice, type="direct_user_user", participant_did=bob_agent)
    assert wrong.status_code == 422

    results = await asyncio.gather(
        *(_create(alice, type="direct_user_agent", participant_did=bob_agent) for _ in range(10))
    )
    assert {r.status_code for r in results} <= {200, 201}
    ua = {r.json()["id"] for r in results}
    assert len(ua) == 1
    kinds = {p["participant_type"] for p in results[0].json()["participants"]}
    assert kinds == {"user", "own_agent"}

    aa = await _create(alice, type="direct_agent_agent", participant_did=bob_agent)
    assert aa.status_code == 201
    body = aa.json()
    roles = {(p["participant_type"], p["did"]): p["role"] for p in body["participants"]}
    assert roles[("user", alice.did)] == "observer"
    assert roles[("own_agent", alice.profile["agent_did"])] == "member"
    assert body["membership"]["role"] == "observer"
    refused = await _post(alice, body["id"])
    assert refused.status_code == 403 and refused.json()["code"] == "observer_cannot_post"

    group = await _create(alice, type="group", name="Team", participant_dids=[bob.did, bob_agent])
    assert group.status_code == 201
    g = group.json()
    assert g["type"] == "group" and g["name"] == "Team"
    assert g["membership"]["role"] == "admin"
    assert len(g["participants"]) == 3
    bad = await _create(alice, type="group", participant_did=bob.did)
    assert bad.status_code == 422


async def test_group_administration(instance: Instance) -> None:
    alice, bob, carol, dave = [
        await instance.register(n) for n in ("alice", "bob", "carol", "dave")
    ]
    g = (await _create(alice, type="group", name="G", participant_dids=[bob.did, carol.did])).json()
    cid = g["id"]
    path = f"/v1/conversations/{cid}"

    denied = await bob.request("POST", f"{path}/participants", json={"did": dave.did})
    assert denied.status_code == 403 and denied.json()["code"] == "not_conversation_admin"

    async with dave.websocket() as dave_ws, bob.websocket() as bob_ws:
        added = await alice.request("POST", f"{path}/participants", json={"did": dave.did})
        assert added.status_code == 201
        event = await next_event(dave_ws, "participant.changed")
        assert (
            event["data"]["change"] == "added" and event["data"]["participant"]["did"] == dave.did
        )
        again = await alice.request("POST", f"{path}/participants", json={"did": dave.did})
        assert again.status_code == 409 and again.json()["code"] == "already_participant"

        renamed = await alice.request("PATCH", path, json={"name": "Renamed"})
        assert renamed.status_code == 200 and renamed.json()["name"] == "Renamed"
        changed = await next_event(bob_ws, "conversation.changed")
        assert changed["data"]["name"] == "Renamed"
    assert (await bob.request("PATCH", path, json={"name": "x"})).status_code == 403

    dave_id = next(p["id"] for p in added.json()["participants"] if p["did"] == dave.did)
    role = await alice.request("PATCH", f"{path}/participants/{dave_id}", json={"role": "observer"})
    assert role.status_code == 204
    assert (await _post(dave, cid)).status_code == 403
    assert (await dave.request("GET", f"{path}/messages")).status_code == 200  # observers read

    assert (await bob.request("POST", f"{path}/leave")).status_code == 204
    for method, sub in (("GET", ""), ("GET", "/messages"), ("POST", "/leave")):
        assert (await bob.request(method, path + sub)).status_code == 404
    assert (await _post(bob, cid)).status_code == 404

    carol_id = next(p["id"] for p in g["participants"] if p["did"] == carol.did)
    assert (await alice.request("DELETE", f"{path}/participants/{carol_id}")).status_code == 204
    assert (await carol.request("GET", path)).status_code == 404
    gone = await alice.request("DELETE", f"{path}/participants/{carol_id}")
    assert gone.status_code == 404 and gone.json()["code"] == "participant_not_found"

    archived = await alice.request("PATCH", path, json={"archived": True})
    assert archived.json()["archived_at"] is not None
    refused = await _post(alice, cid)
    assert refused.status_code == 409 and refused.json()["code"] == "conversation_archived"
    await alice.request("PATCH", path, json={"archived": False})
    assert (await _post(alice, cid)).status_code == 201


async def test_direct_conversations_are_not_groups(instance: Instance) -> None:
    alice, bob, carol = [await instance.register(n) for n in ("alice", "bob", "carol")]
    direct = await alice.direct_with(bob.did)
    path = f"/v1/conversations/{direct['id']}/participants"
    refused = await alice.request("POST", path, json={"did": carol.did})
    assert refused.status_code == 409 and refused.json()["code"] == "not_a_group"


async def test_last_admin_leaving_promotes_the_earliest_member(instance: Instance) -> None:
    alice, bob, carol = [await instance.register(n) for n in ("alice", "bob", "carol")]
    g = (await _create(alice, type="group", participant_dids=[bob.did, carol.did])).json()
    assert (await alice.request("POST", f"/v1/conversations/{g['id']}/leave")).status_code == 204
    seen = (await bob.request("GET", f"/v1/conversations/{g['id']}")).json()
    assert seen["membership"]["role"] == "admin"
    carol_view = (await carol.request("GET", f"/v1/conversations/{g['id']}")).json()
    assert carol_view["membership"]["role"] == "member"


async def test_notification_setting_and_outsiders(instance: Instance) -> None:
    alice, bob, eve = [await instance.register(n) for n in ("alice", "bob", "eve")]
    direct = await alice.direct_with(bob.did)
    path = f"/v1/conversations/{direct['id']}"
    updated = await bob.request("PATCH", f"{path}/membership", json={"notification": "none"})
    assert updated.status_code == 200 and updated.json()["membership"]["notification"] == "none"
    mine = (await alice.request("GET", path)).json()["membership"]
    assert mine["notification"] == "all" and mine["last_read_at"] is None
    bad = await bob.request("PATCH", f"{path}/membership", json={"notification": "loud"})
    assert bad.status_code == 422
    for method, sub, body in (
        ("GET", "", None),
        ("PATCH", "", {"name": "x"}),
        ("PATCH", "/membership", {"notification": "all"}),
        ("POST", "/participants", {"did": eve.did}),
        ("POST", "/leave", None),
        ("GET", "/messages", None),
    ):
        response = await eve.request(method, path + sub, json=body)
        assert response.status_code == 404, (method, sub)
        assert response.json()["code"] == "conversation_not_found"


async def test_removed_user_gets_the_event_and_loses_live_events(instance: Instance) -> None:
    alice, bob = [await instance.register(n) for n in ("alice", "bob")]
    g = (await _create(alice, type="group", participant_dids=[bob.did])).json()
    bob_id = next(p["id"] for p in g["participants"] if p["did"] == bob.did)
    async with websockets.connect(
        instance.ws_url, subprotocols=["confer.v1", f"bearer.{bob.token}"]
    ) as ws:
        await ws.recv()
        await alice.request("DELETE", f"/v1/conversations/{g['id']}/participants/{bob_id}")
        event = await next_event(ws, "participant.changed")
        assert event["data"]["change"] == "removed"
        await _post(alice, g["id"], "secret")
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                while True:
                    frame = json.loads(await ws.recv())
                    assert frame["type"] != "message.created"


async def test_group_size_is_capped_before_anything_is_resolved(database_url: str) -> None:
    async with run_instance(database_url, max_group_members=3) as capped:
        alice = await capped.register("alice")
        bob = await capped.register("bob")
        carol = await capped.register("carol")
        dave = await capped.register("dave")
        too_many = await _create(
            alice, type="group", name="g", participant_dids=[bob.did, carol.did, dave.did]
        )
        assert (too_many.status_code, too_many.json()["code"]) == (422, "group_too_large")
        # the creator counts once, even when named
        group = await _create(
            alice, type="group", name="g", participant_dids=[alice.did, bob.did, carol.did]
        )
        assert group.status_code == 201, group.text
        added = await alice.request(
            "POST", f"/v1/conversations/{group.json()['id']}/participants", json={"did": dave.did}
        )
        assert (added.status_code, added.json()["code"]) == (422, "group_too_large")


async def test_remote_dids_of_a_group_are_fetched_with_bounded_concurrency(
    instance: Instance,
) -> None:
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    from tests.gateway.harness import free_port, serve

    seen = {"now": 0, "peak": 0, "total": 0}

    async def did_document(request: Any) -> Response:
        seen["now"] += 1
        seen["total"] += 1
        seen["peak"] = max(seen["peak"], seen["now"])
        await asyncio.sleep(0.3)
        seen["now"] -= 1
        return Response(status_code=404)

    port = free_port()
    host = Starlette(routes=[Route("/users/{name}/did.json", did_document)])
    alice = await instance.register("alice")
    async with serve(host, port):
        remote = [f"did:web:localhost%3A{port}:users:u{i}" for i in range(65)]
        over_budget = await _create(alice, type="group", name="g", participant_dids=remote)
        assert (over_budget.status_code, over_budget.json()["code"]) == (422, "group_too_large")
        assert seen["total"] == 0  # refused before any fetch
        refused = await _create(alice, type="group", name="g", participant_dids=remote[:10])
        assert refused.status_code == 422, refused.text
    # concurrent, but never more than two fetches at once to one host
    assert seen["peak"] == 2, seen


async def test_a_role_change_never_leaves_a_group_without_an_admin(instance: Instance) -> None:
    alice, bob = [await instance.register(n) for n in ("alice", "bob")]
    g = (await _create(alice, type="group", participant_dids=[bob.did])).json()
    path = f"/v1/conversations/{g['id']}/participants"
    ids = {p["did"]: p["id"] for p in g["participants"]}
    alone = await alice.request("PATCH", f"{path}/{ids[alice.did]}", json={"role": "member"})
    assert alone.status_code == 409 and alone.json()["code"] == "last_admin"
    assert "someone else an admin" in alone.json()["detail"]
    promoted = await alice.request("PATCH", f"{path}/{ids[bob.did]}", json={"role": "admin"})
    assert promoted.status_code == 204
    stepped = await alice.request("PATCH", f"{path}/{ids[alice.did]}", json={"role": "member"})
    assert stepped.status_code == 204
    refused = await alice.request("PATCH", f"{path}/{ids[bob.did]}", json={"role": "member"})
    assert refused.status_code == 403 and refused.json()["code"] == "not_conversation_admin"
    last = await bob.request("PATCH", f"{path}/{ids[bob.did]}", json={"role": "observer"})
    assert last.status_code == 409 and last.json()["code"] == "last_admin"
    seen = (await alice.request("GET", f"/v1/conversations/{g['id']}")).json()
    assert {p["did"]: p["role"] for p in seen["participants"]} == {
        alice.did: "member",
        bob.did: "admin",
    }
