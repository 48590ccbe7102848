"""Two gateway processes sharing one PostgreSQL, fanning out over the local NATS (and sharing
presence and rate limits through the local Redis): clients on different processes see each
other's messages in order, a device resumes on the other process without a gap, and an A2A
task stream on one process sees a decision made on the other."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import nats
import pytest
import websockets
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

from gateway.realtime.nats_bus import task_subject
from tests.gateway.fakepeer import FakePeer, run_fake_peer
from tests.gateway.harness import (
    NATS_URL,
    RUN_RATE_LIMIT_PREFIX,
    free_port,
    nats_task_queue,
    reachable,
)

REDIS_URL = os.environ.get("CONFER_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


pytestmark = pytest.mark.skipif(
    not (reachable(NATS_URL) and reachable(REDIS_URL)),
    reason="needs the local NATS (4222) and Redis (6379); .ci/run starts them",
)


@contextlib.asynccontextmanager
async def gateway_process(
    database_url: str, port: int, public_port: int, settings: dict[str, Any]
) -> AsyncIterator[str]:
    """Run ``confer serve`` as its own OS process on 127.0.0.1:``port``, with ``settings``
    (``CONFER_<NAME>``) on top, e.g. its agent task queue from :func:`nats_task_queue`."""
    env = {
        **os.environ,
        "CONFER_DATABASE_URL": database_url,
        "CONFER_MESSAGE_REQUESTS_DEFAULT": "false",  # as the harness: see loopback_settings
        "CONFER_PUBLIC_URL": f"http://localhost:{public_port}",
        "CONFER_HOST": "127.0.0.1",
        "CONFER_PORT": str(port),
        "CONFER_MIGRATE_ON_START": "false",
        "CONFER_NATS_URL": NATS_URL,
        "CONFER_REDIS_URL": REDIS_URL,
        "CONFER_RATE_LIMIT_PREFIX": RUN_RATE_LIMIT_PREFIX,
        "CONFER_ALLOW_HTTP_DIDS": "true",
        "CONFER_ALLOW_PRIVATE_NETWORKS": "true",
        **{f"CONFER_{name.upper()}": str(value) for name, value in settings.items()},
    }
    code = "from gateway.cli import app; app()"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        "serve",
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as client:
            for _ in range(200):
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{base}/healthz")).status_code == 200:
                        break
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError("the gateway process did not start")
        yield base
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 10)


async def _register(client: httpx.AsyncClient, name: str) -> dict[str, Any]:
    response = await client.post(
        "/v1/auth/register", json={"username": name, "password": "correct horse battery"}
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


async def _ws(base: str, token: str, query: str = "") -> Any:
    url = base.replace("http://", "ws://") + "/v1/ws" + query
    return await websockets.connect(url, subprotocols=["confer.v1", f"bearer.{token}"])  # type: ignore[list-item]


async def _messages(ws: Any, count: int) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    async with asyncio.timeout(15):
        while len(frames) < count:
            frame = json.loads(await ws.recv())
            if frame["type"] == "message.created":
                frames.append(frame)
    return frames


async def test_two_processes_share_the_stream_over_nats(database_url: str) -> None:
    port_a, port_b = free_port(), free_port()
    async with (
        nats_task_queue() as queue,
        gateway_process(database_url, port_a, port_a, queue) as base_a,
        gateway_process(database_url, port_b, port_a, queue) as base_b,
        httpx.AsyncClient(base_url=base_a) as a,
        httpx.AsyncClient(base_url=base_b) as b,
    ):
        alice = await _register(a, "alice")
        bob = await _register(b, "bob")
        ha = {"Authorization": f"Bearer {alice['access_token']}"}
        hb = {"Authorization": f"Bearer {bob['access_token']}"}
        conv = await a.post(
            "/v1/conversations", json={"participant_did": bob["user"]["did"]}, headers=ha
        )
        cid = conv.json()["id"]
        nc = await nats.connect(NATS_URL)
        announced: list[str] = []
        all_announced = asyncio.Event()

        async def on_conversation(msg: Any) -> None:
            announced.append(json.loads(msg.data)["data"]["id"])
            if len(announced) >= 20:
                all_announced.set()

        await nc.subscribe(f"conversation.{cid}.messages", cb=on_conversation)
        await nc.flush()

        ws_alice = await _ws(base_a, alice["access_token"])
        ws_bob = await _ws(base_b, bob["access_token"])
        ready = json.loads(await ws_bob.recv())
        epoch = ready["data"]["epoch"]

        async def send(client: httpx.AsyncClient, headers: dict[str, str], text: str) -> str:
            response = await client.post(
                f"/v1/conversations/{cid}/messages", json={"content": text}, headers=headers
            )
            assert response.status_code == 201, response.text
            return str(response.json()["id"])

        sends = [send(a, ha, f"a{i}") for i in range(10)] + [
            send(b, hb, f"b{i}") for i in range(10)
        ]
        await asyncio.gather(*sends)
        seen_by_bob = await _messages(ws_bob, 20)
        seen_by_alice = await _messages(ws_alice, 20)
        history = (await b.get(f"/v1/conversations/{cid}/messages?limit=50", headers=hb)).json()
        server_order = [m["id"] for m in reversed(history["items"])]
        # Both devices, on different processes, saw every message once, in the server order.
        assert [f["data"]["id"] for f in seen_by_bob] == server_order
        assert [f["data"]["id"] for f in seen_by_alice] == server_order
        assert [f["offset"] for f in seen_by_bob] == list(range(1, 21))
        await asyncio.wait_for(all_announced.wait(), 5)
        assert sorted(announced) == sorted(server_order)

        # Bob leaves process B; more messages arrive; he resumes on process A.
        await ws_bob.close()
        missed = [await send(a, ha, f"late{i}") for i in range(5)]
        resumed = await _ws(base_a, bob["access_token"], f"?epoch={epoch}&offset=20")
        assert json.loads(await resumed.recv())["type"] == "ready"
        replay = await _messages(resumed, 5)
        assert [f["data"]["id"] for f in replay] == missed
        assert [f["offset"] for f in replay] == list(range(21, 26))
        # And live events still reach him there, from process B.
        last = await send(b, hb, "from b")
        assert (await _messages(resumed, 1))[0]["data"]["id"] == last
        for ws in (resumed, ws_alice):
            await ws.close()
        await nc.close()


async def test_two_processes_share_the_agent_task_queue(database_url: str) -> None:
    """Own-agent tasks posted on either process go through one JetStream consumer; each is
    answered once. The sweep is ten minutes, so every answer started from a dispatch."""
    port_a, port_b = free_port(), free_port()
    own_budget = {"rate_limit_prefix": f"{RUN_RATE_LIMIT_PREFIX}-agentq"}  # six registrations
    async with (
        nats_task_queue(agent_queue_sweep_seconds=600) as queue,
        gateway_process(database_url, port_a, port_a, {**queue, **own_budget}) as base_a,
        gateway_process(database_url, port_b, port_a, {**queue, **own_budget}) as base_b,
        httpx.AsyncClient(base_url=base_a) as a,
        httpx.AsyncClient(base_url=base_b) as b,
    ):
        talks = []
        for i, client in enumerate([a, b, a, b, a, b]):
            user = await _register(client, f"owner{i}")
            headers = {"Authorization": f"Bearer {user['access_token']}"}
            conv = await client.post(
                "/v1/conversations",
                json={"type": "direct_user_agent", "participant_did": user["user"]["agent_did"]},
                headers=headers,
            )
            assert conv.status_code in (200, 201), conv.text
            talks.append((client, headers, conv.json()["id"]))
        for client, headers, cid in talks:
            sent = await client.post(
                f"/v1/conversations/{cid}/messages", json={"content": "hi"}, headers=headers
            )
            assert sent.status_code == 201, sent.text
        for client, headers, cid in talks:
            for _ in range(200):
                page = await client.get(f"/v1/conversations/{cid}/messages", headers=headers)
                senders = [m["sender_type"] for m in page.json()["items"]]
                if "own_agent" in senders:
                    break
                await asyncio.sleep(0.05)
            assert senders == ["own_agent", "user"]
        nc = await nats.connect(NATS_URL)
        try:
            stream = await nc.jetstream().stream_info(queue["agent_queue_stream"])
        finally:
            await nc.close()
    assert stream.state.last_seq == 6 and stream.state.messages == 0


async def _until_watched(task_id: str) -> None:
    """Wait until some process subscribes to the task's updates: a request on a subject
    nobody listens to gets "no responders" at once; a watcher (which never replies, and
    ignores the probe as malformed) lets it time out."""
    nc = await nats.connect(NATS_URL)
    try:
        async with asyncio.timeout(30):
            while True:
                try:
                    await nc.request(task_subject(task_id), b"probe", timeout=0.3)
                except NoRespondersError:
                    await asyncio.sleep(0.05)
                except NatsTimeoutError:
                    return
    finally:
        await nc.close()


class _Peer:
    """A FakePeer calling one agent's A2A endpoint on either process, signing for the shared
    public URL."""

    def __init__(self, peer: FakePeer, public: str, agent_id: str) -> None:
        self.peer, self.public, self.path = peer, public, f"/agents/{agent_id}/a2a"

    def call(self, method: str, params: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        return body.encode(), self.peer.signed_headers(self.public + self.path, body.encode())

    async def post(self, client: httpx.AsyncClient, body: bytes) -> dict[str, Any]:
        headers = self.peer.signed_headers(self.public + self.path, body)
        response = await client.post(self.path, content=body, headers=headers)
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def follow(self, client: httpx.AsyncClient, task_id: str) -> list[dict[str, Any]]:
        """``SubscribeToTask`` until the server ends the stream; every event's result."""
        body, headers = self.call("SubscribeToTask", {"id": task_id})
        events: list[dict[str, Any]] = []
        async with client.stream("POST", self.path, content=body, headers=headers) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:])["result"])
        return events


async def test_a_decision_on_one_process_reaches_a_task_stream_on_the_other(
    database_url: str,
) -> None:
    """A peer follows its held request on process A; the owner decides over REST on process
    B (and the peer cancels another request there): both streams on A see it and end."""
    port_a, port_b = free_port(), free_port()
    own_budget = {"rate_limit_prefix": f"{RUN_RATE_LIMIT_PREFIX}-tasks"}
    async with (
        nats_task_queue() as queue,
        run_fake_peer() as fake,
        gateway_process(database_url, port_a, port_a, {**queue, **own_budget}) as base_a,
        gateway_process(database_url, port_b, port_a, {**queue, **own_budget}) as base_b,
        httpx.AsyncClient(base_url=base_a, timeout=30) as a,
        httpx.AsyncClient(base_url=base_b, timeout=30) as b,
    ):
        bob = await _register(b, "bob")
        hb = {"Authorization": f"Bearer {bob['access_token']}"}
        peer = _Peer(fake, f"http://localhost:{port_a}", bob["user"]["agent_did"].rsplit(":")[-1])
        held = (await peer.post(a, fake.rpc("may I?")))["result"]["task"]
        assert held["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"

        following = asyncio.create_task(peer.follow(a, held["id"]))
        await _until_watched(held["id"])
        [pending] = (await b.get("/v1/permissions?pending=true", headers=hb)).json()
        decided = await b.post(
            f"/v1/permissions/{pending['id']}/decision",
            json={"decision": "allow_once"},
            headers=hb,
        )
        assert decided.status_code == 200, decided.text
        events = await asyncio.wait_for(following, 30)  # the stream on A ended by itself
        assert events[0]["task"]["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
        assert [e["statusUpdate"]["status"]["state"] for e in events[1:]] == [
            "TASK_STATE_COMPLETED"
        ]

        other = (await peer.post(a, fake.rpc("never mind")))["result"]["task"]
        following = asyncio.create_task(peer.follow(a, other["id"]))
        await _until_watched(other["id"])
        body, _ = peer.call("CancelTask", {"id": other["id"]})
        assert (await peer.post(b, body))["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        events = await asyncio.wait_for(following, 30)
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_ephemeral_store_slots_and_presence_transitions(backend: str) -> None:
    from gateway.ids import new_id
    from gateway.realtime.ephemeral import EphemeralStore, MemoryEphemeralStore
    from gateway.realtime.redis_store import RedisEphemeralStore

    store: EphemeralStore = (
        RedisEphemeralStore(REDIS_URL) if backend == "redis" else MemoryEphemeralStore()
    )
    user, key = new_id(), f"test:{new_id()}"
    try:
        slots = await asyncio.gather(*(store.allow(key, 0.3) for _ in range(10)))
        assert slots.count(True) == 1
        await asyncio.sleep(0.35)
        assert await store.allow(key, 0.3)
        online = await asyncio.gather(*(store.device_online(user, f"d{i}") for i in range(10)))
        assert online.count(True) == 1
        offline = await asyncio.gather(*(store.device_offline(user, f"d{i}") for i in range(10)))
        assert offline.count(True) == 1
        assert not await store.device_offline(user, "d0")
    finally:
        await store.close()


@pytest.mark.redis
async def test_a_crashed_processs_devices_leave_redis_presence() -> None:
    """A process killed without saying goodbye leaves its devices in ``presence:{user}``;
    their leases run out, so the user is offline again and the next device is the first."""
    from gateway.ids import new_id
    from gateway.realtime.redis_store import RedisEphemeralStore

    crashed = RedisEphemeralStore(REDIS_URL, presence_ttl=1.0)
    survivor = RedisEphemeralStore(REDIS_URL, presence_ttl=1.0)
    user = new_id()
    try:
        assert await crashed.device_online(user, "ghost")
        assert await survivor.user_online(user)
        await asyncio.sleep(1.3)  # the ghost's lease runs out; nobody renewed it
        assert not await survivor.user_online(user)
        assert await survivor.device_online(user, "phone")  # the first device again
        for _ in range(4):  # a live device renews its lease and stays
            await asyncio.sleep(0.4)
            await survivor.device_alive(user, "phone")
        assert await survivor.user_online(user)
        assert not await survivor.device_online(user, "laptop")  # not the first
        await asyncio.sleep(1.3)  # the laptop's process dies; the phone says goodbye
        await survivor.device_alive(user, "phone")
        assert await survivor.device_offline(user, "phone")  # the last live one: offline
        assert not await survivor.user_online(user)
    finally:
        await crashed.close()
        await survivor.close()
