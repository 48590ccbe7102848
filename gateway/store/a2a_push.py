"""``a2a_push_configs`` and ``a2a_push_outbox``: A2A push-notification webhooks (migration 0022).

A config belongs to a task and, through the task's ``caller``, to the client that created it:
every read and write here names the caller, so another caller's config is never seen. The
outbox holds one ``StreamResponse`` per (update, enabled config), written in the transaction
that changed the task; the push worker claims the oldest pending row of each config only, so a
config's notifications arrive in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg

PUSH_CHANNEL = "confer_push"
"""``NOTIFY`` channel that wakes the push worker."""


@dataclass(frozen=True)
class PushConfigRow:
    """One ``TaskPushNotificationConfig`` with its delivery health."""

    task_id: str
    id: str
    url: str
    token: str | None
    auth_scheme: str | None
    auth_credentials: str | None
    failures: int
    last_error: str | None
    disabled_at: datetime | None
    created_at: datetime


@dataclass(frozen=True)
class PushDeliveryRow:
    """A claimed outbox row with what sending it needs: its config and the task's parties.

    ``attempts`` counts this attempt; ``caller`` is the task's caller (``peer:<did>`` for a
    Confer peer); ``recipient_did`` is the DID the task was addressed to (the signer).
    """

    id: str
    task_id: str
    config_id: str
    payload_json: dict[str, Any]
    attempts: int
    url: str
    token: str | None
    auth_scheme: str | None
    auth_credentials: str | None
    caller: str
    recipient_did: str


_CONFIG_COLUMNS = """c.task_id, c.id, c.url, c.token, c.auth_scheme, c.auth_credentials,
    c.failures, c.last_error, c.disabled_at, c.created_at"""


async def lock_task(conn: asyncpg.Connection, *, task_id: str, caller: str) -> bool:
    """Row-lock the caller's task ``task_id`` (configs of one task change one at a time);
    False when it is not the caller's or does not exist."""
    found = await conn.fetchval(
        "SELECT 1 FROM a2a_tasks WHERE id = $1 AND caller = $2 FOR UPDATE", task_id, caller
    )
    return found is not None


async def count_configs(conn: asyncpg.Connection, *, task_id: str) -> int:
    """How many configs the task has (disabled ones included)."""
    return int(
        await conn.fetchval("SELECT count(*) FROM a2a_push_configs WHERE task_id = $1", task_id)
    )


async def find_config_by_target(
    conn: asyncpg.Connection, *, task_id: str, url: str, token: str | None
) -> str | None:
    """The id of the task's config with this URL and token (a retried create), or None."""
    value = await conn.fetchval(
        """SELECT id FROM a2a_push_configs
           WHERE task_id = $1 AND url = $2 AND token IS NOT DISTINCT FROM $3
           ORDER BY created_at LIMIT 1""",
        task_id,
        url,
        token,
    )
    return str(value) if value is not None else None


async def upsert_config(
    conn: asyncpg.Connection,
    *,
    task_id: str,
    id: str,
    url: str,
    token: str | None,
    auth_scheme: str | None,
    auth_credentials: str | None,
) -> PushConfigRow:
    """Create the config, or replace the one with this id (re-enabled, failures cleared:
    the client says where to deliver now)."""
    record = await conn.fetchrow(
        f"""INSERT INTO a2a_push_configs AS c
              (task_id, id, url, token, auth_scheme, auth_credentials)
            VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT (task_id, id) DO UPDATE SET
              url = EXCLUDED.url, token = EXCLUDED.token, auth_scheme = EXCLUDED.auth_scheme,
              auth_credentials = EXCLUDED.auth_credentials, failures = 0, last_error = NULL,
              disabled_at = NULL
            RETURNING {_CONFIG_COLUMNS}""",
        task_id,
        id,
        url,
        token,
        auth_scheme,
        auth_credentials,
    )
    assert record is not None
    return PushConfigRow(**dict(record))


async def get_config(
    conn: asyncpg.Connection, *, task_id: str, id: str, caller: str
) -> PushConfigRow | None:
    """The caller's config ``id`` of task ``task_id``, or None."""
    record = await conn.fetchrow(
        f"""SELECT {_CONFIG_COLUMNS} FROM a2a_push_configs c
            JOIN a2a_tasks t ON t.id = c.task_id
            WHERE c.task_id = $1 AND c.id = $2 AND t.caller = $3""",
        task_id,
        id,
        caller,
    )
    return PushConfigRow(**dict(record)) if record else None


async def list_configs(
    conn: asyncpg.Connection, *, task_id: str, caller: str, after: str | None, limit: int
) -> list[PushConfigRow]:
    """The caller's configs of the task by id, those after ``after``, at most ``limit``."""
    records = await conn.fetch(
        f"""SELECT {_CONFIG_COLUMNS} FROM a2a_push_configs c
            JOIN a2a_tasks t ON t.id = c.task_id
            WHERE c.task_id = $1 AND t.caller = $2 AND ($3::text IS NULL OR c.id > $3)
            ORDER BY c.id LIMIT $4""",
        task_id,
        caller,
        after,
        limit,
    )
    return [PushConfigRow(**dict(r)) for r in records]


async def delete_config(conn: asyncpg.Connection, *, task_id: str, id: str, caller: str) -> bool:
    """Delete the caller's config (its queued notifications go with it); False if none."""
    status = await conn.execute(
        """DELETE FROM a2a_push_configs c USING a2a_tasks t
           WHERE t.id = c.task_id AND c.task_id = $1 AND c.id = $2 AND t.caller = $3""",
        task_id,
        id,
        caller,
    )
    return str(status) != "DELETE 0"


async def queue_notifications(
    conn: asyncpg.Connection,
    *,
    ids: list[str],
    task_id: str,
    payload: dict[str, Any],
    config_id: str | None = None,
) -> int:
    """Queue ``payload`` for each enabled config of the task (only ``config_id`` when given),
    taking outbox ids from ``ids`` (one per config at most, in config order); wake the push
    worker on commit. Returns how many rows were queued."""
    count = int(
        await conn.fetchval(
            """WITH targets AS (
                 SELECT id, row_number() OVER (ORDER BY id) AS n FROM a2a_push_configs
                 WHERE task_id = $1 AND disabled_at IS NULL AND ($4::text IS NULL OR id = $4)),
               queued AS (
                 INSERT INTO a2a_push_outbox (id, task_id, config_id, payload_json)
                 SELECT ($2::text[])[n], $1, id, $3 FROM targets WHERE n <= cardinality($2)
                 RETURNING 1)
               SELECT count(*) FROM queued""",
            task_id,
            ids,
            payload,
            config_id,
        )
    )
    if count:
        await conn.execute("SELECT pg_notify($1, $2)", PUSH_CHANNEL, task_id)
    return count


async def claim_due(
    conn: asyncpg.Connection, *, now: datetime, lease: timedelta, limit: int
) -> list[PushDeliveryRow]:
    """Due pending rows that head their config's queue, each leased (``next_attempt_at``
    moved ``lease`` on, ``attempts`` counted) so no other worker takes it meanwhile."""
    records = await conn.fetch(
        """WITH claimed AS (
             UPDATE a2a_push_outbox SET next_attempt_at = $1::timestamptz + $2::interval,
                                        attempts = attempts + 1
             WHERE id IN (
               SELECT o.id FROM a2a_push_outbox o
               WHERE o.state = 'pending' AND o.next_attempt_at <= $1
                 AND NOT EXISTS (
                   SELECT 1 FROM a2a_push_outbox e
                   WHERE e.task_id = o.task_id AND e.config_id = o.config_id
                     AND e.state = 'pending' AND e.id < o.id)
               ORDER BY o.next_attempt_at LIMIT $3
               FOR UPDATE SKIP LOCKED)
             RETURNING id, task_id, config_id, payload_json, attempts)
           SELECT q.*, c.url, c.token, c.auth_scheme, c.auth_credentials, t.caller,
                  COALESCE(a.did, u.did) AS recipient_did
           FROM claimed q
           JOIN a2a_push_configs c ON c.task_id = q.task_id AND c.id = q.config_id
           JOIN a2a_tasks t ON t.id = q.task_id
           JOIN users u ON u.id = t.user_id
           LEFT JOIN agents a ON a.id = t.agent_id
           ORDER BY q.id""",
        now,
        lease,
        limit,
    )
    return [PushDeliveryRow(**dict(r)) for r in records]


async def next_due_at(conn: asyncpg.Connection) -> datetime | None:
    """When the earliest pending row is due, or None."""
    due: datetime | None = await conn.fetchval(
        "SELECT MIN(next_attempt_at) FROM a2a_push_outbox WHERE state = 'pending'"
    )
    return due


async def mark_delivered(conn: asyncpg.Connection, row: PushDeliveryRow) -> None:
    """The receiver took it: the row is deleted (the outbox holds only what is still to
    send, or failed) and the config's failure count starts over."""
    await conn.execute("DELETE FROM a2a_push_outbox WHERE id = $1", row.id)
    await conn.execute(
        "UPDATE a2a_push_configs SET failures = 0, last_error = NULL "
        "WHERE task_id = $1 AND id = $2",
        row.task_id,
        row.config_id,
    )


async def record_failure(
    conn: asyncpg.Connection,
    row: PushDeliveryRow,
    *,
    now: datetime,
    error: str,
    next_attempt_at: datetime,
    disable_after: int,
) -> bool:
    """Count a failed attempt on the config; retry the row at ``next_attempt_at``, or, at
    ``disable_after`` consecutive failures, disable the config and fail its pending rows.
    Returns True when the config was disabled now."""
    failures = await conn.fetchval(
        """UPDATE a2a_push_configs SET failures = failures + 1, last_error = $3,
                  disabled_at = CASE WHEN failures + 1 >= $4 THEN $5 ELSE disabled_at END
           WHERE task_id = $1 AND id = $2 RETURNING failures""",
        row.task_id,
        row.config_id,
        error,
        disable_after,
        now,
    )
    if failures is not None and failures >= disable_after:
        await conn.execute(
            """UPDATE a2a_push_outbox SET state = 'failed', last_error = $3
               WHERE task_id = $1 AND config_id = $2 AND state = 'pending'""",
            row.task_id,
            row.config_id,
            error,
        )
        return True
    await conn.execute(
        "UPDATE a2a_push_outbox SET next_attempt_at = $2, last_error = $3 WHERE id = $1",
        row.id,
        next_attempt_at,
        error,
    )
    return False
