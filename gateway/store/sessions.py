"""``sessions`` rows: one per logged-in device (data model: sessions)."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from models import SessionRow


async def insert_session(
    conn: asyncpg.Connection,
    *,
    id: str,
    user_id: str,
    device_id: str,
    platform: str | None,
    expires_at: datetime,
    now: datetime,
) -> SessionRow:
    """Insert a device session that expires at ``expires_at``."""
    record = await conn.fetchrow(
        """INSERT INTO sessions (id, user_id, device_id, platform, last_active_at, expires_at)
           VALUES ($1, $2, $3, $4, $5, $6) RETURNING *""",
        id,
        user_id,
        device_id,
        platform,
        now,
        expires_at,
    )
    assert record is not None
    return SessionRow.model_validate(dict(record))


async def get_live_session(
    conn: asyncpg.Connection, *, id: str, user_id: str, now: datetime
) -> SessionRow | None:
    """The session if it exists for this user and has not expired; None otherwise."""
    record = await conn.fetchrow(
        "SELECT * FROM sessions WHERE id = $1 AND user_id = $2 AND expires_at > $3",
        id,
        user_id,
        now,
    )
    return SessionRow.model_validate(dict(record)) if record else None


async def delete_session(conn: asyncpg.Connection, *, id: str) -> bool:
    """Delete a session (log out); True when a row was removed."""
    status = await conn.execute("DELETE FROM sessions WHERE id = $1", id)
    return bool(status.endswith(" 1"))
