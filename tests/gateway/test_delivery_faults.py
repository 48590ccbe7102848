"""Delivery that survives failure: B stops while A sends, B restarts, nothing lost or doubled."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.gateway.harness import Instance, User, run_instance


async def fetch(instance: Instance, sql: str, *args: Any) -> list[dict[str, Any]]:
    async with instance.state.pool.acquire() as conn:
        return [dict(r) for r in await conn.fetch(sql, *args)]


async def wait_until(check: Any, within: float = 20.0) -> None:
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110 (polls another process's database)
            await asyncio.sleep(0.1)


async def bobs_messages(b: Instance) -> list[str]:
    rows = await fetch(
        b, "SELECT content FROM messages WHERE sender_type = 'peer_agent' ORDER BY id"
    )
    return [r["content"] for r in rows]


async def test_stopped_peer_gets_every_message_once_in_order(make_database) -> None:
    db_a, db_b = await make_database(), await make_database()
    sent = [f"message {i:02d}" for i in range(16)]
    async with run_instance(db_a, delivery_park_after_failures=2) as a:
        alice = await a.register("alice")
        async with run_instance(db_b) as b:
            port = int(b.base_url.rsplit(":", 1)[1])
            bob = await b.register("bob")
            conversation = await alice.direct_with(bob.did)
            for text in sent[:4]:
                await alice.send(conversation["id"], text)
            await wait_until(lambda: _has(b, 4))
        # B is down: A keeps sending; the destination fails, then is parked.
        for text in sent[4:]:
            await alice.send(conversation["id"], text)
        destination = f"localhost:{port}"

        async def parked() -> bool:
            rows = await fetch(
                a,
                "SELECT parked_at FROM federation_destinations WHERE destination = $1",
                destination,
            )
            return bool(rows and rows[0]["parked_at"])

        await wait_until(parked)
        pending = await fetch(
            a, "SELECT failed_at FROM federation_outbox WHERE delivered_at IS NULL"
        )
        assert len(pending) == 12 and all(r["failed_at"] is None for r in pending)

        async with run_instance(db_b, port=port) as b:
            bob = User(b, bob.token, bob.profile)
            # Bob writes to Alice: inbound contact from B resumes A's parked queue at once.
            [bob_conversation] = (await bob.request("GET", "/v1/conversations")).json()
            await bob.send(bob_conversation["id"], "I am back")
            await wait_until(lambda: _has(b, 16))
            assert await bobs_messages(b) == sent
            # Retries must not have duplicated anything, and no more deliveries are pending.
            await asyncio.sleep(0.5)
            assert await bobs_messages(b) == sent
        outbox = await fetch(a, "SELECT delivered_at, failed_at FROM federation_outbox")
        assert len(outbox) == 16 and all(r["delivered_at"] and not r["failed_at"] for r in outbox)
        [health] = await fetch(a, "SELECT failures, parked_at FROM federation_destinations")
        assert health == {"failures": 0, "parked_at": None}


async def _has(b: Instance, n: int) -> bool:
    return len(await bobs_messages(b)) >= n


async def test_a_parked_destination_recovers_through_a_probe(make_database) -> None:
    db_a, db_b = await make_database(), await make_database()
    async with run_instance(db_a, delivery_park_after_failures=1, delivery_probe_seconds=1.0) as a:
        alice = await a.register("alice")
        async with run_instance(db_b) as b:
            port = int(b.base_url.rsplit(":", 1)[1])
            bob = await b.register("bob")
            conversation = await alice.direct_with(bob.did)
        await alice.send(conversation["id"], "while you were out")
        await wait_until(
            lambda: _count(a, "SELECT 1 FROM federation_destinations WHERE parked_at IS NOT NULL")
        )
        async with run_instance(db_b, port=port) as b:
            await wait_until(lambda: _has(b, 1))
            assert await bobs_messages(b) == ["while you were out"]


async def _count(instance: Instance, sql: str) -> bool:
    return bool(await fetch(instance, sql))
