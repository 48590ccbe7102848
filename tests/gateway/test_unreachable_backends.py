"""A wrong or vanished ``CONFER_REDIS_URL`` (docs/operations.md, "Unreachable NATS or
Redis"): start-up is refused within ``CONFER_BACKEND_CONNECT_TIMEOUT_SECONDS`` in one line
naming the setting, and a Redis that goes away later shows in ``/readyz`` and turns
password-guarded requests into 503 ``backend_unavailable``, never a 500. Real ``confer serve``
processes (NATS: tests/gateway/test_embedded_lifecycle.py)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.gateway.harness import RUN_RATE_LIMIT_PREFIX, free_port
from tests.gateway.serving import ROOT, confer_serve, refused_once, serve_env

NOBODY = "127.0.0.1:1"  # nothing listens on port 1
PASSWORD = "correct horse battery"


def _serve_until_exit(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.redis
async def test_an_unreachable_redis_refuses_to_start_in_one_line(database_url: str) -> None:
    env = serve_env(
        free_port(),
        database_url,
        CONFER_REDIS_URL=f"redis://{NOBODY}",
        CONFER_BACKEND_CONNECT_TIMEOUT_SECONDS="3",
        PYTHONPATH=str(ROOT),
    )
    result = await asyncio.to_thread(_serve_until_exit, env)
    output = result.stdout + result.stderr
    assert result.returncode == 3, output[-3000:]
    refused_once(output, f"CONFER_REDIS_URL=redis://{NOBODY}")


@contextlib.asynccontextmanager
async def _redis_proxy() -> AsyncIterator[tuple[int, asyncio.Event]]:
    """A TCP relay to the local Redis: ``(port, cut)``; setting ``cut`` closes every relayed
    connection and refuses new ones, as a Redis that went away."""
    cut = asyncio.Event()
    links: set[asyncio.StreamWriter] = set()

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if cut.is_set():
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", 6379)
        links.update((writer, up_writer))
        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def cutter() -> None:
        await cut.wait()
        server.close()
        for link in links:
            link.close()

    task = asyncio.create_task(cutter())
    try:
        yield port, cut
    finally:
        cut.set()
        await task


@pytest.mark.redis
async def test_a_redis_gone_after_start_up_is_reported_and_answered_with_503(
    database_url: str,
) -> None:
    async with _redis_proxy() as (redis_port, cut):
        env = serve_env(
            free_port(),
            database_url,
            CONFER_REDIS_URL=f"redis://127.0.0.1:{redis_port}",
            CONFER_RATE_LIMIT_PREFIX=f"{RUN_RATE_LIMIT_PREFIX}-{redis_port}",
        )
        async with (
            confer_serve(env) as served,
            httpx.AsyncClient(base_url=served.base_url, timeout=30) as client,
        ):
            ready = await client.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["checks"]["redis"] == "ok"
            body = {"username": "alice", "password": PASSWORD, "device_id": "d1"}
            assert (await client.post("/v1/auth/register", json=body)).status_code == 201
            cut.set()
            await asyncio.sleep(0)
            ready = await client.get("/readyz")
            assert ready.status_code == 503, ready.text
            assert ready.json()["failed"] == ["redis"]
            login = await client.post("/v1/auth/login", json=body)
            again = {**body, "username": "bob"}
            register = await client.post("/v1/auth/register", json=again)
            for answer in (login, register):
                assert answer.status_code == 503, answer.text
                assert answer.headers["content-type"] == "application/problem+json"
                assert answer.json()["code"] == "backend_unavailable"
                assert int(answer.headers["Retry-After"]) > 0
