"""Conversations and messages on one instance, over real HTTP and WebSockets."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
from collections.abc import AsyncIterator

import pytest
import websockets

from tests.gateway.harness import Instance, next_event, run_instance


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


async def test_direct_conversation_is_created_once(instance: Instance) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    first = await alice.request("POST", "/v1/conversations", json={"participant_did": bob.did})
    assert first.status_code == 201
    again = await alice.request("POST", "/v1/conversations", json={"participant_did": bob.did})
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    results = await asyncio.gather(
        *(
            alice.request("POST", "/v1/conversations", json={"participant_did": bob.did})
            for _ in range(10)
        )
    )
    assert {r.json()["id"] for r in results} == {first.json()["id"]}
    async with instance.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM conversations") == 1


async def test_crossed_direct_creation_yields_one_conversation(instance: Instance) -> None:
    """A asks for B while B asks for A: the lock key names the pair, not who asks."""
    pairs = [(await instance.register(f"a{i}"), await instance.register(f"b{i}")) for i in range(6)]
    for a, b in pairs:
        crossed = await asyncio.gather(
            *(
                caller.request("POST", "/v1/conversations", json={"participant_did": other.did})
                for caller, other in ((a, b), (b, a)) * 3
            )
        )
        assert all(r.status_code in (200, 201) for r in crossed), [r.text for r in crossed]
        assert len({r.json()["id"] for r in crossed}) == 1
    async with instance.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM conversations") == len(pairs)


async def test_messages_reach_both_users_and_list_newest_first(instance: Instance) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    conversation = await alice.direct_with(bob.did)
    async with bob.websocket() as bob_ws:
        sent = [await alice.send(conversation["id"], f"message {i}") for i in range(5)]
        for expected in sent:
            event = await next_event(bob_ws, "message.created")
            assert event["data"]["id"] == expected["id"]
    assert sent[0]["sender_type"] == "user" and sent[0]["sender_did"] == alice.did

    page = (
        await bob.request(
            "GET", f"/v1/conversations/{conversation['id']}/messages", params={"limit": 2}
        )
    ).json()
    assert [m["content"] for m in page["items"]] == ["message 4", "message 3"]
    seen = [m["id"] for m in page["items"]]
    while page["next_before"]:
        page = (
            await bob.request(
                "GET",
                f"/v1/conversations/{conversation['id']}/messages",
                params={"limit": 2, "before": page["next_before"]},
            )
        ).json()
        seen += [m["id"] for m in page["items"]]
    assert seen == [m["id"] for m in reversed(sent)]
    bad = await bob.request(
        "GET", f"/v1/conversations/{conversation['id']}/messages", params={"before": "zz"}
    )
    assert bad.status_code == 422, bad.text
    assert bad.json()["errors"][0]["loc"] == ["query", "before"]


async def test_replies_carry_their_thread_root(instance: Instance) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    conversation = await alice.direct_with(bob.did)
    root = await alice.send(conversation["id"], "root")
    reply = await bob.request(
        "POST",
        f"/v1/conversations/{conversation['id']}/messages",
        json={"content": "reply", "in_reply_to": root["id"]},
    )
    assert reply.status_code == 201
    assert reply.json()["thread_root"] == root["id"]
    stray = await bob.request(
        "POST",
        f"/v1/conversations/{conversation['id']}/messages",
        json={"content": "x", "in_reply_to": "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
    )
    assert stray.status_code == 422


async def test_outsiders_get_404_and_bad_input_4xx(instance: Instance) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    eve = await instance.register("eve")
    conversation = await alice.direct_with(bob.did)
    path = f"/v1/conversations/{conversation['id']}"
    for method, suffix, body in [
        ("GET", "", None),
        ("GET", "/messages", None),
        ("POST", "/messages", {"content": "let me in"}),
    ]:
        response = await eve.request(method, path + suffix, json=body)
        assert response.status_code == 404, response.text
        assert response.json()["code"] == "conversation_not_found"
    cases = [
        ("POST", f"{path}/messages", {"content": ""}, 422),
        ("POST", f"{path}/messages", {"content": 42}, 422),
        ("POST", f"{path}/messages", {}, 422),
        ("POST", f"{path}/messages", {"content": "x" * 32_001}, 422),
        ("POST", "/v1/conversations/not-a-ulid/messages", {"content": "x"}, 422),
        ("GET", "/v1/conversations/01ARZ3NDEKTSV4RRFFQ69G5FAV", None, 404),
        ("POST", "/v1/conversations", {"participant_did": f"{instance.did}:users:ghost"}, 404),
        ("POST", "/v1/conversations", {"participant_did": alice.did}, 422),
        ("GET", f"{path}/messages?limit=0", None, 422),
    ]
    for method, url, body, status in cases:
        response = await alice.request(method, url, json=body)
        assert response.status_code == status, (url, body, response.text)
        assert response.headers["content-type"] == "application/problem+json"
    async with instance.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM messages") == 0


async def test_websocket_auth_by_first_frame_and_refusals(instance: Instance) -> None:
    alice = await instance.register("alice")
    async with websockets.connect(instance.ws_url, subprotocols=["confer.v1"]) as ws:
        assert ws.subprotocol == "confer.v1"
        await ws.send(json.dumps({"type": "auth", "token": alice.token}))
        ready = json.loads(await ws.recv())
        epoch = ready["data"].pop("epoch")
        assert isinstance(epoch, str) and epoch
        assert ready == {
            "type": "ready",
            "data": {"user_id": alice.profile["id"], "did": alice.did, "offset": 0},
        }
        await ws.send('{"type": "ping"}')
        assert json.loads(await ws.recv()) == {"type": "pong"}

    async with websockets.connect(instance.ws_url) as ws:
        await ws.send(json.dumps({"type": "auth", "token": "nope"}))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd.code == 4001

    with pytest.raises(websockets.InvalidStatus):
        async with websockets.connect(instance.ws_url, subprotocols=["bearer.nope"]):
            pass


async def _raw_websocket(instance: Instance, token: str) -> socket.socket:
    """A WebSocket handshake on a socket with a tiny receive buffer that is then never read."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    port = int(instance.base_url.rsplit(":", 1)[1])
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /v1/ws HTTP/1.1\r\nHost: localhost:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            f"Sec-WebSocket-Version: 13\r\n"
            f"Sec-WebSocket-Protocol: confer.v1, bearer.{token}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += await asyncio.to_thread(sock.recv, 1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


async def test_a_slow_client_is_closed_without_hurting_others(database_url: str) -> None:
    async with run_instance(database_url, ws_queue_size=8) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        conversation = await alice.direct_with(bob.did)
        slow = await _raw_websocket(instance, bob.token)
        try:
            async with bob.websocket() as fast:
                # Enough bytes to fill the kernel's socket buffers on loopback (~9 MB).
                for i in range(300):
                    await alice.send(conversation["id"], f"flood {i} " + "x" * 30_000)
                    await next_event(fast, "message.created")
                # The slow device was dropped while the fast one kept receiving everything.
                assert instance.state.hub.connections(bob.profile["id"]) == 1
        finally:
            slow.close()
        # Reconnecting from offset 0 replays every event the slow device missed, in order.
        head = await instance.state.hub.head(bob.profile["id"])
        url = f"{instance.ws_url}?epoch={head.epoch}&offset=0"
        async with websockets.connect(
            url, subprotocols=["confer.v1", f"bearer.{bob.token}"], max_size=None
        ) as ws:
            assert json.loads(await ws.recv())["type"] == "ready"
            offsets = [(await next_event(ws, "message.created"))["offset"] for _ in range(300)]
        assert offsets == list(range(1, 301))
