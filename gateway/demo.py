"""``confer demo``: two Confer processes on loopback exchange signed messages end to end.

Starts instance A and instance B as separate ``python -m gateway serve`` processes (their own
ports, DIDs and databases), registers ``alice`` on A and ``bob`` on B, connects a WebSocket for
each, sends A → B and a reply B → A, and reports each step. Used by the README's demo and by the
two-process test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import websockets
from websockets.typing import Subprotocol

from gateway.embedded import embedded_postgres_url, with_database

Say = Callable[[str], None]


@dataclass
class DemoResult:
    """What happened: the DIDs involved and the two delivered messages as each side saw them."""

    a_did: str = ""
    b_did: str = ""
    delivered_to_bob: dict[str, Any] = field(default_factory=dict)
    delivered_to_alice: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


async def fresh_database(admin_url: str, name: str) -> str:
    """Drop and create database ``name`` on the server of ``admin_url``; return its URL.

    Each demo run starts clean: its DIDs depend on the ports it is given.
    """
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return with_database(admin_url, name)


def check_port_free(port: int) -> None:
    """Raise RuntimeError when something already listens on 127.0.0.1:``port``."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise RuntimeError(f"port {port} is in use; choose others (--port-a/--port-b)") from exc


@contextlib.asynccontextmanager
async def confer_process(port: int, database_url: str, say: Say) -> AsyncIterator[str]:
    """Run ``python -m gateway serve`` on 127.0.0.1:``port``; yield its base URL."""
    check_port_free(port)
    base_url = f"http://localhost:{port}"
    env = {
        **os.environ,
        "CONFER_PUBLIC_URL": base_url,
        "CONFER_PORT": str(port),
        "CONFER_HOST": "127.0.0.1",
        "CONFER_DATABASE_URL": database_url,
        "CONFER_ALLOW_HTTP_DIDS": "true",
        "CONFER_ALLOW_PRIVATE_NETWORKS": "true",
        # The demo's strangers chat at once (the web client's "Requests" would hold them).
        "CONFER_MESSAGE_REQUESTS_DEFAULT": "false",
    }
    log = tempfile.TemporaryFile()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "serve", env=env, stdout=log, stderr=log
    )
    try:
        await _wait_healthy(base_url, process, log)
        say(f"started {base_url} (pid {process.pid})")
        yield base_url
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
        log.close()


async def _wait_healthy(base_url: str, process: asyncio.subprocess.Process, log: Any) -> None:
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(timeout=2) as client:
        while time.monotonic() < deadline:
            if process.returncode is not None:
                log.seek(0)
                tail = log.read()[-2000:].decode(errors="replace")
                raise RuntimeError(f"{base_url} exited with {process.returncode}: {tail}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"{base_url}/healthz")).status_code == 200:
                    return
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{base_url} did not become healthy in 60 s")


async def _account(client: httpx.AsyncClient, username: str) -> dict[str, Any]:
    body = {"username": username, "password": f"{username}-demo-password"}
    response = await client.post("/v1/auth/register", json=body)
    if response.status_code == 409:
        response = await client.post("/v1/auth/login", json=body)
    response.raise_for_status()
    return dict(response.json())


async def _next_message(ws: Any) -> dict[str, Any]:
    async with asyncio.timeout(20):
        while True:
            frame = json.loads(await ws.recv())
            if frame["type"] == "message.created":
                return dict(frame["data"])


async def exchange(a_url: str, b_url: str, say: Say) -> DemoResult:
    """Alice on A and Bob on B exchange one message each way, over signed A2A."""
    result = DemoResult()
    started = time.perf_counter()
    async with (
        httpx.AsyncClient(base_url=a_url, timeout=30) as a,
        httpx.AsyncClient(base_url=b_url, timeout=30) as b,
    ):
        alice, bob = await _account(a, "alice"), await _account(b, "bob")
        result.a_did, result.b_did = alice["user"]["did"], bob["user"]["did"]
        say(f"alice is {result.a_did}; bob is {result.b_did}")
        a_auth = {"Authorization": f"Bearer {alice['access_token']}"}
        b_auth = {"Authorization": f"Bearer {bob['access_token']}"}
        ws_a = a_url.replace("http", "ws", 1) + "/v1/ws"
        ws_b = b_url.replace("http", "ws", 1) + "/v1/ws"
        bearer_a = Subprotocol(f"bearer.{alice['access_token']}")
        bearer_b = Subprotocol(f"bearer.{bob['access_token']}")
        async with (
            websockets.connect(ws_a, subprotocols=[bearer_a]) as alice_ws,
            websockets.connect(ws_b, subprotocols=[bearer_b]) as bob_ws,
        ):
            await alice_ws.recv(), await bob_ws.recv()  # ready frames
            conv = await a.post(
                "/v1/conversations", json={"participant_did": result.b_did}, headers=a_auth
            )
            conv.raise_for_status()
            conv_id = conv.json()["id"]
            say(f"alice resolved bob's DID and opened conversation {conv_id}")
            sent = await a.post(
                f"/v1/conversations/{conv_id}/messages",
                json={"content": "Hello Bob! Signed by instance A."},
                headers=a_auth,
            )
            sent.raise_for_status()
            result.delivered_to_bob = await _next_message(bob_ws)
            say(
                f"bob's WebSocket got: {result.delivered_to_bob['content']!r} "
                f"from {result.delivered_to_bob['sender_did']}"
            )
            bob_conv = result.delivered_to_bob["conversation_id"]
            reply = await b.post(
                f"/v1/conversations/{bob_conv}/messages",
                json={"content": "Hi Alice! Verified and answered by instance B."},
                headers=b_auth,
            )
            reply.raise_for_status()
            while True:
                message = await _next_message(alice_ws)
                if message["sender_type"] == "peer_agent":
                    break
            result.delivered_to_alice = message
            say(f"alice's WebSocket got: {message['content']!r} from {message['sender_did']}")
    result.seconds = time.perf_counter() - started
    return result


async def run_demo(
    *, ports: tuple[int, int], database_urls: tuple[str, str], say: Say = print
) -> DemoResult:
    """Start both processes, run :func:`exchange`, stop them."""
    async with (
        confer_process(ports[0], database_urls[0], say) as a_url,
        confer_process(ports[1], database_urls[1], say) as b_url,
    ):
        return await exchange(a_url, b_url, say)


async def default_databases(admin_url: str | None, data_dir: Any) -> tuple[str, str]:
    """Two demo databases on ``admin_url`` or on the embedded server under ``data_dir`` (started
    for the demo and stopped when it exits, unless it was already running)."""
    # an embedded server the demo starts stops when the demo exits
    admin = admin_url or embedded_postgres_url(data_dir / "pg", stop_at_exit=True)
    return (
        await fresh_database(admin, "confer_demo_a"),
        await fresh_database(admin, "confer_demo_b"),
    )
