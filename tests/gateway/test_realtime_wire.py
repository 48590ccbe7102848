"""The small per-connection pieces of Confer's WebSocket protocol (gateway.realtime.wire)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.realtime.wire import Flag, ReceiveQueue


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
