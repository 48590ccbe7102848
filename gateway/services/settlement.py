"""Settling an A2A task that waited for its owner's consent (``TASK_STATE_AUTH_REQUIRED``).

Shared by the two kinds of requester: signed peers (:mod:`gateway.services.consent`) and API-key
callers (:mod:`gateway.services.key_consent`). A2A 1.0 §4.5 task states.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from a2a.protocol import agent_text_message
from gateway.ids import new_id
from gateway.store import tasks as tasks_store
from gateway.store.tasks import TaskRow
from models import PermissionRow

ALLOWED = ("allow_once", "allow_always")


def is_allowed(permission: PermissionRow) -> bool:
    """True when the owner's decision lets the held request through."""
    return permission.decision in ALLOWED


def decision_answer(permission: PermissionRow) -> str:
    """The text the requester gets: approved, expired, or declined."""
    if is_allowed(permission):
        return "Approved: your request was delivered."
    if permission.decided_by is None:
        return "Refused: the request expired without an answer."
    return "Refused: the owner declined your request."


async def settle_task(
    conn: asyncpg.Connection,
    task: TaskRow,
    permission: PermissionRow,
    *,
    delivered_id: str | None,
    now: datetime,
) -> tuple[TaskRow, str]:
    """Move ``task`` from AUTH_REQUIRED to COMPLETED (allowed) or REJECTED, with the answer as
    its status message. Returns the settled task and the answer text."""
    answer = decision_answer(permission)
    status = agent_text_message(
        answer,
        message_id=new_id(),
        context_id=task.context_id,
        task_id=task.id,
        data={"decision": permission.decision, "messageId": delivered_id},
    )
    settled = await tasks_store.update_task_state(
        conn,
        id=task.id,
        state="TASK_STATE_COMPLETED" if is_allowed(permission) else "TASK_STATE_REJECTED",
        status_message=status,
        now=now,
        message_id=delivered_id,
        from_states=("TASK_STATE_AUTH_REQUIRED",),
    )
    assert settled is not None, "the task left AUTH_REQUIRED under our lock"
    return settled, answer
