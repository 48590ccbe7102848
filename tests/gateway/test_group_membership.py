"""Signed membership events across three instances: the home owns a group's name, members,
roles and archive state; replicas follow its events, and a replica member's changes are made
(or refused) by the home."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NamedTuple

from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import Instance, User, run_instance


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    for _ in range(600):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never: {what}")


async def new_group(owner: User, name: str, dids: list[str]) -> str:
    """Create a group of ``owner`` with ``dids``; returns its id."""
    created = await owner.request(
        "POST", "/v1/conversations", json={"type": "group", "name": name, "participant_dids": dids}
    )
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


class GroupOfThree(NamedTuple):
    """Instances A (the home), B and C; alice, bob and carol on them; the group ``g1`` at
    home and its replicas ``rb`` (B) and ``rc`` (C)."""

    a: Instance
    b: Instance
    c: Instance
    alice: User
    bob: User
    carol: User
    g1: str
    rb: str
    rc: str


@contextlib.asynccontextmanager
async def group_of_three(make_database: Any) -> AsyncIterator[GroupOfThree]:
    """Three running instances, each with its own database, and a group "G1" of alice (A)
    with bob (B) and carol (C), once both replicas exist."""
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
        run_instance(await make_database()) as c,
    ):
        alice, bob, carol = (
            await a.register("alice"),
            await b.register("bob"),
            await c.register("carol"),
        )
        g1 = await new_group(alice, "G1", [bob.did, carol.did])
        rb, rc = (await the_group(bob))["id"], (await the_group(carol))["id"]
        yield GroupOfThree(a, b, c, alice, bob, carol, g1, rb, rc)


async def groups_of(user: User) -> list[dict[str, Any]]:
    response = await user.request("GET", "/v1/conversations")
    assert response.status_code == 200, response.text
    body = response.json()
    items = body["items"] if isinstance(body, dict) else body
    return [c for c in items if c["type"] == "group"]


async def the_group(user: User) -> dict[str, Any]:
    """The one group ``user`` takes part in, as they see it (waits for it to appear)."""
    found: list[dict[str, Any]] = []

    async def appeared() -> bool:
        found[:] = await groups_of(user)
        return len(found) == 1

    await eventually(appeared, f"a group for {user.did}")
    response = await user.request("GET", f"/v1/conversations/{found[0]['id']}")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def view(user: User, conversation_id: str) -> dict[str, Any] | None:
    response = await user.request("GET", f"/v1/conversations/{conversation_id}")
    return dict(response.json()) if response.status_code == 200 else None


def member_dids(conversation: dict[str, Any]) -> set[str]:
    return {p["did"] for p in conversation["participants"] if p.get("did")}


def participant_id(conversation: dict[str, Any], did: str) -> str:
    (row,) = [p for p in conversation["participants"] if p.get("did") == did]
    return str(row["id"])


def role_of(conversation: dict[str, Any], did: str) -> str:
    (row,) = [p for p in conversation["participants"] if p.get("did") == did]
    return str(row["role"])


async def until(user: User, conversation_id: str, test: Callable[[Any], bool], what: str) -> None:
    async def check() -> bool:
        return test(await view(user, conversation_id))

    await eventually(check, what)


async def test_membership_events_reach_every_replica_and_the_home_enforces_its_rules(
    make_database,
) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
        run_instance(await make_database()) as c,
    ):
        alice, dave = await a.register("alice"), await a.register("dave")
        bob = await b.register("bob")
        carol, erin = await c.register("carol"), await c.register("erin")
        g1 = await new_group(alice, "G1", [bob.did, carol.did, dave.did])

        # No message yet: the create event alone gives B and C their replica.
        replica_b, replica_c = await the_group(bob), await the_group(carol)
        for replica in (replica_b, replica_c):
            assert replica["name"] == "G1"
            assert {alice.did, bob.did, carol.did, dave.did} <= member_dids(replica)
            assert role_of(replica, alice.did) == "admin"
        rb, rc = replica_b["id"], replica_c["id"]

        # A member of a replica may not do what only admins may: the home refuses, clearly.
        kick = await carol.request(
            "DELETE", f"/v1/conversations/{rc}/participants/{participant_id(replica_c, bob.did)}"
        )
        assert kick.status_code == 403, kick.text
        assert kick.json()["code"] == "not_conversation_admin"
        rename = await carol.request("PATCH", f"/v1/conversations/{rc}", json={"name": "mine"})
        assert rename.status_code == 403 and rename.json()["code"] == "not_conversation_admin"
        home_view = await view(alice, g1)
        assert home_view is not None and bob.did in member_dids(home_view)
        assert home_view["name"] == "G1"
        async with a.state.pool.acquire() as conn:
            refused = await conn.fetch(
                "SELECT details_json FROM audit_log WHERE action = 'group.request.refused'"
            )
        assert len(refused) == 2
        assert {_details(r)["code"] for r in refused} == {"not_conversation_admin"}

        # The home promotes bob: his replica shows him admin.
        promoted = await alice.request(
            "PATCH",
            f"/v1/conversations/{g1}/participants/{participant_id(home_view, bob.did)}",
            json={"role": "admin"},
        )
        assert promoted.status_code == 204, promoted.text
        await until(bob, rb, lambda v: v["membership"]["role"] == "admin", "bob admin on B")
        await until(carol, rc, lambda v: role_of(v, bob.did) == "admin", "bob admin on C")

        # Bob, now an admin, renames from his replica: the home makes it, everyone follows.
        renamed = await bob.request("PATCH", f"/v1/conversations/{rb}", json={"name": "G2"})
        assert renamed.status_code == 200, renamed.text
        assert renamed.json()["name"] == "G2"  # taken from the home's answer at once
        await until(alice, g1, lambda v: v["name"] == "G2", "G2 at home")
        await until(carol, rc, lambda v: v["name"] == "G2", "G2 on C")

        # Bob adds erin (of C) from B: C's replica lets erin in.
        added = await bob.request(
            "POST", f"/v1/conversations/{rb}/participants", json={"did": erin.did}
        )
        assert added.status_code == 201, added.text
        assert erin.did in member_dids(added.json())
        erin_view = await the_group(erin)
        assert erin_view["id"] == rc and erin_view["name"] == "G2"
        # Adding her twice is the home's 409, passed on.
        again = await bob.request(
            "POST", f"/v1/conversations/{rb}/participants", json={"did": erin.did}
        )
        assert again.status_code == 409 and again.json()["code"] == "already_participant"

        # Bob kicks carol from B: she is out everywhere, erin (same instance) stays.
        replica_b_now = await view(bob, rb)
        assert replica_b_now is not None
        kicked = await bob.request(
            "DELETE",
            f"/v1/conversations/{rb}/participants/{participant_id(replica_b_now, carol.did)}",
        )
        assert kicked.status_code == 204, kicked.text
        await until(carol, rc, lambda v: v is None, "carol out of C's replica")
        await until(erin, rc, lambda v: v is not None and carol.did not in member_dids(v), "C")
        await until(alice, g1, lambda v: carol.did not in member_dids(v), "carol out at home")
        refused_post = await carol.request(
            "POST", f"/v1/conversations/{rc}/messages", json={"content": "still here?"}
        )
        assert refused_post.status_code == 404, refused_post.text

        # Dave leaves at home; bob's replica follows.
        left = await dave.request("POST", f"/v1/conversations/{g1}/leave")
        assert left.status_code == 204, left.text
        await until(bob, rb, lambda v: dave.did not in member_dids(v), "dave gone on B")

        # Bob archives from B: read-only everywhere.
        archived = await bob.request("PATCH", f"/v1/conversations/{rb}", json={"archived": True})
        assert archived.status_code == 200, archived.text
        assert archived.json()["archived_at"] is not None
        await until(alice, g1, lambda v: v["archived_at"] is not None, "archived at home")
        await until(erin, rc, lambda v: v["archived_at"] is not None, "archived on C")
        blocked = await erin.request(
            "POST", f"/v1/conversations/{rc}/messages", json={"content": "archived?"}
        )
        assert blocked.status_code == 409 and blocked.json()["code"] == "conversation_archived"

        # Bob leaves from B: gone on B and at home.
        gone = await bob.request("POST", f"/v1/conversations/{rb}/leave")
        assert gone.status_code == 204, gone.text
        await until(bob, rb, lambda v: v is None, "bob out of B's replica")
        await until(alice, g1, lambda v: bob.did not in member_dids(v), "bob gone at home")


async def test_only_the_home_instance_announces_membership(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
        run_fake_peer() as mallory,
    ):
        alice, bob = await a.register("alice"), await b.register("bob")
        g1 = await new_group(alice, "G1", [bob.did])
        replica = await the_group(bob)

        # Mallory (a user-level DID, not the home instance) claims A's group has a new member
        # list without bob: at B that is no event, and no request B could make.
        body = json.loads(mallory.rpc("(membership)"))
        message = body["params"]["message"]
        message["contextId"] = g1
        message["metadata"]["confer"].update(
            conversation={"id": g1, "home": a.did, "name": "stolen", "members": [mallory.did]},
            membership={"event": "kick", "member": bob.did},
        )
        raw = json.dumps(body).encode()
        url = f"{b.base_url}/a2a"
        answer = await b.client.post("/a2a", content=raw, headers=mallory.signed_headers(url, raw))
        assert answer.status_code == 200, answer.text
        error = answer.json()["error"]
        assert error["code"] == -32060
        assert error["data"][0]["metadata"]["code"] == "not_group_member"
        after = await view(bob, replica["id"])
        assert after is not None and after["name"] == "G1" and bob.did in member_dids(after)

        # The same request at the home, from a non-member: refused there too.
        url = f"{a.base_url}/a2a"
        raw = json.dumps({**body, "id": 2}).encode()
        answer = await a.client.post("/a2a", content=raw, headers=mallory.signed_headers(url, raw))
        error = answer.json()["error"]
        assert error["code"] == -32060
        assert error["data"][0]["metadata"]["code"] == "not_group_member"
        home = await view(alice, g1)
        assert home is not None and bob.did in member_dids(home)

        # A malformed membership member is -32602, nothing changes.
        message["metadata"]["confer"]["membership"] = {"event": "explode"}
        raw = json.dumps({**body, "id": 3}).encode()
        url = f"{b.base_url}/a2a"
        answer = await b.client.post("/a2a", content=raw, headers=mallory.signed_headers(url, raw))
        assert answer.json()["error"]["code"] == -32602


def _details(record: Any) -> dict[str, Any]:
    value = record["details_json"]
    return dict(json.loads(value) if isinstance(value, str) else value)


async def test_a_change_on_a_replica_whose_home_is_down_changes_nothing(make_database) -> None:
    async with run_instance(await make_database()) as b:
        bob = await b.register("bob")
        async with run_instance(await make_database()) as a:
            alice = await a.register("alice")
            await new_group(alice, "G1", [bob.did])
            replica = await the_group(bob)
        # A is gone: the home cannot make the change, so nobody does.
        renamed = await bob.request(
            "PATCH", f"/v1/conversations/{replica['id']}", json={"name": "X"}
        )
        assert renamed.status_code == 502, renamed.text
        assert renamed.json()["code"] == "group_home_unreachable"
        after = await view(bob, replica["id"])
        assert after is not None and after["name"] == "G1"
        # Typing towards the dead home is dropped at once, never queued.
        async with b.state.pool.acquire() as conn:
            before = await conn.fetchval("SELECT count(*) FROM federation_outbox")
        async with bob.websocket() as ws:
            await ws.send(json.dumps({"type": "typing", "conversation_id": replica["id"]}))
            await asyncio.sleep(0.5)
        assert b.state.signals is not None
        await b.state.signals.drain()
        async with b.state.pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM federation_outbox") == before
