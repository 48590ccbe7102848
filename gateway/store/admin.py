"""Read-mostly queries of the admin API: user search, audit log filters, instance counts."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import asyncpg


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def list_users(
    conn: asyncpg.Connection, *, query: str | None, before: str | None, limit: int
) -> list[asyncpg.Record]:
    """Users (deleted ones included) newest first, optionally matching ``query`` in username,
    display name or email (case-insensitive substring); with admin and disabled state."""
    records: list[asyncpg.Record] = await conn.fetch(
        """SELECT u.id, u.username, u.display_name, u.email, u.phone, u.did, u.created_at,
                  u.deleted_at, d.disabled_at, d.reason AS disabled_reason,
                  (a.user_id IS NOT NULL) AS is_admin
           FROM users u
           LEFT JOIN disabled_users d ON d.user_id = u.id
           LEFT JOIN admins a ON a.user_id = u.id
           WHERE ($1::text IS NULL OR u.username ILIKE $1 OR u.display_name ILIKE $1
                  OR u.email ILIKE $1)
             AND ($2::char(26) IS NULL OR u.id < $2)
           ORDER BY u.id DESC LIMIT $3""",
        _like(query) if query else None,
        before,
        limit,
    )
    return records


async def get_user_row(conn: asyncpg.Connection, *, id: str) -> asyncpg.Record | None:
    """One user in the shape of ``list_users``, or None."""
    records = await conn.fetch(
        """SELECT u.id, u.username, u.display_name, u.email, u.phone, u.did, u.created_at,
                  u.deleted_at, d.disabled_at, d.reason AS disabled_reason,
                  (a.user_id IS NOT NULL) AS is_admin
           FROM users u
           LEFT JOIN disabled_users d ON d.user_id = u.id
           LEFT JOIN admins a ON a.user_id = u.id
           WHERE u.id = $1""",
        id,
    )
    return records[0] if records else None


async def list_audit(
    conn: asyncpg.Connection,
    *,
    user_id: str | None,
    action: str | None,
    since: datetime | None,
    until: datetime | None,
    before: str | None,
    limit: int,
) -> list[dict[str, Any]]:
    """Audit rows newest first. ``action`` is exact, or a prefix when it ends with ``*``
    (``auth.*``); ``since`` inclusive, ``until`` exclusive."""
    prefix = action[:-1] if action and action.endswith("*") else None
    records = await conn.fetch(
        """SELECT id, user_id, action, details_json, host(ip_address) AS ip_address, created_at
           FROM audit_log
           WHERE ($1::char(26) IS NULL OR user_id = $1)
             AND ($2::text IS NULL OR action = $2)
             AND ($3::text IS NULL OR starts_with(action, $3))
             AND ($4::timestamptz IS NULL OR created_at >= $4)
             AND ($5::timestamptz IS NULL OR created_at < $5)
             AND ($6::char(26) IS NULL OR id < $6)
           ORDER BY id DESC LIMIT $7""",
        user_id,
        None if prefix is not None else action,
        prefix,
        since,
        until,
        before,
        limit,
    )
    return [dict(r) for r in records]


async def instance_counts(conn: asyncpg.Connection, *, now: datetime) -> dict[str, int]:
    """The numbers of ``InstanceStats`` (one round trip)."""
    day_ago = now - timedelta(days=1)
    record = await conn.fetchrow(
        """SELECT
             (SELECT count(*) FROM users) AS users_total,
             (SELECT count(*) FROM users u WHERE deleted_at IS NULL
                AND NOT EXISTS (SELECT 1 FROM disabled_users d WHERE d.user_id = u.id))
                AS users_active,
             (SELECT count(*) FROM users WHERE deleted_at IS NOT NULL) AS users_deleted,
             (SELECT count(*) FROM disabled_users) AS users_disabled,
             (SELECT count(*) FROM admins) AS admins,
             (SELECT count(*) FROM sessions WHERE expires_at > $1) AS sessions_live,
             (SELECT count(*) FROM agents) AS agents,
             (SELECT count(*) FROM conversations) AS conversations,
             (SELECT count(*) FROM messages) AS messages,
             (SELECT count(*) FROM peer_agents) AS peer_agents,
             (SELECT count(*) FROM audit_log WHERE created_at >= $2) AS audit_events_24h,
             (SELECT count(*) FROM audit_log WHERE created_at >= $2
                AND action = 'auth.login_failed') AS login_failures_24h""",
        now,
        day_ago,
    )
    assert record is not None
    return {k: int(v) for k, v in dict(record).items()}
