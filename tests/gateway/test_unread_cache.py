"""Unread counters cached in Redis across two gateway processes; PostgreSQL stays the truth."""

from __future__ import annotations

import asyncio
import os

import pytest
from redis.asyncio import Redis

from gateway.ids import new_id
from gateway.realtime.ephemeral import EphemeralStore, MemoryEphemeralStore
from gateway.realtime.redis_store import RedisEphemeralStore
from tests.gateway.harness import User, run_instance

REDIS_URL = os.environ.get("CONFER_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.mark.parametrize("backend", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def test_counters_get_set_expire_and_increment(backend: str) -> None:
    store: EphemeralStore = (
        RedisEphemeralStore(REDIS_URL) if backend == "redis" else MemoryEphemeralStore()
    )
    key = f"test:{new_id()}"
    try:
        assert await store.get_counter(key) is None
        await store.set_counter(key, 7, 0.2)
        assert await store.get_counter(key) == 7
        await asyncio.sleep(0.3)
        assert await store.get_counter(key) is None
        counts = await asyncio.gather(*(store.incr(key + ":gen") for _ in range(10)))
        assert sorted(counts) == list(range(1, 11))
        assert await store.get_counter(key + ":gen") == 10
    finally:
        await store.close()


async def unread(user: User, conversation_id: str) -> int:
    response = await user.request("GET", f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    return int(response.json()["membership"]["unread"])


@pytest.mark.redis
async def test_two_processes_share_exact_counts_through_redis(database_url: str) -> None:
    redis = Redis.from_url(REDIS_URL)
    # Own rate-limit buckets: registrations here must not use up other tests' budget.
    shared = {"redis_url": REDIS_URL, "rate_limit_prefix": f"test-unread-{new_id()}"}
    async with (
        run_instance(database_url, **shared) as one,
        run_instance(database_url, **shared) as two,  # same database, 2nd process
    ):
        alice = await one.register("alice")
        bob_one = await one.register("bob")
        conversation = await bob_one.direct_with(alice.did)
        cid = conversation["id"]
        bob_two = User(two, bob_one.token, bob_one.profile)
        alice_two = User(two, alice.token, alice.profile)
        sent = [await bob_one.send(cid, f"m{i}") for i in range(3)]
        assert await unread(alice, cid) == 3
        keys = [k.decode() async for k in redis.scan_iter(f"unread:{alice.profile['id']}:{cid}:*")]
        assert len(keys) == 1 and int(await redis.get(keys[0])) == 3
        # The cached value is what is served (poison it to see) ...
        await redis.set(keys[0], 99)
        assert await unread(alice_two, cid) == 99
        # ... and any change of the state moves the key: the truth comes back from PostgreSQL.
        await bob_two.send(cid, "m3")
        assert await unread(alice, cid) == 4
        deleted = await bob_two.request(
            "DELETE", f"/v1/conversations/{cid}/messages/{sent[0]['id']}"
        )
        assert deleted.status_code == 204
        assert await unread(alice, cid) == 3  # the other process's delete bumped the generation
        read = await alice_two.request(
            "POST", f"/v1/conversations/{cid}/read", json={"message_id": sent[2]["id"]}
        )
        assert read.status_code == 200, read.text
        assert await unread(alice, cid) == 1
        listing = (await alice.request("GET", "/v1/conversations")).json()
        assert [c["membership"]["unread"] for c in listing] == [1]
        assert await unread(bob_one, cid) == 0  # his own messages never count
    await redis.aclose()


@pytest.mark.redis
async def test_without_redis_nothing_is_cached(database_url: str) -> None:
    async with run_instance(database_url) as one:
        alice = await one.register("alice")
        bob = await one.register("bob")
        conversation = await bob.direct_with(alice.did)
        await bob.send(conversation["id"], "hi")
        assert await unread(alice, conversation["id"]) == 1
        redis = Redis.from_url(REDIS_URL)
        pattern = f"unread:{alice.profile['id']}:*"
        assert [k async for k in redis.scan_iter(pattern)] == []
        await redis.aclose()
