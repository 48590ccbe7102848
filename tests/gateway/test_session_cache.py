"""Authentication without the database on the hot path, with exact revocation: a process
trusts a session it checked for ``CONFER_AUTH_CACHE_SECONDS``, and forgets it the moment the
session ends — here, in another process, or by SQL (``NOTIFY confer_sessions``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from gateway.db import create_pool
from gateway.services.session_cache import CHANNEL, SessionCache
from models import User as UserRow
from tests.gateway.harness import (
    NATS_URL,
    Instance,
    User,
    free_port,
    nats_task_queue,
    reachable,
    run_instance,
)
from tests.gateway.statements import counting
from tests.gateway.test_scaleout import REDIS_URL, gateway_process

LONG = 60.0  # the longest allowed: a cache this long makes only an invalidation explain a refusal


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url, auth_cache_seconds=LONG) as running:
        await _until_listening(running)
        yield running


async def _until_listening(instance: Instance) -> None:
    async with asyncio.timeout(20):
        while not instance.state.accounts.session_cache.enabled:  # noqa: ASYNC110 (a worker's state)
            await asyncio.sleep(0.05)


async def _refused_within(client: httpx.AsyncClient, token: str, seconds: float) -> None:
    """Poll ``GET /v1/me`` with ``token`` until it is refused (401), failing after ``seconds``."""
    async with asyncio.timeout(seconds):
        while True:
            response = await client.get("/v1/me", headers={"Authorization": f"Bearer {token}"})
            if response.status_code == 401:
                return
            assert response.status_code == 200, response.text
            await asyncio.sleep(0.05)


async def _me_statements(instance: Instance, user: User) -> list[str]:
    transport = httpx.ASGITransport(app=instance.app)
    async with httpx.AsyncClient(transport=transport, base_url=instance.base_url) as client:
        with counting(instance.state.pool) as statements:
            response = await client.get("/v1/me", headers=user.headers)
        assert response.status_code == 200, response.text
    return statements


async def test_a_checked_session_authenticates_without_the_database(instance: Instance) -> None:
    alice = await instance.register("alice")
    first = await _me_statements(instance, alice)
    again = await _me_statements(instance, alice)
    assert any("FROM sessions" in s for s in first)
    assert not any("FROM sessions" in s for s in again), again


async def test_logout_is_refused_at_once_on_the_same_process(instance: Instance) -> None:
    alice = await instance.register("alice")
    assert (await alice.request("GET", "/v1/me")).status_code == 200
    assert (await alice.request("POST", "/v1/auth/logout")).status_code == 204
    assert (await alice.request("GET", "/v1/me")).status_code == 401


async def test_a_profile_change_is_seen_at_once(instance: Instance) -> None:
    alice = await instance.register("alice")
    assert (await alice.request("GET", "/v1/me")).status_code == 200
    patched = await alice.request("PATCH", "/v1/me", json={"display_name": "Alice A."})
    assert patched.status_code == 200, patched.text
    assert (await alice.request("GET", "/v1/me")).json()["display_name"] == "Alice A."


async def test_a_session_ended_by_sql_is_refused_once_notified(
    instance: Instance, database_url: str
) -> None:
    alice = await instance.register("alice")
    assert (await alice.request("GET", "/v1/me")).status_code == 200
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("DELETE FROM sessions WHERE user_id = $1", alice.profile["id"])
    finally:
        await conn.close()
    await _refused_within(instance.client, alice.token, seconds=10)


async def test_the_changing_connection_forgets_before_its_statement_returns(
    instance: Instance, database_url: str
) -> None:
    """No listener here: only the trigger's notice to the connection that ran the statement
    can make the cache forget, at the statement and again when its transaction is over."""
    alice = await instance.register("alice")
    user = UserRow.model_construct(id=alice.profile["id"], username="alice")
    cache = SessionCache(LONG)
    cache.listening(True)
    pool = await create_pool(database_url, min_size=1, max_size=1)
    pool.on_notice(CHANNEL, cache.forget_user)
    try:
        cache.put("s1", user, mark=cache.mark())
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM sessions WHERE user_id = $1", user.id)
            assert cache.get("s1", user.id) is None  # told before the statement's result
            # a reader that ran meanwhile saw the session still live (not committed yet)
            cache.put("s1", user, mark=cache.mark())
            assert cache.get("s1", user.id) == user
        assert cache.get("s1", user.id) is None  # told again once the transaction was over
        cache.put("s2", user, mark=cache.mark())
        async with pool.acquire() as conn:  # a statement that changes nobody tells nothing
            await conn.execute("UPDATE sessions SET last_active_at = now() WHERE false")
        assert cache.get("s2", user.id) == user
        pool.on_notice(CHANNEL, None)
        async with pool.acquire() as conn:
            await conn.execute("UPDATE users SET display_name = 'A' WHERE id = $1", user.id)
        assert cache.get("s2", user.id) == user  # no handler, nothing routed
    finally:
        await pool.close()


async def test_an_admin_password_reset_is_refused_at_once_on_the_same_process(
    database_url: str,
) -> None:
    async with run_instance(
        database_url, auth_cache_seconds=LONG, admin_usernames="root"
    ) as running:
        await _until_listening(running)
        root = await running.register("root")
        for name in ("bob", "carol", "dave"):  # each the CI race's shape: set, then ask at once
            user = await running.register(name)
            assert (await user.request("GET", "/v1/me")).status_code == 200
            target = f"/v1/admin/users/{user.profile['id']}/password"
            done = await root.request("PUT", target, json={"password": "a fresh password 1"})
            assert done.status_code == 200, done.text
            assert (await user.request("GET", "/v1/me")).status_code == 401


async def test_a_read_that_raced_a_revocation_is_not_remembered() -> None:
    cache = SessionCache(LONG)
    cache.listening(True)
    user = UserRow.model_construct(id="01HZX3Y4Z5A6B7C8D9E0F1G2H3", username="alice")
    mark = cache.mark()
    cache.forget_user(user.id)  # heard while the read was in flight
    cache.put("s1", user, mark=mark)
    assert cache.get("s1", user.id) is None
    cache.put("s1", user, mark=cache.mark())
    assert cache.get("s1", user.id) == user
    cache.listening(False)  # the listener lost its connection: nothing is trusted
    assert cache.get("s1", user.id) is None


@pytest.mark.skipif(
    not (reachable(NATS_URL) and reachable(REDIS_URL)),
    reason="needs the local NATS and Redis; .ci/run starts them",
)
async def test_a_logout_on_one_process_is_refused_on_the_other(database_url: str) -> None:
    port_a, port_b = free_port(), free_port()
    cache = {"auth_cache_seconds": LONG}
    async with (
        nats_task_queue() as queue,
        gateway_process(database_url, port_a, port_a, {**queue, **cache}) as base_a,
        gateway_process(database_url, port_b, port_a, {**queue, **cache}) as base_b,
        httpx.AsyncClient(base_url=base_a) as a,
        httpx.AsyncClient(base_url=base_b) as b,
    ):
        registered = await a.post(
            "/v1/auth/register", json={"username": "alice", "password": "correct horse battery"}
        )
        assert registered.status_code == 201, registered.text
        token = registered.json()["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        for _ in range(3):  # B has checked the session and trusts it now
            assert (await b.get("/v1/me", headers=auth)).status_code == 200
        assert (await a.post("/v1/auth/logout", headers=auth)).status_code == 204
        await _refused_within(b, token, seconds=10)
