"""The WebSocket protocol over real sockets: offsets, resume, resync, Origin, heartbeat, typing."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
import websockets

from gateway.realtime.subscriber import Subscriber, control_frame, ephemeral_frame, event_frame
from gateway.workers.retention import trim_events
from tests.gateway.harness import Instance, User, run_instance


async def _frame(
    ws: Any, within: float = 10.0, skip: tuple[str, ...] = ("ping", "presence")
) -> dict[str, Any]:
    """The next frame whose type is not in ``skip`` (heartbeats and presence by default)."""
    async with asyncio.timeout(within):
        while True:
            frame = json.loads(await ws.recv())
            if frame["type"] not in skip:
                return dict(frame)


async def _connect(user: User, query: str = "", **kwargs: Any) -> Any:
    return await websockets.connect(
        user.instance.ws_url + query,
        subprotocols=["confer.v1", f"bearer.{user.token}"],  # type: ignore[list-item]
        **kwargs,
    )


@pytest.fixture
async def instance(database_url: str) -> Any:
    async with run_instance(database_url, ws_replay_window=5) as running:
        yield running


async def _pair(instance: Instance) -> tuple[User, User, str]:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    conversation = await alice.direct_with(bob.did)
    return alice, bob, conversation["id"]


async def test_events_carry_consecutive_offsets_and_resume_replays_exactly_the_gap(
    instance: Instance,
) -> None:
    alice, bob, cid = await _pair(instance)
    ws = await _connect(bob)
    ready = await _frame(ws)
    assert ready["type"] == "ready" and ready["data"]["offset"] == 0
    epoch = ready["data"]["epoch"]
    await alice.send(cid, "one")
    await alice.send(cid, "two")
    first = [await _frame(ws), await _frame(ws)]
    assert [(f["type"], f["offset"], f["data"]["content"]) for f in first] == [
        ("message.created", 1, "one"),
        ("message.created", 2, "two"),
    ]
    await ws.close()
    for text in ("three", "four", "five"):
        await alice.send(cid, text)

    ws = await _connect(bob, f"?epoch={epoch}&offset=2")
    ready = await _frame(ws)
    assert ready["data"] == {**ready["data"], "epoch": epoch, "offset": 5}
    replayed = [await _frame(ws) for _ in range(3)]
    assert [(f["offset"], f["data"]["content"]) for f in replayed] == [
        (3, "three"),
        (4, "four"),
        (5, "five"),
    ]
    await alice.send(cid, "six")
    live = await _frame(ws)
    assert (live["offset"], live["data"]["content"]) == (6, "six")
    with pytest.raises(TimeoutError):
        await _frame(ws, within=0.3)  # nothing repeated
    await ws.close()


async def test_resume_by_auth_frame(instance: Instance) -> None:
    alice, bob, cid = await _pair(instance)
    await alice.send(cid, "one")
    await alice.send(cid, "two")
    async with bob.websocket() as ws:
        pass
    head = await instance.state.hub.head(bob.profile["id"])
    async with websockets.connect(instance.ws_url, subprotocols=["confer.v1"]) as ws:  # type: ignore[list-item]
        auth = {"type": "auth", "token": bob.token, "epoch": head.epoch, "offset": 1}
        await ws.send(json.dumps(auth))
        assert (await _frame(ws))["type"] == "ready"
        frame = await _frame(ws)
        assert (frame["offset"], frame["data"]["content"]) == (2, "two")


@pytest.mark.parametrize(
    ("epoch", "offset", "reason"),
    [("wrong", 1, "epoch_changed"), (None, 99, "offset_ahead"), (None, 0, "too_old")],
)
async def test_resync_required_when_the_gap_cannot_be_replayed(
    instance: Instance, epoch: str | None, offset: int, reason: str
) -> None:
    alice, bob, cid = await _pair(instance)
    for i in range(7):  # the replay window is 5 events
        await alice.send(cid, f"m{i}")
    head = await instance.state.hub.head(bob.profile["id"])
    ws = await _connect(bob, f"?epoch={epoch or head.epoch}&offset={offset}")
    assert (await _frame(ws))["data"]["offset"] == 7
    resync = await _frame(ws)
    assert resync == {
        "type": "resync_required",
        "data": {"reason": reason, "epoch": head.epoch, "offset": 7},
    }
    await alice.send(cid, "after")
    live = await _frame(ws)
    assert (live["offset"], live["data"]["content"]) == (8, "after")
    await ws.close()


async def test_trimmed_events_give_resync_required(database_url: str) -> None:
    async with run_instance(database_url, ws_replay_window=3) as instance:
        alice, bob, cid = await _pair(instance)
        for i in range(3):
            await alice.send(cid, f"m{i}")
        head = await instance.state.hub.head(bob.profile["id"])
        # Within the window by count, but the oldest events were trimmed by age.
        settings = instance.settings.model_copy(update={"ws_replay_max_age_seconds": -1})
        deleted = await trim_events(instance.state.pool, instance.state.clock.now(), settings)
        assert deleted >= 3
        ws = await _connect(bob, f"?epoch={head.epoch}&offset=1")
        await _frame(ws)
        assert (await _frame(ws))["data"]["reason"] == "too_old"
        await ws.close()


async def test_concurrent_sends_reach_each_device_gap_free_and_in_order(
    instance: Instance,
) -> None:
    alice, bob, cid = await _pair(instance)
    carol = await instance.register("carol")
    other = await carol.direct_with(bob.did)
    ws = await _connect(bob)
    await _frame(ws)
    sends = [alice.send(cid, f"a{i}") for i in range(15)]
    sends += [carol.send(other["id"], f"c{i}") for i in range(15)]
    await asyncio.gather(*sends)
    frames = [await _frame(ws) for _ in range(30)]
    assert [f["offset"] for f in frames] == list(range(1, 31))
    assert sorted(f["data"]["content"] for f in frames) == sorted(
        [f"a{i}" for i in range(15)] + [f"c{i}" for i in range(15)]
    )
    a_order = [f["data"]["content"] for f in frames if f["data"]["content"].startswith("a")]
    history = await alice.request("GET", f"/v1/conversations/{cid}/messages?limit=50")
    assert a_order == [m["content"] for m in reversed(history.json()["items"])]
    await ws.close()


async def test_origin_allow_list(database_url: str) -> None:
    async with run_instance(database_url, ws_allowed_origins=["https://app.example"]) as instance:
        bob = await instance.register("bob")
        with pytest.raises(websockets.InvalidStatus) as refused:
            await _connect(bob, origin="https://evil.example")
        assert refused.value.response.status_code == 403
        for origin in ("https://app.example", instance.base_url):
            ws = await _connect(bob, origin=origin)
            assert (await _frame(ws))["type"] == "ready"
            await ws.close()


async def test_heartbeat_closes_a_silent_client_and_keeps_an_answering_one(
    database_url: str,
) -> None:
    timing = {"ws_ping_interval_seconds": 0.2, "ws_ping_timeout_seconds": 0.2}
    async with run_instance(database_url, **timing) as instance:
        bob = await instance.register("bob")
        silent = await _connect(bob)
        answering = await _connect(bob)
        pings = 0

        async def answer() -> None:
            nonlocal pings
            while True:
                if json.loads(await answering.recv())["type"] == "ping":
                    pings += 1
                    await answering.send('{"type": "pong"}')

        async def ignore() -> int | None:
            with pytest.raises(websockets.ConnectionClosed):
                while True:
                    await silent.recv()
            return silent.close_code

        answerer = asyncio.create_task(answer())
        assert await asyncio.wait_for(ignore(), 10) == 4009
        await asyncio.sleep(1.0)  # several more heartbeats for the answering client
        answerer.cancel()
        await asyncio.gather(answerer, return_exceptions=True)
        assert pings >= 4
        assert instance.state.hub.connections(bob.profile["id"]) == 1
        await answering.send('{"type": "ping"}')
        async with asyncio.timeout(5):
            while json.loads(await answering.recv())["type"] != "pong":
                pass
        await answering.close()


async def test_unsupported_frame_closes_with_1003(instance: Instance) -> None:
    bob = await instance.register("bob")
    ws = await _connect(bob)
    await _frame(ws)
    await ws.send('{"type": "launch_missiles"}')
    with pytest.raises(websockets.ConnectionClosed):
        await _frame(ws)
    assert ws.close_code == 1003


DEEP = "[" * 100_000 + "]" * 100_000  # deeper than json.loads can recurse


async def test_a_deeply_nested_frame_closes_with_1003(instance: Instance) -> None:
    bob = await instance.register("bob")
    ws = await _connect(bob)
    await _frame(ws)
    await ws.send('{"type": "typing", "x": ' + DEEP + "}")
    with pytest.raises(websockets.ConnectionClosed):
        await _frame(ws)
    assert ws.close_code == 1003


async def test_a_deeply_nested_first_frame_without_credentials_is_refused(
    instance: Instance,
) -> None:
    for _ in range(2):  # and the server keeps serving
        ws = await websockets.connect(instance.ws_url, subprotocols=["confer.v1"])  # type: ignore[list-item]
        await ws.send(DEEP)
        with pytest.raises(websockets.ConnectionClosed):
            await _frame(ws)
        assert ws.close_code == 4001


async def test_typing_reaches_the_other_participant_rate_limited(instance: Instance) -> None:
    alice, bob, cid = await _pair(instance)
    mallory = await instance.register("mallory")
    ws_bob = await _connect(bob)
    await _frame(ws_bob)
    ws_alice = await _connect(alice)
    await _frame(ws_alice)
    ws_mallory = await _connect(mallory)
    await _frame(ws_mallory)
    await ws_mallory.send(json.dumps({"type": "typing", "conversation_id": cid}))
    for _ in range(3):
        await ws_alice.send(json.dumps({"type": "typing", "conversation_id": cid}))
    typing = await _frame(ws_bob)
    assert typing == {
        "type": "typing",
        "data": {
            "conversation_id": cid,
            "user_id": alice.profile["id"],
            "did": alice.did,
            "expires_in": 6,
        },
    }
    await alice.send(cid, "hello")
    nxt = await _frame(ws_bob)  # the two extra typing frames and mallory's were not sent
    assert nxt["type"] == "message.created" and nxt["offset"] == 1
    for ws in (ws_bob, ws_alice, ws_mallory):
        await ws.close()


def test_slow_subscriber_drops_ephemeral_frames_first_then_overflows() -> None:
    subscriber = Subscriber("u", maxsize=4)
    assert subscriber.offer(ephemeral_frame("typing", {}))
    assert subscriber.offer(event_frame("message.created", 1, "{}"))
    # At half full, new ephemeral frames are refused while durable ones still fit.
    assert not subscriber.offer(ephemeral_frame("presence", {}))
    assert subscriber.offer(event_frame("message.created", 2, "{}"))
    assert subscriber.offer(event_frame("message.created", 3, "{}"))
    # Full: the queued typing frame is evicted to make room for a durable event.
    assert subscriber.offer(event_frame("message.created", 4, "{}"))
    assert subscriber.dropped == 2 and not subscriber.overflowed
    assert subscriber.offer(control_frame("pong"))  # control frames are never dropped
    assert not subscriber.offer(event_frame("message.created", 5, "{}"))
    assert subscriber.overflowed


async def test_presence_on_first_device_and_last_device(instance: Instance) -> None:
    alice, bob, _ = await _pair(instance)
    ws_bob = await _connect(bob)
    await _frame(ws_bob, skip=("ping",))
    first = await _connect(alice)
    assert await _frame(ws_bob, skip=("ping",)) == {
        "type": "presence",
        "data": {"user_id": alice.profile["id"], "status": "online"},
    }
    second = await _connect(alice)
    await _frame(second)
    await second.close()
    await first.close()
    assert (await _frame(ws_bob, skip=("ping",)))["data"][
        "status"
    ] == "offline"  # once, after the last device
    await alice.request("GET", "/v1/conversations")
    with pytest.raises(TimeoutError):
        await _frame(ws_bob, within=0.3, skip=("ping",))
    await ws_bob.close()


@pytest.mark.parametrize("offset", ["1e400", "-Infinity", "-5", '"abc"', '"5"', "1.5", "true"])
async def test_a_malformed_resume_offset_in_the_auth_frame_closes_with_1003(
    instance: Instance, offset: str
) -> None:
    bob = await instance.register("bob")
    head = await instance.state.hub.head(bob.profile["id"])
    async with websockets.connect(instance.ws_url, subprotocols=["confer.v1"]) as ws:  # type: ignore[list-item]
        raw = '{"type": "auth", "token": "%s", "epoch": "%s", "offset": %s}'
        await ws.send(raw % (bob.token, head.epoch, offset))
        with pytest.raises(websockets.ConnectionClosed):
            await _frame(ws)
        assert ws.close_code == 1003


@pytest.mark.parametrize("offset", ["-5", "abc", "1.5", "1e400"])
async def test_a_malformed_resume_offset_in_the_query_closes_with_1003(
    instance: Instance, offset: str
) -> None:
    bob = await instance.register("bob")
    head = await instance.state.hub.head(bob.profile["id"])
    ws = await _connect(bob, f"?epoch={head.epoch}&offset={offset}")
    with pytest.raises(websockets.ConnectionClosed):
        await _frame(ws)
    assert ws.close_code == 1003


@pytest.mark.parametrize("position", ["?offset=3", "?epoch=&offset=3", "?epoch={epoch}"])
async def test_half_a_resume_position_in_the_query_closes_with_1003(
    instance: Instance, position: str
) -> None:
    bob = await instance.register("bob")
    head = await instance.state.hub.head(bob.profile["id"])
    ws = await _connect(bob, position.format(epoch=head.epoch))
    with pytest.raises(websockets.ConnectionClosed):
        await _frame(ws)
    assert ws.close_code == 1003


async def test_an_offset_without_epoch_in_the_auth_frame_closes_with_1003(
    instance: Instance,
) -> None:
    bob = await instance.register("bob")
    async with websockets.connect(instance.ws_url, subprotocols=["confer.v1"]) as ws:  # type: ignore[list-item]
        await ws.send(json.dumps({"type": "auth", "token": bob.token, "offset": 3}))
        with pytest.raises(websockets.ConnectionClosed):
            await _frame(ws)
        assert ws.close_code == 1003


async def test_a_binary_frame_closes_with_1003(instance: Instance) -> None:
    bob = await instance.register("bob")
    ws = await _connect(bob)
    await _frame(ws)
    await ws.send(b'{"type": "ping"}')
    with pytest.raises(websockets.ConnectionClosed):
        await _frame(ws)
    assert ws.close_code == 1003


async def test_a_binary_first_frame_closes_with_4001(instance: Instance) -> None:
    bob = await instance.register("bob")
    async with websockets.connect(instance.ws_url, subprotocols=["confer.v1"]) as ws:  # type: ignore[list-item]
        await ws.send(json.dumps({"type": "auth", "token": bob.token}).encode())
        with pytest.raises(websockets.ConnectionClosed):
            await _frame(ws)
        assert ws.close_code == 4001


async def test_a_client_that_hangs_up_before_authenticating_costs_no_traceback(
    instance: Instance, caplog: pytest.LogCaptureFixture
) -> None:
    """Connecting and closing at once (a tab closed mid-handshake), or sending an auth frame
    over the size limit, ends quietly: no "Exception in ASGI application" in the log."""
    caplog.set_level(logging.ERROR)
    for _ in range(3):
        ws = await websockets.connect(instance.ws_url, subprotocols=["confer.v1"])
        await ws.close()
    async with websockets.connect(instance.ws_url, subprotocols=["confer.v1"], max_size=None) as ws:
        await ws.send(json.dumps({"type": "auth", "token": "x" * 2_000_000}))
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 30)
    await asyncio.sleep(0.5)  # the handlers finish after the client is gone
    alice = await instance.register("alice")
    async with alice.websocket():  # the server still takes connections
        pass
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [
        r.getMessage() for r in caplog.records
    ]
