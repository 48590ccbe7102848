"""A2A tasks: their 1.0 JSON shape, reads scoped to the caller, cancel, and live updates.

A task is visible only to the caller that created it (``peer:<did>`` or ``key:<id>``); another
caller asking for it gets TaskNotFound, exactly as for an id that does not exist. State changes
are published on :class:`TaskEvents` so ``SubscribeToTask`` / ``SendStreamingMessage``
streams see them (A2A §4.6: events in order, several streams per task), on whichever gateway
process they are served.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg

from a2a.confer import ConferMetadata
from a2a.protocol import (
    TERMINAL_STATES,
    InvalidParamsError,
    ListTasksParams,
    TaskNotCancelableError,
    TaskNotFoundError,
    agent_text_message,
)
from gateway.clock import Clock
from gateway.db import Transaction, transaction
from gateway.ids import new_id
from gateway.realtime.bus import EventBus, InProcessBus
from gateway.store import a2a_push as push_store
from gateway.store import agent_tasks as agent_tasks_store
from gateway.store import audit as audit_store
from gateway.store import messages as messages_store
from gateway.store import permissions as permissions_store
from gateway.store import tasks as store
from gateway.store.tasks import TaskRow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recipient:
    """The local user (``agent_id`` None) or agent an endpoint speaks for."""

    user_id: str
    agent_id: str | None
    did: str


def timestamp(value: datetime) -> str:
    """ISO 8601 UTC with millisecond precision and ``Z`` (A2A §4.5 ``TaskStatus.timestamp``)."""
    return (
        value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    )


def status_json(row: TaskRow) -> dict[str, Any]:
    """``TaskStatus``: state, the agent's status message, timestamp."""
    status: dict[str, Any] = {"state": row.state, "timestamp": timestamp(row.updated_at)}
    if row.status_message_json:
        status["message"] = row.status_message_json
    return status


def task_json(
    row: TaskRow, *, history_length: int | None = None, include_artifacts: bool = True
) -> dict[str, Any]:
    """The 1.0 ``Task``; ``history_length`` None = whole history, 0 = none."""
    task: dict[str, Any] = {"id": row.id, "contextId": row.context_id, "status": status_json(row)}
    history = row.history_json
    if history_length is not None:
        history = history[-history_length:] if history_length else []
    if history:
        task["history"] = history
    if include_artifacts and row.artifacts_json:
        task["artifacts"] = row.artifacts_json
    if row.metadata_json:
        task["metadata"] = row.metadata_json
    return task


def status_update(row: TaskRow) -> dict[str, Any]:
    """A ``StreamResponse`` ``{"statusUpdate": TaskStatusUpdateEvent}`` for the row's state."""
    return {
        "statusUpdate": {"taskId": row.id, "contextId": row.context_id, "status": status_json(row)}
    }


MAX_UPDATE_BYTES = 64 * 1024
"""Largest task update on the bus; a bigger one travels without its status message (the
state still arrives; ``GetTask`` has the message)."""

STREAM_BACKLOG = 16
"""Updates kept per stream for a slow reader; beyond it the oldest is dropped (the newest
state is the one a stream must not miss)."""


def encode_update(row: TaskRow) -> bytes:
    """The row's ``status_update`` as compact UTF-8 JSON, at most :data:`MAX_UPDATE_BYTES`."""
    event = status_update(row)
    payload = json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()
    if len(payload) > MAX_UPDATE_BYTES:
        event["statusUpdate"]["status"].pop("message", None)
        payload = json.dumps(event, separators=(",", ":")).encode()
    return payload


def decode_update(task_id: str, payload: bytes) -> dict[str, Any]:
    """Inverse of :func:`encode_update` for the task ``task_id``.

    Raises ValueError for anything else: too large, not JSON, not a ``statusUpdate`` of this
    task, or an unknown state.
    """
    if len(payload) > MAX_UPDATE_BYTES:
        raise ValueError(f"{len(payload)} bytes is over {MAX_UPDATE_BYTES}")
    try:
        event = json.loads(payload)
    except RecursionError as exc:  # deeply nested JSON
        raise ValueError("too deeply nested") from exc
    update = event.get("statusUpdate") if isinstance(event, dict) else None
    if not isinstance(update, dict) or update.get("taskId") != task_id:
        raise ValueError("not a status update of this task")
    status = update.get("status")
    if not isinstance(status, dict) or status.get("state") not in _ALL_STATES:
        raise ValueError("no known task state")
    return {"statusUpdate": update}


class TaskEvents:
    """Task updates over the event bus, to the streams watching each task on any process.

    ``publish`` sends a committed row's status on the bus; ``watch`` gives one stream a queue
    of the updates that reach this process. With the in-process bus that is this process's
    publishes only; with NATS it is every process's (A2A §4.6: several streams per task).
    """

    def __init__(self, bus: EventBus | None = None) -> None:
        self.bus = bus or InProcessBus()
        self._streams: dict[str, int] = {}

    @asynccontextmanager
    async def watch(self, task_id: str) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of ``StreamResponse`` events for ``task_id`` while the block runs; the
        watch is active on the bus when the block starts, and ends with it (also when the
        stream is cancelled because its client went away)."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(STREAM_BACKLOG)

        def deliver(payload: bytes) -> None:
            try:
                event = decode_update(task_id, payload)
            except ValueError as exc:
                log.warning("ignoring a malformed update for task %s: %s", task_id, exc)
                return
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(event)

        self._streams[task_id] = self._streams.get(task_id, 0) + 1
        try:
            unwatch = await self.bus.watch_task(task_id, deliver)
            try:
                yield queue
            finally:
                await unwatch()
        finally:
            count = self._streams.pop(task_id, 1) - 1
            if count:
                self._streams[task_id] = count

    def streams(self, task_id: str) -> int:
        """How many streams of this process watch ``task_id``."""
        return self._streams.get(task_id, 0)

    async def publish(self, row: TaskRow) -> None:
        """Send the row's current status to every watcher of the task, on every process.

        Call it after the change committed. A bus failure is logged, not raised: the change
        stands, and a stream that missed it still sees the task's next state.
        """
        try:
            await self.bus.publish_task(row.id, encode_update(row))
        except Exception:
            log.warning("could not publish an update of task %s", row.id, exc_info=True)


async def record_update(tx: Transaction, row: TaskRow, events: TaskEvents | None = None) -> None:
    """A task changed to ``row`` in ``tx``: queue its ``StreamResponse`` (``statusUpdate``)
    for each enabled push-notification config of the task in the same transaction (the push
    worker delivers it, A2A 1.0 §4.3), and publish it to ``events``' streams after commit."""
    configs = await push_store.count_configs(tx.conn, task_id=row.id)
    if configs:
        await push_store.queue_notifications(
            tx.conn,
            ids=[new_id() for _ in range(configs)],
            task_id=row.id,
            payload=status_update(row),
        )
    if events is not None:
        tx.call_after(functools.partial(events.publish, row))


async def get_task(pool: asyncpg.Pool, caller: str, task_id: str) -> TaskRow:
    """The caller's task. Raises TaskNotFoundError (missing or someone else's)."""
    async with pool.acquire() as conn:
        row = await store.get_task(conn, id=task_id, caller=caller)
    if row is None:
        raise TaskNotFoundError(f"no task {task_id}")
    return row


def _page_token(row: TaskRow) -> str:
    raw = f"{row.updated_at.isoformat()}|{row.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _after(token: str | None) -> tuple[datetime, str] | None:
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        when, task_id = raw.split("|")
        return datetime.fromisoformat(when), task_id
    except (ValueError, binascii.Error) as exc:
        raise InvalidParamsError("pageToken is not a token this server issued") from exc


async def list_tasks(
    pool: asyncpg.Pool, caller: str, recipient: Recipient | None, params: ListTasksParams
) -> dict[str, Any]:
    """``ListTasksResponse``: tasks (newest status first), ``nextPageToken`` ("" at the end)."""
    async with pool.acquire() as conn:
        rows, total = await store.list_tasks(
            conn,
            caller=caller,
            user_id=recipient.user_id if recipient else None,
            agent_id=recipient.agent_id if recipient else None,
            context_id=params.contextId,
            state=params.status,
            after=_after(params.pageToken),
            limit=params.pageSize + 1,
        )
    more = len(rows) > params.pageSize
    rows = rows[: params.pageSize]
    return {
        "tasks": [
            task_json(
                r, history_length=params.historyLength, include_artifacts=params.includeArtifacts
            )
            for r in rows
        ],
        "nextPageToken": _page_token(rows[-1]) if more else "",
        "pageSize": params.pageSize,
        "totalSize": total,
    }


async def cancel_task(
    pool: asyncpg.Pool, clock: Clock, events: TaskEvents, caller: str, task_id: str
) -> TaskRow:
    """Cancel a task not yet in a terminal state; its pending permission is withdrawn.

    Raises TaskNotFoundError or TaskNotCancelableError (already terminal).
    """
    async with transaction(pool) as tx:
        conn = tx.conn
        row = await store.get_task(conn, id=task_id, caller=caller)
        if row is None:
            raise TaskNotFoundError(f"no task {task_id}")
        if row.state in TERMINAL_STATES:
            raise TaskNotCancelableError(f"task {task_id} is already {row.state}")
        message = agent_text_message(
            "Canceled by the caller.",
            message_id=new_id(),
            context_id=row.context_id,
            task_id=row.id,
        )
        open_states = tuple(s for s in _ALL_STATES if s not in TERMINAL_STATES)
        updated = await store.update_task_state(
            conn,
            id=row.id,
            state="TASK_STATE_CANCELED",
            status_message=message,
            now=clock.now(),
            from_states=open_states,
        )
        if updated is None:
            raise TaskNotCancelableError(f"task {task_id} finished meanwhile")
        if held_for_owner(row):
            await withdraw_agent_answer(conn, clock.now(), row)
        if row.permission_id:  # the pending consent request is withdrawn with the task
            await permissions_store.decide_permission(
                conn,
                id=row.permission_id,
                decision="deny",
                decision_scope=None,
                decided_by=None,
                now=clock.now(),
            )
        await audit_store.insert_audit(
            conn,
            action="a2a.task.canceled",
            user_id=row.user_id,
            details={"task_id": row.id, "caller": caller},
        )
        await record_update(tx, updated, events)
    return updated


def held_for_owner(row: TaskRow) -> bool:
    """True for a delivered request whose answer waits for its offline owner."""
    confer = ConferMetadata.of(row.metadata_json)
    return row.state == "TASK_STATE_AUTH_REQUIRED" and bool(confer.heldUntilOwnerReturns)


async def withdraw_agent_answer(conn: asyncpg.Connection, now: datetime, row: TaskRow) -> None:
    """The requester canceled a task held for the owner: the agent's waiting answer is
    withdrawn unless another held task of the same conversation still asks for it; then it
    answers the newest of those instead of the canceled request."""
    message = await messages_store.get_message(conn, id=row.message_id or "")
    if message is None:
        return
    conversation_id = message.conversation_id
    others = await store.list_held_for_owner(
        conn, user_id=row.user_id, conversation_id=conversation_id
    )
    remaining = [t for t in others if t.id != row.id and t.message_id]
    if not remaining:
        await agent_tasks_store.withdraw_waiting(
            conn,
            conversation_id=conversation_id,
            reason="withdrawn: the requester canceled",
            now=now,
        )
    else:  # the agent will answer the newest request still held, not the canceled one
        await agent_tasks_store.repoint_waiting(
            conn,
            conversation_id=conversation_id,
            from_message_id=message.id,
            to_message_id=str(remaining[-1].message_id),
        )


_ALL_STATES = (
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
)
