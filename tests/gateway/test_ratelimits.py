"""Rate limits on login and registration: in-process, and shared through the local Redis."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as redis

from gateway.errors import RateLimitedError
from gateway.services.ratelimits import PEER_AGENT, LoopMemoryStorage, RateLimiter
from gateway.settings import Settings
from tests.gateway.harness import Instance, run_instance

PASSWORD = "correct horse battery"
REDIS_URL = "redis://127.0.0.1:6379/0"


async def _login(instance: Instance, username: str, password: str) -> tuple[int, dict, dict]:
    response = await instance.client.post(
        "/v1/auth/login", json={"username": username, "password": password}
    )
    return response.status_code, response.json(), dict(response.headers)


async def test_login_is_limited_per_ip(database_url: str) -> None:
    async with run_instance(database_url, rate_limit_login_ip="3/minute") as instance:
        await instance.register("alice", PASSWORD)
        statuses = [(await _login(instance, "alice", PASSWORD))[0] for _ in range(3)]
        assert statuses == [200, 200, 200]
        status, problem, headers = await _login(instance, "alice", PASSWORD)
    assert (status, problem["code"]) == (429, "rate_limited")
    assert 1 <= int(headers["retry-after"]) <= 60


async def test_failed_logins_are_limited_per_account(database_url: str) -> None:
    async with run_instance(database_url, rate_limit_login_account="2/minute") as instance:
        await instance.register("alice", PASSWORD)
        await instance.register("bob", PASSWORD)
        assert (await _login(instance, "alice", PASSWORD))[0] == 200  # successes do not count
        for _ in range(2):
            assert (await _login(instance, "alice", "wrong password"))[0] == 401
        status, problem, _ = await _login(instance, "ALICE", PASSWORD)  # same account
        assert (status, problem["code"]) == (429, "rate_limited")
        assert (await _login(instance, "bob", PASSWORD))[0] == 200
        for _ in range(2):
            await _login(instance, "nobody", "whatever")
        assert (await _login(instance, "nobody", "whatever"))[0] == 429  # unknown names too


async def test_registration_is_limited_per_ip(database_url: str) -> None:
    async with run_instance(database_url, rate_limit_register_ip="2/hour") as instance:
        await instance.register("alice")
        await instance.register("bob")
        response = await instance.client.post(
            "/v1/auth/register", json={"username": "carol", "password": PASSWORD}
        )
        assert (response.status_code, response.json()["code"]) == (429, "rate_limited")
        async with instance.state.pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM users") == 2


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    prefix = f"test-{uuid.uuid4().hex[:10]}"
    yield prefix
    client = redis.from_url(REDIS_URL)
    keys = [k async for k in client.scan_iter(f"*{prefix}*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


@pytest.mark.redis
async def test_redis_backend_shares_counters_between_processes(
    database_url: str, redis_prefix: str
) -> None:
    settings = {
        "redis_url": REDIS_URL,
        "rate_limit_prefix": redis_prefix,
        "rate_limit_login_account": "3/minute",
    }
    async with run_instance(database_url, **settings) as first:
        await first.register("alice", PASSWORD)
        for _ in range(2):
            assert (await _login(first, "alice", "wrong password"))[0] == 401
        async with run_instance(database_url, **settings) as second:
            assert (await _login(second, "alice", "wrong password"))[0] == 401
            assert (await _login(second, "alice", PASSWORD))[0] == 429
            assert (await _login(first, "alice", PASSWORD))[0] == 429
    client = redis.from_url(REDIS_URL)
    keys = [k async for k in client.scan_iter(f"*{redis_prefix}*")]
    await client.aclose()
    assert keys, "the counters live in Redis"


async def test_in_process_counters_are_per_process(database_url: str) -> None:
    async with run_instance(database_url, rate_limit_login_account="1/minute") as first:
        await first.register("alice", PASSWORD)
        await _login(first, "alice", "wrong password")
        assert (await _login(first, "alice", PASSWORD))[0] == 429
        async with run_instance(database_url, rate_limit_login_account="1/minute") as second:
            assert (await _login(second, "alice", PASSWORD))[0] == 200


async def test_the_in_process_storage_expires_in_the_loop_without_threads(monkeypatch) -> None:
    """The default storage (:class:`LoopMemoryStorage`) starts no thread per hit (the
    ``limits`` library's own expiry hands each key to ``asyncio.to_thread``), still refuses
    what its moving window holds, lets hits through again once the window has passed, and
    forgets the keys of windows that ended at its next sweep (memory stays bounded)."""

    async def no_thread(*args: object, **kwargs: object) -> None:
        raise AssertionError("a rate limit hit started a thread")

    monkeypatch.setattr(asyncio, "to_thread", no_thread)
    limiter = RateLimiter(Settings(peer_rate_limit_agent="3/second"))
    storage = limiter.storage
    assert isinstance(storage, LoopMemoryStorage)
    for key in ("did:web:a.example", "did:web:b.example"):
        for _ in range(3):
            await limiter.hit(PEER_AGENT, key)
        with pytest.raises(RateLimitedError):
            await limiter.hit(PEER_AGENT, key)
    assert len(storage.events) == 2
    await asyncio.sleep(1.1)  # the window (and the sweep interval) has passed
    await limiter.hit(PEER_AGENT, "did:web:a.example")  # allowed again; sweeps first
    [(key, entries)] = storage.events.items()  # b's window is gone, a's holds the new hit
    assert "did:web:a.example" in key
    assert len(entries) == 1
