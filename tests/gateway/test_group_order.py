"""A group's home orders its messages, and every instance shows them in that one order: under
concurrent posts from members on A (the home), B and C, every instance ends with every message
exactly once and lists them (REST) in the same order, each with the home's id as its
``position``; a replica's own post that the home ordered after a message reaching the replica
later moves behind it (``message.ordered`` on its author's socket). Three real instances on
loopback, each with its own database."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

import pytest

from a2a.confer import answered_position
from gateway.db import transaction
from gateway.services import group_order
from tests.gateway.harness import Instance, User
from tests.gateway.test_group_membership import group_of_three
from tests.gateway.test_group_replicas import settle

POSTS = 6


async def in_order(instance: Instance, conversation_id: str) -> list[str]:
    """The texts of a conversation in the order its members read them (by id)."""
    async with instance.state.pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT content FROM messages WHERE conversation_id = $1
               AND deleted_at IS NULL ORDER BY id""",
            conversation_id,
        )
    return [r["content"] for r in rows]


async def listed(user: User, conversation_id: str, limit: int = 200) -> list[dict[str, Any]]:
    """The conversation's messages as its member's client reads them (REST, pages of
    ``limit``), oldest first."""
    items: list[dict[str, Any]] = []
    before: str | None = None
    while True:
        params = {"limit": str(limit), **({"before": before} if before else {})}
        response = await user.request(
            "GET", f"/v1/conversations/{conversation_id}/messages", params=params
        )
        assert response.status_code == 200, response.text
        page = response.json()
        items.extend(page["items"])
        before = page["next_before"]
        if before is None:
            return items[::-1]


async def posts(user: User, conversation_id: str, tag: str) -> None:
    for n in range(POSTS):
        await user.send(conversation_id, f"{tag}-{n}")


async def test_concurrent_posts_from_three_instances_keep_the_homes_order(make_database) -> None:
    async with group_of_three(make_database) as (a, b, c, alice, bob, carol, g1, rb, rc):
        await asyncio.gather(posts(alice, g1, "a"), posts(bob, rb, "b"), posts(carol, rc, "c"))
        everything = {f"{t}-{n}" for t in "abc" for n in range(POSTS)}
        for _ in range(1200):
            seen = [await in_order(i, cid) for i, cid in ((a, g1), (b, rb), (c, rc))]
            if all(set(s) == everything for s in seen):
                break
            await asyncio.sleep(0.05)
        await settle(a, b, c)
        home, on_b, on_c = [await in_order(i, cid) for i, cid in ((a, g1), (b, rb), (c, rc))]
        for seen in (home, on_b, on_c):
            assert sorted(seen) == sorted(everything)  # each exactly once
            for tag in "abc":  # each author's posts in the order written
                assert [t for t in seen if t[0] == tag] == [f"{tag}-{n}" for n in range(POSTS)]
        # What a replica receives from the home arrives in the home's order.
        assert [t for t in on_b if t[0] != "b"] == [t for t in home if t[0] != "b"]
        assert [t for t in on_c if t[0] != "c"] == [t for t in home if t[0] != "c"]
        # Every member reads the same order, each message at the home's id of it.
        at_home = await listed(alice, g1)
        assert [m["content"] for m in at_home] == home
        assert all(m["position"] == m["id"] for m in at_home)
        for user, cid in ((bob, rb), (carol, rc)):
            replica = await listed(user, cid)
            assert [m["content"] for m in replica] == home
            assert [m["position"] for m in replica] == [m["id"] for m in at_home]


async def test_a_replicas_own_post_moves_behind_what_the_home_ordered_before_it(
    make_database,
) -> None:
    """Carol's post (C) reaches the home first but reaches B only after bob's later post was
    stored on B: B still lists carol's first, as every instance does."""
    async with group_of_three(make_database) as (a, b, c, alice, bob, carol, g1, rb, rc):
        await settle(a, b, c)
        # The home holds what it relays to B: B's destination is parked at A (until B next
        # reaches A, which unparks it).
        to_b = urlsplit(b.base_url).netloc.replace("127.0.0.1", "localhost")
        async with a.state.pool.acquire() as conn:
            await conn.execute(
                """INSERT INTO federation_destinations (destination, failures, parked_at)
                   VALUES ($1, 5, NOW())
                   ON CONFLICT (destination) DO UPDATE SET failures = 5, parked_at = NOW()""",
                to_b,
            )
        first = await carol.send(rc, "carol first")
        for _ in range(600):
            if "carol first" in [m["content"] for m in await listed(alice, g1)]:
                break
            await asyncio.sleep(0.05)
        assert "carol first" not in [m["content"] for m in await listed(bob, rb)]
        async with bob.websocket() as ws:
            second = await bob.send(rb, "bob second")  # stored on B before carol's arrives
            ordered = None
            async with asyncio.timeout(60):
                while ordered is None:
                    frame = json.loads(await ws.recv())
                    if frame.get("type") == "message.ordered":
                        ordered = frame["data"]
        await settle(a, b, c)
        home = await listed(alice, g1)
        assert [m["content"] for m in home] == ["carol first", "bob second"]
        on_b = await listed(bob, rb)
        assert [m["content"] for m in on_b] == ["carol first", "bob second"]
        # B stored bob's post first: its id is below the one carol's copy got there.
        bobs, carols = on_b[1], on_b[0]
        assert bobs["id"] == second["id"] and bobs["id"] < carols["id"]
        assert [m["position"] for m in on_b] == [m["id"] for m in home]
        assert ordered == {"conversation_id": rb, "id": second["id"], "position": home[1]["id"]}
        detail = await bob.request("GET", f"/v1/conversations/{rb}/messages/{second['id']}")
        assert detail.status_code == 200, detail.text
        assert detail.json()["message"]["position"] == home[1]["id"]
        on_c = await listed(carol, rc)
        assert [m["content"] for m in on_c] == ["carol first", "bob second"]
        assert on_c[0]["id"] == first["id"]

        # A position is taken once, from the group's home only, and only as a ULID.
        home_host = urlsplit(a.base_url).netloc.replace("127.0.0.1", "localhost")
        other_host = urlsplit(c.base_url).netloc.replace("127.0.0.1", "localhost")
        early = "00000000000000000000000000"
        for message_id, destination, position in [
            (carols["id"], other_host, early),  # not the home
            (carols["id"], home_host, early),  # placed already
            (bobs["id"], home_host, early),  # placed already
            (bobs["id"], home_host, "not a ulid"),
            ("0" * 26, home_host, early),  # no such message
        ]:
            async with transaction(b.state.pool) as tx:
                taken = await group_order.place_answered(
                    tx, None, message_id=message_id, destination=destination, position=position
                )
            assert not taken
        assert [m["content"] for m in await listed(bob, rb)] == ["carol first", "bob second"]


@pytest.mark.parametrize(
    "answer",
    [
        None,
        [],
        "task",
        {"task": None},
        {"task": {"metadata": []}},
        {"task": {"metadata": {"confer": "x"}}},
        {"task": {"metadata": {"confer": {"position": 7}}}},
        {"message": {"metadata": {"confer": {"position": "01JDQ5V9ZPE2T7R3S8N4M6K1H0"}}}},
    ],
)
def test_an_answer_without_a_task_position_places_nothing(answer: Any) -> None:
    assert answered_position(answer) is None


def test_the_tasks_position_is_read() -> None:
    answer = {"task": {"metadata": {"confer": {"position": "01JDQ5V9ZPE2T7R3S8N4M6K1H0"}}}}
    assert answered_position(answer) == "01JDQ5V9ZPE2T7R3S8N4M6K1H0"


async def _unread_of(user: User, conversation_id: str, did: str) -> int:
    response = await user.request("GET", f"/v1/conversations/{conversation_id}/reads")
    assert response.status_code == 200, response.text
    (state,) = [s for s in response.json()["items"] if s["did"] == did]
    return int(state["unread"])


async def test_a_read_counts_in_the_homes_order_on_every_instance(make_database) -> None:
    """dave's post on B reaches B before alice's earlier-ordered one does; bob reads up to
    alice's: dave's, shown after it, is still unread for him — on B, at the home and on C."""
    async with group_of_three(make_database) as (a, b, c, alice, bob, carol, g1, rb, rc):
        dave = await b.register("dave")
        added = await alice.request(
            "POST", f"/v1/conversations/{g1}/participants", json={"did": dave.did}
        )
        assert added.status_code == 201, added.text
        await settle(a, b, c)
        to_b = urlsplit(b.base_url).netloc.replace("127.0.0.1", "localhost")
        async with a.state.pool.acquire() as conn:  # the home holds what it sends B
            await conn.execute(
                """INSERT INTO federation_destinations (destination, failures, parked_at)
                   VALUES ($1, 5, NOW())
                   ON CONFLICT (destination) DO UPDATE SET failures = 5, parked_at = NOW()""",
                to_b,
            )
        await alice.send(g1, "alice first")
        await dave.send(rb, "dave second")  # stored on B before alice's arrives there
        for _ in range(600):
            if len(await listed(bob, rb)) == 2:
                break
            await asyncio.sleep(0.05)
        await settle(a, b, c)
        on_b = await listed(bob, rb)
        assert [m["content"] for m in on_b] == ["alice first", "dave second"]
        assert on_b[1]["id"] < on_b[0]["id"]  # dave's arrived first on B
        read = await bob.request(
            "POST", f"/v1/conversations/{rb}/read", json={"message_id": on_b[0]["id"]}
        )
        assert read.status_code == 200, read.text
        assert read.json()["unread"] == 1
        assert await _unread_of(bob, rb, bob.did) == 1
        await settle(a, b, c)
        for user, cid in ((alice, g1), (carol, rc)):
            for _ in range(600):
                if await _unread_of(user, cid, bob.did) == 1:
                    break
                await asyncio.sleep(0.05)
            assert await _unread_of(user, cid, bob.did) == 1
        # A home that gives several messages one position: paging one by one still reads
        # each once (the id breaks the tie).
        whole = [m["id"] for m in await listed(bob, rb)]
        async with b.state.pool.acquire() as conn:
            await conn.execute(
                "UPDATE message_positions SET position = $2 WHERE conversation_id = $1",
                rb,
                "01M00000000000000000000000",
            )
        assert sorted(m["id"] for m in await listed(bob, rb, limit=1)) == sorted(whole)
        # Reading dave's (later in the order, earlier in arrival) moves bob's count to 0.
        read = await bob.request(
            "POST", f"/v1/conversations/{rb}/read", json={"message_id": on_b[1]["id"]}
        )
        assert read.status_code == 200 and read.json()["unread"] == 0, read.text
