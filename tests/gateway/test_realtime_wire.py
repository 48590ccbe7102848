"""The small per-connection pieces of Confer's WebSocket protocol (gateway.realtime.wire) and
the frame bytes it writes."""

from __future__ import annotations

import asyncio
import json

import pytest

from gateway.realtime.subscriber import EventEncoding, Frame, event_frame
from gateway.realtime.wire import Flag, ReceiveQueue, text_frame


async def test_a_flag_wakes_every_waiter_and_waits_again_once_cleared() -> None:
    flag = Flag()
    waiters = [asyncio.create_task(flag.wait()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    flag.set()
    await asyncio.wait_for(asyncio.gather(*waiters), 1)
    await asyncio.wait_for(flag.wait(), 1)  # set: returns at once
    flag.clear()
    late = asyncio.create_task(flag.wait())
    await asyncio.sleep(0.01)
    assert not late.done()
    flag.set()
    await asyncio.wait_for(late, 1)


async def test_cancelling_one_waiter_leaves_the_others_waiting() -> None:
    flag = Flag()
    cancelled, other = (asyncio.create_task(flag.wait()) for _ in range(2))
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    await asyncio.sleep(0.01)
    assert not other.done()
    flag.set()
    await asyncio.wait_for(other, 1)


async def test_the_receive_queue_is_first_in_first_out_and_waits_when_empty() -> None:
    queue: ReceiveQueue[int] = ReceiveQueue()
    assert queue.empty()
    queue.put_nowait(1)
    queue.put_nowait(2)
    assert not queue.empty()
    assert [await queue.get(), await queue.get()] == [1, 2]
    assert queue.empty()
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0.01)
    assert not getter.done()
    queue.put_nowait(3)
    assert await asyncio.wait_for(getter, 1) == 3


async def test_a_cancelled_get_loses_no_item() -> None:
    queue: ReceiveQueue[str] = ReceiveQueue()
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    getter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await getter
    queue.put_nowait("disconnect")
    assert await asyncio.wait_for(queue.get(), 1) == "disconnect"


@pytest.mark.parametrize("pad", [0, 100, 70_000])  # 7-bit, 16-bit and 64-bit frame lengths
def test_an_event_encoded_once_gives_each_user_the_frame_its_text_would(pad: int) -> None:
    data = json.dumps({"content": "héllo ✓", "pad": "x" * pad}, ensure_ascii=False)
    encoding = EventEncoding("message.created", data)
    for offset in (1, 9, 10, 123_456_789):
        text = f'{{"type":"message.created","offset":{offset},"data":{data}}}'
        frame = encoding.frame(offset, "m1")
        assert frame.wire() == text_frame(text.encode())
        assert encoding.frame(offset).text == text
        assert frame.text == text
        assert (frame.kind, frame.offset, frame.delivers) == ("event", offset, "m1")
    assert event_frame("receipt", 7, "{}").text == '{"type":"receipt","offset":7,"data":{}}'
    assert Frame('{"type":"pong"}', "control").wire() == b'\x81\x0f{"type":"pong"}'
