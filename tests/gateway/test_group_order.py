"""A group's home orders its messages: under concurrent posts from members on A (the home), B
and C, every instance ends with every message exactly once, each author's messages in the
order written, and the messages an instance receives from the home in the home's order.
Three real instances on loopback, each with its own database."""

from __future__ import annotations

import asyncio

from tests.gateway.harness import Instance, User, run_instance
from tests.gateway.test_group_membership import new_group, the_group
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


async def posts(user: User, conversation_id: str, tag: str) -> None:
    for n in range(POSTS):
        await user.send(conversation_id, f"{tag}-{n}")


async def test_concurrent_posts_from_three_instances_keep_the_homes_order(make_database) -> None:
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
