"""Fan-out over real sockets: one encoding per audience, and a stalled client holds no one up."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest
import websockets

from gateway.realtime import subscriber as subscriber_module
from gateway.realtime.subscriber import EventEncoding
from gateway.realtime.wire import text_frame
from tests.gateway.harness import User, run_instance


async def _connect(user: User, **kwargs: Any) -> Any:
    ws = await websockets.connect(
        user.instance.ws_url,
        subprotocols=["confer.v1", f"bearer.{user.token}"],  # type: ignore[list-item]
        **kwargs,
    )
    assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "ready"
    return ws


async def _next_containing(ws: Any, marker: str, within: float = 60.0) -> dict[str, Any]:
    async with asyncio.timeout(within):
        while True:
            raw = await ws.recv()
            if marker in raw:
                return dict(json.loads(raw))


async def _group(owner: User, *members: User) -> str:
    response = await owner.request(
        "POST",
        "/v1/conversations",
        json={"type": "group", "name": "fan-out", "participant_dids": [m.did for m in members]},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _wait_until(predicate: Any, within: float = 60.0) -> None:
    async with asyncio.timeout(within):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.05)


async def test_an_event_is_encoded_once_per_audience_and_reaches_every_socket(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: list[bytes] = []  # the payloads encoded from a frame's text
    joined: list[tuple[EventEncoding, bytes]] = []  # a durable event's frames, per encoding

    def counting(payload: bytes) -> bytes:
        encoded.append(payload)
        return text_frame(payload)

    join = EventEncoding.wire

    def joining(encoding: EventEncoding, offset: int) -> bytes:
        wire = join(encoding, offset)
        joined.append((encoding, wire))
        return wire

    monkeypatch.setattr(subscriber_module, "text_frame", counting)
    monkeypatch.setattr(EventEncoding, "wire", joining)
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        carol = await instance.register("carol")
        cid = await _group(alice, bob, carol)
        sockets = [await _connect(bob) for _ in range(3)] + [
            await _connect(carol) for _ in range(2)
        ]

        # a durable event: one frame per user's stream (each has its own offset), shared by
        # that user's devices
        await alice.send(cid, "fan-out-durable")
        frames = [await _next_containing(ws, "fan-out-durable") for ws in sockets]
        assert {f["type"] for f in frames} == {"message.created"}
        assert len({f["offset"] for f in frames[:3]}) == 1  # bob's three devices: one offset
        # bob's and carol's frames (alice has no socket: hers is never built), joined from one
        # encoding of the event
        durable = [(e, w) for e, w in joined if b"fan-out-durable" in w]
        assert len(durable) == 2
        assert len({id(e) for e, _ in durable}) == 1
        assert not any(b"fan-out-durable" in p for p in encoded)

        # an ephemeral event: one frame for every recipient
        await instance.state.hub.emit_ephemeral(
            [bob.profile["id"], carol.profile["id"]], "typing", {"marker": "fan-out-typing"}
        )
        for ws in sockets:
            assert (await _next_containing(ws, "fan-out-typing"))["type"] == "typing"
        assert sum(b"fan-out-typing" in p for p in encoded) == 1
        for ws in sockets:
            await ws.close()


def _stalled_socket() -> socket.socket:
    """A client socket with a tiny receive buffer: once the library stops reading it, the
    server's writes back up quickly."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return sock


async def test_a_client_that_never_reads_delays_no_one_and_is_dropped(database_url: str) -> None:
    async with run_instance(database_url, ws_queue_size=8) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        carol = await instance.register("carol")
        cid = await _group(alice, bob, carol)
        reader = await _connect(bob)
        sock = _stalled_socket()
        port = int(instance.base_url.rsplit(":", 1)[1])
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        stalled = await _connect(carol, sock=sock, max_queue=1)  # and never read from again
        assert instance.state.hub.connections(carol.profile["id"]) == 1
        padding = "x" * 16_000
        received: list[int] = []

        async def read_all(count: int) -> None:
            while len(received) < count:
                frame = json.loads(await reader.recv())
                if frame["type"] == "message.created":
                    received.append(int(frame["data"]["content"].split(" ", 1)[0]))

        reading = asyncio.create_task(read_all(60))
        for i in range(60):
            await alice.send(cid, f"{i} {padding}")
        await asyncio.wait_for(reading, 60)
        assert received == list(range(60))  # every frame, in order, while carol reads nothing
        # the stalled client overflowed its bounded queue and was dropped
        await _wait_until(lambda: instance.state.hub.connections(carol.profile["id"]) == 0)
        await alice.send(cid, "after the drop")
        assert (await _next_containing(reader, "after the drop"))["type"] == "message.created"
        await reader.close()
        stalled.transport.abort()


async def test_with_compression_frames_go_through_asgi(database_url: str) -> None:
    async with run_instance(database_url, ws_compression=True) as instance:
        alice, bob = await instance.register("alice"), await instance.register("bob")
        cid = (await alice.direct_with(bob.did))["id"]
        ws = await _connect(bob)  # offers permessage-deflate by default
        assert ws.protocol.extensions, "permessage-deflate was not negotiated"
        await alice.send(cid, "compressed fan-out")
        assert (await _next_containing(ws, "compressed fan-out"))["type"] == "message.created"
        await ws.close()
