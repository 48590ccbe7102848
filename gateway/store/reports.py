"""``reports`` rows: users' reports of messages, users and peers, and their resolution
(migration 0019)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from gateway.ids import new_id

_COLUMNS = """id, reporter_id, target_type, message_id, target_user_id, target_did, category,
              text, snapshot_json, status, action, resolution_note, resolved_by, resolved_at,
              created_at"""


async def insert_report(
    conn: asyncpg.Connection,
    *,
    reporter_id: str,
    target_type: str,
    message_id: str | None,
    target_user_id: str | None,
    target_did: str | None,
    category: str,
    text: str | None,
    snapshot: dict[str, Any] | None,
) -> dict[str, Any]:
    """Store an open report; the row."""
    row = await conn.fetchrow(
        f"""INSERT INTO reports (id, reporter_id, target_type, message_id, target_user_id,
                                target_did, category, text, snapshot_json)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {_COLUMNS}""",
        new_id(),
        reporter_id,
        target_type,
        message_id,
        target_user_id,
        target_did,
        category,
        text,
        snapshot,
    )
    assert row is not None
    return dict(row)


async def list_reports(
    conn: asyncpg.Connection, *, status: str | None, before: str | None, limit: int
) -> list[dict[str, Any]]:
    """Reports newest first, by status, below the ``before`` id."""
    rows = await conn.fetch(
        f"""SELECT {_COLUMNS} FROM reports
            WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR id < $2)
            ORDER BY id DESC LIMIT $3""",
        status,
        before,
        limit,
    )
    return [dict(r) for r in rows]


async def get_report_for_update(conn: asyncpg.Connection, *, id: str) -> dict[str, Any] | None:
    """The report, locked for its resolution; None when there is none."""
    row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM reports WHERE id = $1 FOR UPDATE", id)
    return dict(row) if row else None


async def resolve_report(
    conn: asyncpg.Connection,
    *,
    id: str,
    action: str,
    note: str | None,
    resolved_by: str,
    now: datetime,
) -> dict[str, Any]:
    """Close the report with ``action``; the row."""
    row = await conn.fetchrow(
        f"""UPDATE reports SET status = 'resolved', action = $2, resolution_note = $3,
                   resolved_by = $4, resolved_at = $5
            WHERE id = $1 RETURNING {_COLUMNS}""",
        id,
        action,
        note,
        resolved_by,
        now,
    )
    assert row is not None
    return dict(row)
