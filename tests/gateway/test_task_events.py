"""A2A task updates on the event bus: in-process as before, across processes over NATS, bounded
and validated on the way in, and every watch ends with its stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import nats
import pytest

from gateway.ids import new_id
from gateway.realtime.bus import EventBus, InProcessBus
from gateway.realtime.nats_bus import NatsBus, task_subject
from gateway.services.tasks import MAX_UPDATE_BYTES, TaskEvents, encode_update, status_update
from gateway.store.tasks import TaskRow
from tests.gateway.harness import NATS_URL, Instance, reachable, run_instance

needs_nats = pytest.mark.skipif(not reachable(NATS_URL), reason="needs the local NATS (4222)")


def task_row(state: str = "TASK_STATE_COMPLETED", text: str = "done", **fields: Any) -> TaskRow:
    now = datetime.now(UTC)
    values: dict[str, Any] = {
        "id": new_id(),
        "user_id": new_id(),
        "agent_id": None,
        "caller": "key:test",
        "context_id": new_id(),
        "state": state,
        "message_id": None,
        "remote_message_id": None,
        "permission_id": None,
        "history_json": [],
        "status_message_json": {"role": "ROLE_AGENT", "parts": [{"text": text}]},
        "artifacts_json": [],
        "metadata_json": None,
        "created_at": now,
        "updated_at": now,
        **fields,
    }
    return TaskRow(**values)


@contextlib.asynccontextmanager
async def nats_bus() -> AsyncIterator[NatsBus]:
    bus = NatsBus(NATS_URL)
    await bus.start(lambda user_id, frame: None)
    try:
        yield bus
    finally:
        await bus.close()


async def test_the_in_process_bus_reaches_this_process_streams_only() -> None:
    here, elsewhere = TaskEvents(InProcessBus()), TaskEvents(InProcessBus())
    row = task_row()
    async with here.watch(row.id) as first, here.watch(row.id) as second:
        async with elsewhere.watch(row.id) as other:
            assert here.streams(row.id) == 2 and here.bus.task_watches() == 2
            await here.publish(row)
            assert await asyncio.wait_for(first.get(), 1) == status_update(row)
            assert await asyncio.wait_for(second.get(), 1) == status_update(row)
            assert other.empty()  # another process on its own in-process bus hears nothing
    assert here.streams(row.id) == 0 and here.bus.task_watches() == 0
    assert elsewhere.bus.task_watches() == 0


async def test_a_slow_stream_keeps_the_newest_updates() -> None:
    events = TaskEvents()
    task_id = new_id()
    rows = [task_row("TASK_STATE_WORKING", text=str(i), id=task_id) for i in range(40)]
    async with events.watch(rows[0].id) as queue:
        for row in rows:
            await events.publish(row)
        kept = [queue.get_nowait() for _ in range(queue.qsize())]
    assert kept[-1] == status_update(rows[-1]) and len(kept) < len(rows)


def test_an_oversized_update_travels_without_its_message() -> None:
    row = task_row("TASK_STATE_FAILED", text="x" * (2 * MAX_UPDATE_BYTES))
    payload = encode_update(row)
    assert len(payload) <= MAX_UPDATE_BYTES
    update = json.loads(payload)["statusUpdate"]
    assert update["taskId"] == row.id and update["status"]["state"] == "TASK_STATE_FAILED"
    assert "message" not in update["status"]


@needs_nats
async def test_an_update_published_on_one_process_reaches_a_stream_on_another() -> None:
    async with nats_bus() as one, nats_bus() as two:  # two connections, as two processes have
        watching, publishing = TaskEvents(one), TaskEvents(two)
        row = task_row()
        async with watching.watch(row.id) as queue:
            assert one.task_watches() == 1
            await publishing.publish(row)
            assert await asyncio.wait_for(queue.get(), 10) == status_update(row)
        assert one.task_watches() == 0


@needs_nats
async def test_malformed_updates_on_the_bus_are_ignored() -> None:
    row = task_row()
    other = task_row()
    garbage = [
        b"not json",
        b"\xff\xfe",
        b"[]",
        b'{"statusUpdate": 1}',
        json.dumps({"statusUpdate": {"taskId": row.id, "status": {"state": "NOPE"}}}).encode(),
        encode_update(other),  # another task's update, on this task's subject
        b"[" * 60_000,
        b" " * (MAX_UPDATE_BYTES + 1) + encode_update(row),
    ]
    async with nats_bus() as bus:
        events = TaskEvents(bus)
        nc = await nats.connect(NATS_URL)
        try:
            async with events.watch(row.id) as queue:
                for payload in garbage:
                    await nc.publish(task_subject(row.id), payload)
                await nc.flush()
                await events.publish(row)  # still heard after all of that
                assert await asyncio.wait_for(queue.get(), 10) == status_update(row)
                assert queue.empty()
        finally:
            await nc.close()


@needs_nats
async def test_a_task_id_never_reaches_another_subject() -> None:
    async with nats_bus() as bus:
        for task_id in ("a.b", "*", ">", "a b", ""):
            with pytest.raises(ValueError):
                await bus.watch_task(task_id, lambda payload: None)
        assert bus.task_watches() == 0


async def _open_task(instance: Instance) -> tuple[str, str, str]:
    """A user's key, their agent's A2A path and an open task of that key there."""
    user = await instance.register("ada")
    agent_id = user.profile["agent_did"].rsplit(":", 1)[1]
    key = (await user.request("POST", "/v1/api-keys", json={"name": "cli"})).json()["key"]
    path = f"/agents/{agent_id}/a2a"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": new_id(), "role": "ROLE_USER", "parts": [{"text": "x"}]}
        },
    }
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {key}"}
    task = (await instance.client.post(path, json=body, headers=headers)).json()["result"]["task"]
    async with instance.state.pool.acquire() as conn:  # open, as a task awaiting its owner
        await conn.execute(
            "UPDATE a2a_tasks SET state = 'TASK_STATE_WORKING' WHERE id = $1", task["id"]
        )
    return key, path, task["id"]


async def _until(predicate: Any, within: float = 15.0) -> bool:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


@pytest.mark.parametrize("bus", ["in-process", pytest.param("nats", marks=needs_nats)])
async def test_a_client_that_goes_away_ends_its_watch(database_url: str, bus: str) -> None:
    overrides = {"nats_url": NATS_URL} if bus == "nats" else {}
    async with run_instance(database_url, **overrides) as b:
        key, path, task_id = await _open_task(b)
        events: TaskEvents = b.state.task_events
        task_bus: EventBus = events.bus
        body = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task_id}}
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {key}"}
        async with b.client.stream("POST", path, json=body, headers=headers) as response:
            lines = response.aiter_lines()
            async with asyncio.timeout(15):
                while not (await anext(lines)).startswith("data: "):
                    pass
            # the Task comes first; the stream then starts watching for its updates
            assert await _until(lambda: task_bus.task_watches() == 1)
            assert events.streams(task_id) == 1
        # the client hung up with the task still open: the server notices and lets go
        assert await _until(lambda: task_bus.task_watches() == 0), "the bus watch leaked"
        assert events.streams(task_id) == 0
