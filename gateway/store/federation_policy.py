"""The instance federation policy: its mode and its allow and deny lists (migration 0019)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

POLICY_CHANNEL = "confer_federation_policy"
"""``NOTIFY`` channel every process LISTENs on to reload its cached policy."""


@dataclass(frozen=True)
class PolicyEntryRow:
    """One list entry: a domain pattern or a DID, on the ``allow`` or ``deny`` list."""

    pattern: str
    list: str
    note: str | None
    created_by: str | None
    created_at: datetime


async def get_mode(conn: asyncpg.Connection) -> str:
    """The instance's mode: ``open``, ``allowlist`` or ``denylist``."""
    mode = await conn.fetchval("SELECT mode FROM federation_policy WHERE id = 1")
    return str(mode or "open")


async def set_mode(conn: asyncpg.Connection, *, mode: str, now: datetime) -> str:
    """Set the mode; returns the previous one. Announces the change at commit."""
    previous = await get_mode(conn)
    await conn.execute(
        """INSERT INTO federation_policy (id, mode, updated_at) VALUES (1, $1, $2)
           ON CONFLICT (id) DO UPDATE SET mode = EXCLUDED.mode, updated_at = EXCLUDED.updated_at""",
        mode,
        now,
    )
    await notify_change(conn)
    return previous


async def list_entries(conn: asyncpg.Connection) -> list[PolicyEntryRow]:
    """Every entry, by list then pattern."""
    rows = await conn.fetch(
        """SELECT pattern, list, note, created_by, created_at FROM federation_policy_entries
           ORDER BY list, pattern"""
    )
    return [PolicyEntryRow(**dict(r)) for r in rows]


async def upsert_entry(
    conn: asyncpg.Connection,
    *,
    pattern: str,
    list_name: str,
    note: str | None,
    created_by: str | None,
    now: datetime,
) -> PolicyEntryRow:
    """Put ``pattern`` on ``list_name`` (moving it from the other list). Announces at commit."""
    row = await conn.fetchrow(
        """INSERT INTO federation_policy_entries (pattern, list, note, created_by, created_at)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (pattern) DO UPDATE
             SET list = EXCLUDED.list, note = EXCLUDED.note, created_by = EXCLUDED.created_by,
                 created_at = EXCLUDED.created_at
           RETURNING pattern, list, note, created_by, created_at""",
        pattern,
        list_name,
        note,
        created_by,
        now,
    )
    await notify_change(conn)
    assert row is not None
    return PolicyEntryRow(**dict(row))


async def delete_entry(conn: asyncpg.Connection, *, pattern: str) -> PolicyEntryRow | None:
    """Remove ``pattern`` from whichever list holds it; the removed row, or None."""
    row = await conn.fetchrow(
        """DELETE FROM federation_policy_entries WHERE pattern = $1
           RETURNING pattern, list, note, created_by, created_at""",
        pattern,
    )
    if row is None:
        return None
    await notify_change(conn)
    return PolicyEntryRow(**dict(row))


async def notify_change(conn: asyncpg.Connection) -> None:
    """``NOTIFY`` the policy channel; PostgreSQL delivers it only if the transaction commits."""
    await conn.execute(f"NOTIFY {POLICY_CHANNEL}")
