"""Under pressure the gateway fails fast: with every pool connection taken, or a statement
stuck behind a lock, a request gets 503 ``database_busy`` with ``Retry-After`` within seconds
instead of waiting without bound; LISTEN connections hold no pool slot."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import asyncpg
import httpx
from fastapi import FastAPI

from gateway.http_errors import install_error_handlers
from tests.gateway.harness import run_instance

if TYPE_CHECKING:
    from gateway.db import Pool


@contextlib.asynccontextmanager
async def every_connection_taken(pool: Pool, size: int) -> AsyncIterator[None]:
    """Hold all ``size`` connections of ``pool``: acquiring them all succeeds only if nothing
    else (a LISTEN, a worker) keeps a slot for good."""
    held: list[Any] = []
    try:
        for _ in range(size):
            held.append(await pool.acquire(timeout=30))
        yield
    finally:
        for conn in held:
            await pool.release(conn)


def _assert_busy(response: Any) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == "database_busy"
    assert int(response.headers["Retry-After"]) >= 1


async def test_an_exhausted_pool_answers_503_with_retry_after_not_a_hang(
    database_url: str,
) -> None:
    async with run_instance(
        database_url, db_pool_min=1, db_pool_max=2, db_acquire_timeout_seconds=0.5
    ) as instance:
        alice = await instance.register("alice")
        async with every_connection_taken(instance.state.pool, 2):
            started = time.monotonic()
            me = await alice.request("GET", "/v1/me")
            health = await instance.client.get("/healthz")
            elapsed = time.monotonic() - started
            _assert_busy(me)
            _assert_busy(health)
            assert elapsed < 8, elapsed
        assert (await alice.request("GET", "/v1/me")).status_code == 200
        assert (await instance.client.get("/healthz")).status_code == 200


async def test_a_statement_past_the_statement_timeout_answers_503(database_url: str) -> None:
    async with run_instance(database_url, db_statement_timeout_seconds=0.5) as instance:
        alice = await instance.register("alice")
        locker = await asyncpg.connect(database_url)
        try:
            async with locker.transaction():
                await locker.execute("LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
                started = time.monotonic()
                me = await alice.request("GET", "/v1/me")
                assert time.monotonic() - started < 8
                _assert_busy(me)
        finally:
            await locker.close()
        assert (await alice.request("GET", "/v1/me")).status_code == 200


async def test_a_database_that_refuses_new_connections_answers_503() -> None:
    """PostgreSQL's own refusals of a new pool connection ('too many clients', 'the database
    system is starting up') are 503 ``database_busy`` with ``Retry-After``, not a 500."""
    app = FastAPI()
    install_error_handlers(app)
    refusals = {
        "clients": asyncpg.exceptions.TooManyConnectionsError("sorry, too many clients already"),
        "starting": asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
    }

    @app.get("/{what}")
    async def refused(what: str) -> None:
        raise refusals[what]

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        for what in refusals:
            _assert_busy(await client.get(f"/{what}"))


async def test_a_websocket_with_no_connection_free_is_turned_away_without_a_traceback(
    database_url: str, caplog: Any
) -> None:
    """``/v1/ws`` is dispatched before the middleware stack (``gateway.app._ConferApp``), so its
    own guard does what the exception handlers do for HTTP: one line, and the socket closed
    with 1013 (try again later) — a busy database is no reason to tell the device its token
    is bad."""
    import websockets

    async with run_instance(
        database_url, db_pool_min=1, db_pool_max=2, db_acquire_timeout_seconds=0.5
    ) as instance:
        alice = await instance.register("alice")
        async with every_connection_taken(instance.state.pool, 2):
            with caplog.at_level("WARNING"):
                try:
                    async with websockets.connect(
                        instance.ws_url, subprotocols=["confer.v1", f"bearer.{alice.token}"]
                    ) as ws:
                        async with asyncio.timeout(10):
                            while True:
                                await ws.recv()
                except websockets.ConnectionClosed as closed:
                    # not 4001: the token is fine, the device is to try again
                    assert closed.rcvd is not None and closed.rcvd.code == 1013
        assert not [r for r in caplog.records if "ASGI" in r.getMessage()]
        assert any("database_busy on /v1/ws" in r.getMessage() for r in caplog.records)
        async with alice.websocket():  # and once connections are free again, it serves
            pass
