"""Run real Confer instances on loopback for tests: uvicorn in this process, real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import nats
import uvicorn
import websockets
from nats.js.errors import NotFoundError

from gateway.app import create_app
from gateway.clock import Clock
from gateway.realtime.wire import uvicorn_options
from gateway.settings import Settings
from gateway.state import AppState


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


NATS_URL = os.environ.get("CONFER_TEST_NATS_URL", "nats://127.0.0.1:4222")


def reachable(url: str) -> bool:
    """True when something accepts TCP connections at ``url``'s host and port."""
    host, port = url.split("//", 1)[1].split("/")[0].split(":")
    with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=1):
        return True
    return False


@contextlib.asynccontextmanager
async def nats_task_queue(**overrides: Any) -> AsyncIterator[dict[str, Any]]:
    """Settings for an agent task queue on the local NATS with names of its own (stream,
    consumer, subject prefix), so parallel runs never share a stream; deleted on exit."""
    tag = uuid.uuid4().hex[:10]
    values: dict[str, Any] = {
        "nats_url": NATS_URL,
        "agent_queue_stream": f"CONFER_TEST_TASKS_{tag}",
        "agent_queue_consumer": f"confer-test-{tag}",
        "agent_queue_subject_prefix": f"test{tag}.",
        **overrides,
    }
    try:
        yield values
    finally:
        nc = await nats.connect(NATS_URL)
        try:
            with contextlib.suppress(NotFoundError):
                await nc.jetstream().delete_stream(values["agent_queue_stream"])
        finally:
            await nc.close()


def port_is_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:``port``."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass
class Instance:
    """A running Confer: its base URL, its settings and its live state."""

    base_url: str
    settings: Settings
    state: AppState
    client: httpx.AsyncClient
    app: Any = None

    @property
    def did(self) -> str:
        return self.state.identity.did

    @property
    def ws_url(self) -> str:
        return self.base_url.replace("http://", "ws://") + "/v1/ws"

    async def register(self, username: str, password: str = "correct horse battery") -> User:
        response = await self.client.post(
            "/v1/auth/register", json={"username": username, "password": password}
        )
        assert response.status_code == 201, response.text
        body = response.json()
        return User(self, body["access_token"], body["user"])


@dataclass
class User:
    """A registered user of an instance, with an access token."""

    instance: Instance
    token: str
    profile: dict[str, Any]

    @property
    def did(self) -> str:
        return str(self.profile["did"])

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.headers, **(kwargs.pop("headers", None) or {})}
        return await self.instance.client.request(method, path, headers=headers, **kwargs)

    async def direct_with(self, did: str) -> dict[str, Any]:
        response = await self.request("POST", "/v1/conversations", json={"participant_did": did})
        assert response.status_code in (200, 201), response.text
        return dict(response.json())

    async def send(self, conversation_id: str, text: str) -> dict[str, Any]:
        response = await self.request(
            "POST", f"/v1/conversations/{conversation_id}/messages", json={"content": text}
        )
        assert response.status_code == 201, response.text
        return dict(response.json())

    @contextlib.asynccontextmanager
    async def websocket(self) -> AsyncIterator[Any]:
        """A connected, authenticated WebSocket that has received its ``ready`` frame."""
        async with websockets.connect(
            self.instance.ws_url, subprotocols=["confer.v1", f"bearer.{self.token}"]
        ) as ws:
            ready = await asyncio.wait_for(ws.recv(), 5)
            assert '"ready"' in ready
            yield ws


RUN_RATE_LIMIT_PREFIX = f"test-{uuid.uuid4().hex[:12]}"


def loopback_settings(database_url: str, port: int, **overrides: Any) -> Settings:
    """Settings for an instance on 127.0.0.1:``port`` whose DID is did:web:localhost%3A<port>."""
    values: dict[str, Any] = {
        "public_url": f"http://localhost:{port}",
        "host": "127.0.0.1",
        "port": port,
        "database_url": database_url,
        "migrate_on_start": False,
        "allow_http_dids": True,
        "allow_private_networks": True,
        # Counters in a shared Redis outlive a test run: each run gets its own key space, so
        # repeated runs within an hour never meet the previous runs' registration budget.
        "rate_limit_prefix": RUN_RATE_LIMIT_PREFIX,
        # The tests written before message requests expect a first message in the inbox;
        # tests of requests turn them on (tests/gateway/test_message_requests.py).
        "message_requests_default": False,
    }
    values.update(overrides)
    return Settings(**values)


@contextlib.asynccontextmanager
async def serve(app: Any, port: int, **options: Any) -> AsyncIterator[None]:
    """Serve an ASGI app with uvicorn on 127.0.0.1:``port`` (lifespan on) until exit;
    ``options`` are more ``uvicorn.Config`` arguments (e.g. ``ssl_certfile``)."""
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **options
        )
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        await task


_PORTS: dict[str, int] = {}


@contextlib.asynccontextmanager
async def run_instance(
    database_url: str, *, clock: Clock | None = None, port: int | None = None, **overrides: Any
) -> AsyncIterator[Instance]:
    """Serve Confer with uvicorn on ``port`` until exit.

    By default a database keeps the port it was first served on, so a restarted instance keeps
    its public URL and DIDs (Confer refuses to start when they would change).
    """
    remembered = _PORTS.get(database_url)
    if port is None:
        port = remembered if remembered and port_is_free(remembered) else free_port()
    if remembered is None:
        _PORTS[database_url] = port
    elif port != remembered:  # a second process on the same database: same public URL
        overrides.setdefault("public_url", f"http://localhost:{remembered}")
    settings = loopback_settings(database_url, port, **overrides)
    app = create_app(settings, clock=clock)
    base_url = f"http://localhost:{port}"
    ws = uvicorn_options(compression=settings.ws_compression)  # as `confer serve` does
    async with serve(app, port, **ws), httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        yield Instance(base_url, settings, app.state.confer, client, app)


async def next_event(ws: Any, event_type: str, within: float = 10.0) -> dict[str, Any]:
    """The next frame of ``event_type`` on ``ws`` within ``within`` s (others are skipped)."""
    async with asyncio.timeout(within):
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("type") == event_type:
                return dict(frame)
