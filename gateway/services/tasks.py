"""A2A tasks: their 1.0 JSON shape, reads scoped to the caller, cancel, and live updates.

A task is visible only to the caller that created it (``peer:<did>`` or ``key:<id>``); another
caller asking for it gets TaskNotFound, exactly as for an id that does not exist. State changes
are published on :class:`TaskEvents` so ``SubscribeToTask`` / ``SendStreamingMessage``
streams see them (A2A §4.6: events in order, several streams per task).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg

from a2a.protocol import (
    TERMINAL_STATES,
    InvalidParamsError,
    ListTasksParams,
    TaskNotCancelableError,
    TaskNotFoundError,
    agent_text_message,
)
from gateway.clock import Clock
from gateway.db import transaction
from gateway.ids import new_id
from gateway.store import agent_tasks as agent_tasks_store
from gateway.store import audit as audit_store
from gateway.store import messages as messages_store
from gateway.store import permissions as permissions_store
from gateway.store import tasks as store
from gateway.store.tasks import TaskRow


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


class TaskEvents:
    """In-process fan-out of task updates to the streams watching each task."""

    def __init__(self) -> None:
        self._watchers: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}

    @contextmanager
    def watch(self, task_id: str) -> Iterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of ``StreamResponse`` events for ``task_id`` while the block runs."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._watchers.setdefault(task_id, set()).add(queue)
        try:
            yield queue
        finally:
            group = self._watchers.get(task_id, set())
            group.discard(queue)
            if not group:
                self._watchers.pop(task_id, None)

    async def publish(self, row: TaskRow) -> None:
        """Send the row's current status to every watcher of the task. Register it with
        ``tx.call_after`` in the unit of work that changed the task."""
        for queue in tuple(self._watchers.get(row.id, ())):
            queue.put_nowait(status_update(row))


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
        tx.call_after(functools.partial(events.publish, updated))
    return updated


def held_for_owner(row: TaskRow) -> bool:
    """True for a delivered request whose answer waits for its offline owner."""
    confer = (row.metadata_json or {}).get("confer") or {}
    return row.state == "TASK_STATE_AUTH_REQUIRED" and bool(confer.get("heldUntilOwnerReturns"))


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
