"""``a2a_tasks``: A2A 1.0 tasks created by inbound ``SendMessage`` (migration 0005)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from a2a.confer import ConferMetadata


@dataclass(frozen=True)
class TaskRow:
    """One task. ``caller`` (``peer:<did>`` / ``key:<id>``) is who may read and cancel it."""

    id: str
    user_id: str
    agent_id: str | None
    caller: str
    context_id: str
    state: str
    message_id: str | None
    remote_message_id: str | None
    permission_id: str | None
    history_json: list[dict[str, Any]]
    status_message_json: dict[str, Any] | None
    artifacts_json: list[dict[str, Any]]
    metadata_json: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime


_COLUMNS = """id, user_id, agent_id, caller, context_id, state, message_id, remote_message_id,
    permission_id,
    history_json, status_message_json, artifacts_json, metadata_json, created_at, updated_at"""


def _task(record: asyncpg.Record) -> TaskRow:
    return TaskRow(**dict(record))


_INSERT_TASK = f"""INSERT INTO a2a_tasks (id, user_id, agent_id, caller, context_id, state,
                                          message_id, permission_id, history_json,
                                          status_message_json, metadata_json, created_at,
                                          updated_at, remote_message_id)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13)
    RETURNING {_COLUMNS}"""

# The same, with the inbox row of the received message that the task carries ($7) in the
# same statement (federation_inbox: origin $14, recipient $15, received at $12).
_INSERT_RECEIVED_TASK = (
    """WITH inbox AS (
         INSERT INTO federation_inbox
           (origin_did, remote_message_id, message_id, recipient_did, created_at)
         VALUES ($14, $13, $7, $15, $12))
    """
    + _INSERT_TASK
)


async def insert_task(
    conn: asyncpg.Connection,
    *,
    id: str,
    user_id: str,
    agent_id: str | None,
    caller: str,
    context_id: str,
    state: str,
    message_id: str | None,
    history: list[dict[str, Any]],
    status_message: dict[str, Any] | None,
    metadata: dict[str, Any] | None = None,
    permission_id: str | None = None,
    remote_message_id: str | None = None,
    now: datetime,
    inbox: tuple[str, str] | None = None,
) -> TaskRow:
    """Insert a task whose status timestamp is ``now``.

    With ``inbox`` (``(origin_did, recipient_did)``), the same statement remembers that
    ``remote_message_id`` from that origin was stored for that recipient as ``message_id``
    (what :func:`gateway.store.federation.insert_inbox` writes, received at ``now``); both
    must then be given. Raises asyncpg's UniqueViolationError when that inbox row exists.
    """
    args: list[Any] = [
        id,
        user_id,
        agent_id,
        caller,
        context_id,
        state,
        message_id,
        permission_id,
        history,
        status_message,
        metadata,
        now,
        remote_message_id,
    ]
    if inbox is not None:
        assert message_id is not None and remote_message_id is not None
        record = await conn.fetchrow(_INSERT_RECEIVED_TASK, *args, *inbox)
    else:
        record = await conn.fetchrow(_INSERT_TASK, *args)
    assert record is not None
    return _task(record)


async def get_task(conn: asyncpg.Connection, *, id: str, caller: str) -> TaskRow | None:
    """The task ``id`` if ``caller`` created it, else None (another caller's task is unseen)."""
    record = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM a2a_tasks WHERE id = $1 AND caller = $2", id, caller
    )
    return _task(record) if record else None


async def get_task_by_id(conn: asyncpg.Connection, *, id: str) -> TaskRow | None:
    """The task ``id`` whoever created it (for the owner's side), or None."""
    record = await conn.fetchrow(f"SELECT {_COLUMNS} FROM a2a_tasks WHERE id = $1", id)
    return _task(record) if record else None


async def get_task_by_remote(
    conn: asyncpg.Connection,
    *,
    caller: str,
    remote_message_id: str,
    user_id: str,
    agent_id: str | None,
) -> TaskRow | None:
    """The caller's task for its message ``remote_message_id`` to this recipient (the user,
    or their agent ``agent_id``): a retry; or None."""
    record = await conn.fetchrow(
        f"""SELECT {_COLUMNS} FROM a2a_tasks
            WHERE caller = $1 AND remote_message_id = $2 AND user_id = $3
              AND agent_id IS NOT DISTINCT FROM $4""",
        caller,
        remote_message_id,
        user_id,
        agent_id,
    )
    return _task(record) if record else None


async def get_retried_task(
    conn: asyncpg.Connection,
    *,
    caller: str,
    origin_did: str,
    remote_message_id: str,
    user_id: str,
    agent_id: str | None,
    recipient_did: str,
) -> TaskRow | None:
    """In one statement, the task of an earlier delivery of ``remote_message_id`` to this
    recipient (a retry), or None: :func:`get_task_by_remote`'s, else the task that carried
    the message the inbox (``federation_inbox``, by ``origin_did`` and ``recipient_did``)
    maps that id to."""
    record = await conn.fetchrow(
        f"""SELECT {_COLUMNS} FROM (
              (SELECT 0 AS rank, {_COLUMNS} FROM a2a_tasks
               WHERE caller = $1 AND remote_message_id = $2 AND user_id = $3
                 AND agent_id IS NOT DISTINCT FROM $4 LIMIT 1)
              UNION ALL
              (SELECT 1 AS rank, {_COLUMNS} FROM a2a_tasks
               WHERE message_id = (SELECT i.message_id FROM federation_inbox i
                                   WHERE i.origin_did = $5 AND i.remote_message_id = $2
                                     AND i.recipient_did = $6)
               ORDER BY id LIMIT 1)) AS found
            ORDER BY rank LIMIT 1""",
        caller,
        remote_message_id,
        user_id,
        agent_id,
        origin_did,
        recipient_did,
    )
    return _task(record) if record else None


async def get_task_by_message(conn: asyncpg.Connection, *, message_id: str) -> TaskRow | None:
    """The task that carried the local message ``message_id``, or None."""
    record = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM a2a_tasks WHERE message_id = $1 ORDER BY id LIMIT 1", message_id
    )
    return _task(record) if record else None


async def get_task_by_permission(conn: asyncpg.Connection, *, permission_id: str) -> TaskRow | None:
    """The task waiting on the permission request ``permission_id``, or None."""
    record = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM a2a_tasks WHERE permission_id = $1", permission_id
    )
    return _task(record) if record else None


async def recipient_did(conn: asyncpg.Connection, task: TaskRow) -> str:
    """The DID the task's request was addressed to: its agent's, else its user's."""
    value = await conn.fetchval(
        """SELECT COALESCE((SELECT did FROM agents WHERE id = $2),
                           (SELECT did FROM users WHERE id = $1))""",
        task.user_id,
        task.agent_id,
    )
    return str(value)


async def peer_context_id(
    conn: asyncpg.Connection, *, conversation_id: str, caller: str
) -> str | None:
    """The ``contextId`` the caller used in its latest message delivered into
    ``conversation_id``, or None when it never wrote there."""
    value = await conn.fetchval(
        """SELECT t.context_id FROM a2a_tasks t JOIN messages m ON m.id = t.message_id
           WHERE t.caller = $2 AND m.conversation_id = $1 ORDER BY t.id DESC LIMIT 1""",
        conversation_id,
        caller,
    )
    return value  # type: ignore[no-any-return]


HELD_FOR_OWNER = ConferMetadata(heldUntilOwnerReturns=True).metadata()
"""``metadata`` of a task delivered while its owner was offline (the agent answers later)."""


async def list_held_for_owner(
    conn: asyncpg.Connection, *, user_id: str, conversation_id: str | None = None
) -> list[TaskRow]:
    """The owner's tasks still interrupted until they return (locked ``FOR UPDATE``), oldest
    first; with ``conversation_id`` only those whose delivered message is in it."""
    records = await conn.fetch(
        f"""SELECT {_COLUMNS} FROM a2a_tasks t
            WHERE t.user_id = $1 AND t.state = 'TASK_STATE_AUTH_REQUIRED'
              AND t.permission_id IS NULL AND t.metadata_json @> $2::jsonb
              AND ($3::text IS NULL OR EXISTS (
                    SELECT 1 FROM messages m WHERE m.id = t.message_id
                    AND m.conversation_id = $3))
            ORDER BY t.id FOR UPDATE OF t""",
        user_id,
        HELD_FOR_OWNER,
        conversation_id,
    )
    return [_task(r) for r in records]


async def list_answer_waiting(conn: asyncpg.Connection, *, message_id: str) -> list[TaskRow]:
    """The working tasks of API-key callers whose message ``message_id`` an agent is
    answering (their result is the agent's answer)."""
    records = await conn.fetch(
        f"""SELECT {_COLUMNS} FROM a2a_tasks
            WHERE message_id = $1 AND caller LIKE 'key:%' AND state = 'TASK_STATE_WORKING'""",
        message_id,
    )
    return [_task(r) for r in records]


async def update_task_state(
    conn: asyncpg.Connection,
    *,
    id: str,
    state: str,
    status_message: dict[str, Any] | None,
    now: datetime,
    message_id: str | None = None,
    from_states: tuple[str, ...] | None = None,
) -> TaskRow | None:
    """Move a task to ``state``; with ``from_states`` only from one of those (else None)."""
    record = await conn.fetchrow(
        f"""UPDATE a2a_tasks SET state = $2, status_message_json = $3, updated_at = $4,
                   message_id = COALESCE($5, message_id)
            WHERE id = $1 AND ($6::text[] IS NULL OR state = ANY($6::text[]))
            RETURNING {_COLUMNS}""",
        id,
        state,
        status_message,
        now,
        message_id,
        list(from_states) if from_states is not None else None,
    )
    return _task(record) if record else None


async def list_tasks(
    conn: asyncpg.Connection,
    *,
    caller: str,
    user_id: str | None,
    agent_id: str | None,
    context_id: str | None,
    state: str | None,
    after: tuple[datetime, str] | None,
    limit: int,
) -> tuple[list[TaskRow], int]:
    """A page of the caller's tasks, newest status first, and the total matching count.

    ``user_id``/``agent_id`` restrict to one recipient (``user_id`` None = every recipient);
    ``after`` is the ``(updated_at, id)`` of the last task of the previous page.
    """
    where = """caller = $1 AND ($2::text IS NULL OR (user_id = $2
                 AND agent_id IS NOT DISTINCT FROM $3::text))
               AND ($4::text IS NULL OR context_id = $4) AND ($5::text IS NULL OR state = $5)"""
    args = (caller, user_id, agent_id, context_id, state)
    total = await conn.fetchval(f"SELECT count(*) FROM a2a_tasks WHERE {where}", *args)
    records = await conn.fetch(
        f"""SELECT {_COLUMNS} FROM a2a_tasks WHERE {where}
              AND ($6::timestamptz IS NULL OR (updated_at, id) < ($6, $7::text))
            ORDER BY updated_at DESC, id DESC LIMIT $8""",
        *args,
        after[0] if after else None,
        after[1] if after else None,
        limit,
    )
    return [_task(r) for r in records], int(total)
