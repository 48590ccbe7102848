"""Posts and read receipts racing on one conversation: group commit batches posts while other
members mark messages read, and neither may end in a deadlock the client sees.

A batch used to append each post's stream events at once and then lock the next post's
participant row; a read receipt locks the reader's participant row and then appends to the
members' streams. Each waited for the other, PostgreSQL ended one of them (SQLSTATE 40P01)
and its client got a 500 — and the keep-alive connection was dropped with it, losing the
client's next request. These run a real server on loopback with default settings.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.gateway.harness import Instance, User, run_instance


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url, db_pool_max=6) as running:
        yield running


async def _race(instance: Instance, members: list[User], conversation_id: str) -> None:
    """Twelve clients over keep-alive connections, each posting every other round and marking
    the newest message read every round; every answer must be 2xx, every post stored once."""
    base = f"{instance.base_url}/v1/conversations/{conversation_id}"
    statuses: collections.Counter[tuple[str, int]] = collections.Counter()
    posted: list[str] = []
    newest: list[str] = []
    async with httpx.AsyncClient(timeout=120) as client:
        first = await client.post(
            f"{base}/messages", json={"content": "first"}, headers=members[0].headers
        )
        assert first.status_code == 201, first.text
        newest.append(first.json()["id"])

        async def worker(i: int) -> None:
            member = members[i % len(members)]
            for j in range(24):
                if j % 2 == 0:
                    r = await client.post(
                        f"{base}/messages", json={"content": f"{i}-{j}"}, headers=member.headers
                    )
                    statuses["post", r.status_code] += 1
                    if r.status_code == 201:
                        posted.append(r.json()["id"])
                        newest.append(r.json()["id"])
                r = await client.post(
                    f"{base}/read", json={"message_id": newest[-1]}, headers=member.headers
                )
                statuses["read", r.status_code] += 1
                assert r.status_code < 500, (r.status_code, r.text, r.headers)

        await asyncio.gather(*(worker(i) for i in range(12)))
        assert statuses == {("post", 201): 12 * 12, ("read", 200): 12 * 24}, statuses
        listed: list[str] = []
        before = None
        while True:
            params = {"limit": 100, **({"before": before} if before else {})}
            page = await client.get(f"{base}/messages", params=params, headers=members[1].headers)
            assert page.status_code == 200, page.text
            body = page.json()
            listed += [m["id"] for m in body["items"]]
            before = body.get("next_before")
            if not before:
                break
    assert sorted(listed) == sorted([*posted, first.json()["id"]])


async def test_posts_and_reads_in_a_group_never_deadlock(instance: Instance) -> None:
    members = [await instance.register(f"member{i}") for i in range(4)]
    response = await members[0].request(
        "POST",
        "/v1/conversations",
        json={"type": "group", "name": "busy", "participant_dids": [m.did for m in members[1:]]},
    )
    assert response.status_code == 201, response.text
    await _race(instance, members, response.json()["id"])


async def test_posts_and_reads_in_a_direct_conversation_never_deadlock(instance: Instance) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    await _race(instance, [alice, bob], (await alice.direct_with(bob.did))["id"])


async def test_same_key_retries_on_two_processes_never_deadlock(database_url: str) -> None:
    """A client's retry of an idempotent post reaching another process of the same database
    while the first is in flight (behind a load balancer): both copies answer the one message.
    A post with a key takes the key's lock before the conversation's, so it never joins a
    group commit's batch, whose earlier posts hold the conversation's lock already."""
    async with run_instance(database_url, db_pool_max=6) as one:
        async with run_instance(database_url, db_pool_max=6) as two:
            members = [await one.register(f"member{i}") for i in range(3)]
            response = await members[0].request(
                "POST",
                "/v1/conversations",
                json={
                    "type": "group",
                    "name": "g",
                    "participant_dids": [m.did for m in members[1:]],
                },
            )
            assert response.status_code == 201, response.text
            path = f"/v1/conversations/{response.json()['id']}/messages"
            answers: dict[str, set[str]] = collections.defaultdict(set)
            async with httpx.AsyncClient(timeout=120) as client:

                async def post(base: str, member: User, key: str) -> None:
                    headers = {**member.headers, "Idempotency-Key": key}
                    r = await client.post(base + path, json={"content": key}, headers=headers)
                    assert r.status_code == 201, (r.status_code, r.text)
                    answers[key].add(r.json()["id"])

                async def sender(i: int) -> None:
                    member = members[i % len(members)]
                    for j in range(12):
                        key = f"{i}-{j}"
                        copies = [one.base_url, two.base_url] if j % 3 == 0 else [one.base_url]
                        await asyncio.gather(*(post(base, member, key) for base in copies))

                await asyncio.gather(*(sender(i) for i in range(16)))
            assert len(answers) == 16 * 12
            assert all(len(ids) == 1 for ids in answers.values()), answers
