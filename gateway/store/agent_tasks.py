"""``agent_tasks`` rows: the durable ``agent.{agent_id}.tasks`` queue (migration 0006).

At most one task per conversation and agent is ``queued`` (migration 0008: a group message
may address several agents) and at most one per conversation ``running`` (partial unique
indexes). Enqueuing while a task waits re-points the waiting task at the newer message.

This table is the ledger; telling workers about a queued task is a *dispatch*
(:class:`Dispatch`, announced by the caller through ``gateway.agents.queue.TaskQueue.announce``
in the enqueuing unit of work): ``NOTIFY confer_agent_tasks`` (:func:`notify_queued`), delivered
when the enqueuing transaction commits, or a NATS publish registered to run after commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from gateway.ids import new_id
from gateway.store.users import ACTIVE_OWNER, agent_from_record
from models import Agent

CHANNEL = "confer_agent_tasks"


@dataclass(frozen=True)
class Dispatch:
    """One queued task to announce to workers (subject ``agent.{agent_id}.tasks``)."""

    agent_id: str
    task_id: str
    conversation_id: str


async def notify_queued(conn: asyncpg.Connection, dispatch: Dispatch) -> None:
    """``NOTIFY confer_agent_tasks`` (payload: the conversation id) in ``conn``'s transaction;
    PostgreSQL delivers it to every listener only if that transaction commits."""
    await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, dispatch.conversation_id)


async def enqueue(
    conn: asyncpg.Connection, *, agent_id: str, conversation_id: str, trigger_message_id: str
) -> str:
    """Queue a task (or re-point the waiting one); returns its id. The caller announces it
    to workers (``TaskQueue.announce``) in the same unit of work."""
    task_id = await conn.fetchval(
        """INSERT INTO agent_tasks (id, agent_id, conversation_id, trigger_message_id)
           VALUES ($1, $2, $3, $4)
           ON CONFLICT (conversation_id, agent_id) WHERE status = 'queued'
           DO UPDATE SET trigger_message_id = EXCLUDED.trigger_message_id
           RETURNING id""",
        new_id(),
        agent_id,
        conversation_id,
        trigger_message_id,
    )
    return str(task_id)


CLAIM_LOCK = 0x636F6E66_6572_0001
"""Advisory lock (transaction scope) serialising claims, so the caps count what is running."""


async def claim(
    conn: asyncpg.Connection,
    *,
    now: datetime,
    task_id: str | None = None,
    lease_seconds: float = 60.0,
    max_per_owner: int = 1_000_000,
    max_per_peer: int = 1_000_000,
) -> dict[str, Any] | None:
    """Mark a queued task whose conversation has none running as running, leased until
    ``now + lease_seconds``; or None.

    Without ``task_id`` the oldest such task; with it, that task only (None when it is not
    queued, is locked by another worker, or its conversation already has a running task —
    then it stays queued and a later claim without ``task_id`` picks it up).

    A task whose agent's owner already has ``max_per_owner`` tasks running, or whose trigger
    came from a peer (``sender_type = 'peer_agent'``) that already has ``max_per_peer`` tasks
    running, stays queued the same way. Run it in a transaction: it takes :data:`CLAIM_LOCK`
    so that claims in several processes never run past a cap together.
    """
    # Two statements rather than "$2 IS NULL OR t.id = $2", so the targeted claim always
    # plans as a primary-key lookup.
    which = "t.id = $5" if task_id is not None else "TRUE"
    lease_until = now + timedelta(seconds=lease_seconds)
    args: tuple[Any, ...] = (now, lease_until, max_per_owner, max_per_peer)
    if task_id is not None:
        args += (task_id,)
    await conn.execute("SELECT pg_advisory_xact_lock($1)", CLAIM_LOCK)
    try:
        async with conn.transaction():  # a savepoint: a lost race leaves the caller's open
            record = await conn.fetchrow(
                f"""UPDATE agent_tasks
                   SET status = 'running', attempts = attempts + 1, started_at = $1,
                       lease_until = $2
                   WHERE id = (
                     SELECT t.id FROM agent_tasks t
                     JOIN agents a ON a.id = t.agent_id
                     JOIN messages m ON m.id = t.trigger_message_id
                     WHERE t.status = 'queued' AND {which} AND NOT EXISTS (
                       SELECT 1 FROM agent_tasks r
                       WHERE r.conversation_id = t.conversation_id AND r.status = 'running')
                       AND (SELECT count(*) FROM agent_tasks r
                            JOIN agents ra ON ra.id = r.agent_id
                            WHERE r.status = 'running' AND ra.user_id = a.user_id) < $3
                       AND (m.sender_type <> 'peer_agent' OR m.sender_did IS NULL
                            OR (SELECT count(*) FROM agent_tasks r
                                JOIN messages rm ON rm.id = r.trigger_message_id
                                WHERE r.status = 'running' AND rm.sender_type = 'peer_agent'
                                  AND rm.sender_did = m.sender_did) < $4)
                     ORDER BY t.id FOR UPDATE OF t SKIP LOCKED LIMIT 1)
                   RETURNING *""",
                *args,
            )
    except asyncpg.UniqueViolationError:
        return None  # another worker started this conversation's task first
    return dict(record) if record else None


async def finish(
    conn: asyncpg.Connection,
    *,
    id: str,
    status: str,
    now: datetime,
    reply_message_id: str | None = None,
    error: str | None = None,
) -> bool:
    """End a running task as ``done`` or ``failed``; False when it is no longer running (its
    lease ran out and it was queued again — the caller must not store its answer)."""
    result: str = await conn.execute(
        """UPDATE agent_tasks SET status = $2, finished_at = $3, reply_message_id = $4, error = $5,
                  lease_until = NULL
           WHERE id = $1 AND status = 'running'""",
        id,
        status,
        now,
        reply_message_id,
        error,
    )
    return result.split()[-1] == "1"


def _abandoned(now: str) -> str:
    """SQL: a running task whose worker stopped renewing its lease (its process died) by the
    time in parameter ``now``."""
    return f"t.status = 'running' AND (t.lease_until IS NULL OR t.lease_until < {now})"


async def recover(conn: asyncpg.Connection, *, max_attempts: int, now: datetime) -> int:
    """Retry abandoned tasks (``running`` with an expired lease) or fail them; returns how many.

    A task superseded by a newer queued task of its conversation, or out of attempts, fails;
    the others are queued again. Tasks of live workers (lease still valid) are left alone, so
    any process may call this at any time.
    """
    async with conn.transaction():
        failed = await conn.execute(
            f"""UPDATE agent_tasks t SET status = 'failed', finished_at = $2, lease_until = NULL,
                      error = CASE WHEN t.attempts >= $1 THEN 'interrupted; out of attempts'
                                   ELSE 'interrupted; superseded by a newer task' END
               WHERE {_abandoned("$2")} AND (t.attempts >= $1 OR EXISTS (
                 SELECT 1 FROM agent_tasks q
                 WHERE q.conversation_id = t.conversation_id AND q.agent_id = t.agent_id
                   AND q.status = 'queued'))""",
            max_attempts,
            now,
        )
        queued = await conn.execute(
            f"""UPDATE agent_tasks t SET status = 'queued', lease_until = NULL
               WHERE {_abandoned("$1")}""",
            now,
        )
    return int(failed.split()[-1]) + int(queued.split()[-1])


async def renew_leases(
    conn: asyncpg.Connection, *, ids: list[str], now: datetime, lease_seconds: float
) -> set[str]:
    """Extend the leases of ``ids`` that are still running; returns the ids renewed."""
    records = await conn.fetch(
        """UPDATE agent_tasks SET lease_until = $2
           WHERE id = ANY($1::text[]) AND status = 'running' RETURNING id""",
        ids,
        now + timedelta(seconds=lease_seconds),
    )
    return {r["id"] for r in records}


async def insert_waiting(
    conn: asyncpg.Connection, *, agent_id: str, conversation_id: str, trigger_message_id: str
) -> str:
    """Store a ``waiting`` task (its owner is away), or re-point the conversation's waiting
    task at ``trigger_message_id``; returns its id. Not announced: it is queued on release."""
    task_id = await conn.fetchval(
        """INSERT INTO agent_tasks (id, agent_id, conversation_id, trigger_message_id, status)
           VALUES ($1, $2, $3, $4, 'waiting')
           ON CONFLICT (conversation_id) WHERE status = 'waiting'
           DO UPDATE SET trigger_message_id = EXCLUDED.trigger_message_id
           RETURNING id""",
        new_id(),
        agent_id,
        conversation_id,
        trigger_message_id,
    )
    return str(task_id)


async def fail_superseded_waiting(
    conn: asyncpg.Connection, *, owner_id: str, now: datetime
) -> None:
    """Fail the owner's waiting tasks whose conversation and agent already have a queued task
    (a newer message started it while the owner was online)."""
    await conn.execute(
        """UPDATE agent_tasks w SET status = 'failed', finished_at = $2,
                  error = 'superseded by a newer task'
           FROM agents a
           WHERE w.agent_id = a.id AND a.user_id = $1 AND w.status = 'waiting'
             AND EXISTS (SELECT 1 FROM agent_tasks q WHERE q.status = 'queued'
                         AND q.conversation_id = w.conversation_id
                         AND q.agent_id = w.agent_id)""",
        owner_id,
        now,
    )


async def release_waiting(conn: asyncpg.Connection, *, owner_id: str) -> list[Dispatch]:
    """Move the waiting tasks of ``owner_id``'s agents to ``queued``; returns them for the
    caller to announce in the same unit of work. Run :func:`fail_superseded_waiting` first:
    a conversation may have one queued task per agent."""
    records = await conn.fetch(
        """UPDATE agent_tasks w SET status = 'queued'
           FROM agents a
           WHERE w.agent_id = a.id AND a.user_id = $1 AND w.status = 'waiting'
           RETURNING w.id, w.agent_id, w.conversation_id""",
        owner_id,
    )
    return [Dispatch(r["agent_id"], r["id"], r["conversation_id"]) for r in records]


async def list_owners_with_waiting(conn: asyncpg.Connection) -> list[str]:
    """The user ids owning an agent with a ``waiting`` task."""
    records = await conn.fetch(
        """SELECT DISTINCT a.user_id FROM agent_tasks w JOIN agents a ON a.id = w.agent_id
           WHERE w.status = 'waiting'"""
    )
    return [str(r["user_id"]) for r in records]


async def withdraw_waiting(
    conn: asyncpg.Connection, *, conversation_id: str, reason: str, now: datetime
) -> bool:
    """Fail the conversation's ``waiting`` task with ``reason``; True when there was one."""
    result: str = await conn.execute(
        """UPDATE agent_tasks SET status = 'failed', finished_at = $2, error = $3
           WHERE conversation_id = $1 AND status = 'waiting'""",
        conversation_id,
        now,
        reason,
    )
    return result.split()[-1] != "0"


async def repoint_waiting(
    conn: asyncpg.Connection, *, conversation_id: str, from_message_id: str, to_message_id: str
) -> None:
    """Let the conversation's waiting task, if it answers ``from_message_id``, answer
    ``to_message_id`` instead."""
    await conn.execute(
        """UPDATE agent_tasks SET trigger_message_id = $3
           WHERE conversation_id = $1 AND status = 'waiting' AND trigger_message_id = $2""",
        conversation_id,
        from_message_id,
        to_message_id,
    )


async def get_task(conn: asyncpg.Connection, *, id: str) -> dict[str, Any] | None:
    """One task row, or None."""
    record = await conn.fetchrow("SELECT * FROM agent_tasks WHERE id = $1", id)
    return dict(record) if record else None


async def insert_agent_message(
    conn: asyncpg.Connection,
    *,
    id: str,
    conversation_id: str,
    sender_type: str,
    sender_id: str,
    sender_did: str | None,
    content_type: str,
    content: str,
    content_json: Any,
    citations: Any,
    in_reply_to: str | None,
    via: str | None,
) -> None:
    """Insert the agent's reply (or a system notice) with its citations."""
    await conn.execute(
        """INSERT INTO messages (id, conversation_id, sender_type, sender_id, sender_did,
                                 content_type, content, content_json, citations_json,
                                 in_reply_to, thread_root, via)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
                   (SELECT COALESCE(m.thread_root, m.id) FROM messages m WHERE m.id = $10), $11)""",
        id,
        conversation_id,
        sender_type,
        sender_id,
        sender_did,
        content_type,
        content,
        content_json,
        citations,
        in_reply_to,
        via,
    )


async def get_addressed_agent(
    conn: asyncpg.Connection, *, conversation_id: str, sender_user_id: str
) -> str | None:
    """The agent of a ``direct_user_agent`` conversation when it answers the sender: the
    sender's own agent, or another user's public agent (whose owner is active); else None."""
    value = await conn.fetchval(
        f"""SELECT a.id FROM conversations c
           JOIN conversation_participants p
             ON p.conversation_id = c.id AND p.participant_type = 'own_agent'
           JOIN agents a ON a.id = p.agent_id
           WHERE c.id = $1 AND c.type = 'direct_user_agent'
             AND (a.user_id = $2 OR (a.is_public AND {ACTIVE_OWNER.format(user_id="a.user_id")}))
           ORDER BY (a.user_id = $2) DESC LIMIT 1""",
        conversation_id,
        sender_user_id,
    )
    return str(value) if value else None


async def list_group_agents(conn: asyncpg.Connection, *, conversation_id: str) -> list[Agent]:
    """The local agents taking part in the group ``conversation_id`` whose owners are active
    (not deleted, not disabled); empty for any other conversation type."""
    records = await conn.fetch(
        f"""SELECT a.* FROM conversations c
            JOIN conversation_participants p
              ON p.conversation_id = c.id AND p.participant_type = 'own_agent'
            JOIN agents a ON a.id = p.agent_id
            WHERE c.id = $1 AND c.type = 'group' AND {ACTIVE_OWNER.format(user_id="a.user_id")}
            ORDER BY p.id""",
        conversation_id,
    )
    return [agent_from_record(r) for r in records]


async def get_agent_sender(conn: asyncpg.Connection, *, message_id: str) -> str | None:
    """The agent id that wrote ``message_id`` (``sender_type = 'own_agent'``), else None."""
    value = await conn.fetchval(
        "SELECT sender_id FROM messages WHERE id = $1 AND sender_type = 'own_agent'", message_id
    )
    return str(value) if value else None
