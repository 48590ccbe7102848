"""A group on one instance with several people of another instance: each gets every message."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.gateway.harness import Instance, User, run_instance


async def copies(instance: Instance, content: str) -> list[dict[str, Any]]:
    async with instance.state.pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT m.id, m.content, p.user_id FROM messages m
               JOIN conversation_participants p
                 ON p.conversation_id = m.conversation_id AND p.participant_type = 'user'
               WHERE m.content = $1 AND m.deleted_at IS NULL ORDER BY p.user_id""",
            content,
        )
    return [dict(r) for r in rows]


async def wait_for(instance: Instance, content: str, count: int) -> list[dict[str, Any]]:
    for _ in range(200):
        found = await copies(instance, content)
        if len(found) >= count:
            return found
        await asyncio.sleep(0.05)
    return await copies(instance, content)


async def test_two_people_of_one_peer_instance_each_get_group_messages(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        alice: User = await a.register("alice")
        bob = await b.register("bob")
        carol = await b.register("carol")
        group = await alice.request(
            "POST",
            "/v1/conversations",
            json={"type": "group", "name": "launch", "participant_dids": [bob.did, carol.did]},
        )
        assert group.status_code == 201, group.text
        sent = await alice.send(group.json()["id"], "ship it on friday")
        delivered = await wait_for(b, "ship it on friday", 2)
        assert {row["user_id"] for row in delivered} == {bob.profile["id"], carol.profile["id"]}

        edited = await alice.request(
            "PATCH",
            f"/v1/conversations/{group.json()['id']}/messages/{sent['id']}",
            json={"version": 1, "content": "ship it on monday"},
        )
        assert edited.status_code == 200, edited.text
        changed = await wait_for(b, "ship it on monday", 2)
        assert {row["user_id"] for row in changed} == {bob.profile["id"], carol.profile["id"]}
        assert await copies(b, "ship it on friday") == []
