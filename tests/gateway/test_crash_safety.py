"""An inbound federated message and its stream event are one unit of work.

The message, its inbox row, its A2A task and the recipient's ``message.created`` stream event
commit in one PostgreSQL transaction; the bus publish runs after that commit
(``gateway.db.Transaction.call_after``). So there is no point at which the message is stored and
its event is not: a process killed right after answering, or a bus that fails after commit,
loses nothing a device resuming by offset would miss, and the device gets the message once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg
import httpx
import websockets

from gateway.realtime.bus import InProcessBus
from gateway.realtime.subscriber import Frame
from tests.gateway.fakepeer import FakePeer, run_fake_peer
from tests.gateway.harness import RUN_RATE_LIMIT_PREFIX, free_port, run_instance


class FailingBus(InProcessBus):
    """A bus that accepts watchers but fails every publish (a broker gone after commit)."""

    async def publish(self, frames: Sequence[tuple[str, Frame]]) -> None:
        raise ConnectionError("the bus is down")


@contextlib.asynccontextmanager
async def confer_serve(port: int, database_url: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python -m gateway serve`` on 127.0.0.1:``port``, healthy; killed at exit if alive."""
    env = {
        **os.environ,
        "CONFER_PUBLIC_URL": f"http://localhost:{port}",
        "CONFER_PORT": str(port),
        "CONFER_HOST": "127.0.0.1",
        "CONFER_DATABASE_URL": database_url,
        "CONFER_ALLOW_HTTP_DIDS": "true",
        "CONFER_ALLOW_PRIVATE_NETWORKS": "true",
        "CONFER_RATE_LIMIT_PREFIX": RUN_RATE_LIMIT_PREFIX,
        "CONFER_MESSAGE_REQUESTS_DEFAULT": "false",  # a stranger's message: the inbox, here
    }
    log = tempfile.TemporaryFile()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "serve", env=env, stdout=log, stderr=log
    )
    try:
        await _wait_healthy(f"http://localhost:{port}", process, log)
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        log.close()


async def _wait_healthy(base_url: str, process: asyncio.subprocess.Process, log: Any) -> None:
    deadline = time.monotonic() + 90  # a loaded machine starts Python slowly
    async with httpx.AsyncClient(timeout=2) as client:
        while time.monotonic() < deadline:
            if process.returncode is not None:
                log.seek(0)
                tail = log.read()[-2000:].decode(errors="replace")
                raise AssertionError(f"{base_url} exited with {process.returncode}: {tail}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"{base_url}/healthz")).status_code == 200:
                    return
            await asyncio.sleep(0.2)
    raise AssertionError(f"{base_url} did not become healthy")


def _ws_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://") + "/v1/ws"


async def _position(base_url: str, token: str) -> tuple[str, int]:
    """Connect a device once: the (epoch, offset) it would resume from."""
    async with websockets.connect(
        _ws_url(base_url),
        subprotocols=["confer.v1", f"bearer.{token}"],  # type: ignore[list-item]
    ) as ws:
        ready = await _frames_until(ws, "ready")
    return ready["data"]["epoch"], ready["data"]["offset"]


async def _frames_until(ws: Any, wanted: str, within: float = 30.0) -> dict[str, Any]:
    async with asyncio.timeout(within):
        while True:
            frame = json.loads(await ws.recv())
            if frame["type"] == wanted:
                return dict(frame)


async def _resumed_events(base_url: str, token: str, epoch: str, offset: int) -> list[Any]:
    """Resume from (epoch, offset) and collect the durable events that arrive (replay and live)
    until none came for a while."""
    events: list[Any] = []
    async with websockets.connect(
        _ws_url(base_url) + f"?epoch={epoch}&offset={offset}",
        subprotocols=["confer.v1", f"bearer.{token}"],  # type: ignore[list-item]
    ) as ws:
        ready = await _frames_until(ws, "ready")
        assert ready["data"]["epoch"] == epoch
        with contextlib.suppress(TimeoutError):
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 2.0))
                if "offset" in frame:
                    events.append(frame)
    return events


async def _deliver(client: httpx.AsyncClient, peer: FakePeer, url: str, body: bytes) -> Any:
    response = await client.post(url, content=body, headers=peer.signed_headers(url, body))
    assert response.status_code == 200, response.text
    return response.json()["result"]["task"]


async def _stored_together(database_url: str, text: str) -> str:
    """The id of the one message with ``text``, after checking that its ``message.created``
    stream event was written by the very transaction that wrote the message (same ``xmin``)."""
    conn = await asyncpg.connect(database_url)
    try:
        [message] = await conn.fetch(
            "SELECT id, xmin::text AS tx FROM messages WHERE content = $1", text
        )
        events = await conn.fetch(
            """SELECT e.xmin::text AS tx, p.xmin::text AS payload_tx
               FROM user_events e JOIN event_payloads p ON p.id = e.event_id
               WHERE p.type = 'message.created' AND p.data_json ->> 'id' = $1""",
            message["id"],
        )
    finally:
        await conn.close()
    assert [e["tx"] for e in events] == [message["tx"]]
    assert [e["payload_tx"] for e in events] == [message["tx"]]
    return str(message["id"])


def _created(events: list[Any], message_id: str) -> list[Any]:
    return [e for e in events if e["type"] == "message.created" and e["data"]["id"] == message_id]


async def test_a_process_killed_after_answering_loses_no_inbound_message(make_database) -> None:
    database_url = await make_database()
    port = free_port()
    base_url = f"http://localhost:{port}"
    text = "this message outlives the process"
    async with run_fake_peer() as peer, httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        async with confer_serve(port, database_url) as process:
            registered = await client.post(
                "/v1/auth/register", json={"username": "bob", "password": "correct horse battery"}
            )
            assert registered.status_code == 201, registered.text
            token = registered.json()["access_token"]
            epoch, offset = await _position(base_url, token)
            body = peer.rpc(text, message_id=uuid.uuid4().hex)
            first = await _deliver(client, peer, f"{base_url}/users/bob/a2a", body)
            process.send_signal(signal.SIGKILL)  # right after the 2xx: no shutdown, no cleanup
            await process.wait()
        message_id = await _stored_together(database_url, text)

        async with confer_serve(port, database_url):
            # the peer cannot know its answer arrived, so it retries: nothing new is stored
            retried = await _deliver(client, peer, f"{base_url}/users/bob/a2a", body)
            assert retried["id"] == first["id"]
            events = await _resumed_events(base_url, token, epoch, offset)
    assert len(_created(events, message_id)) == 1
    offsets = [e["offset"] for e in events]
    assert offsets == list(range(offset + 1, offset + 1 + len(events)))  # no gap, no repeat


async def test_a_bus_failing_after_commit_loses_no_inbound_message(database_url: str) -> None:
    text = "stored although the bus is down"
    async with run_fake_peer() as peer, run_instance(database_url) as instance:
        bob = await instance.register("bob")
        epoch, offset = await _position(instance.base_url, bob.token)
        hub = instance.state.hub
        working, hub.bus = hub.bus, FailingBus()
        try:
            url = f"{instance.base_url}/users/bob/a2a"
            task = await _deliver(instance.client, peer, url, peer.rpc(text))
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        finally:
            hub.bus = working
        message_id = await _stored_together(database_url, text)
        events = await _resumed_events(instance.base_url, bob.token, epoch, offset)
    assert len(_created(events, message_id)) == 1
