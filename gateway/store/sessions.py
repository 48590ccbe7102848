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


async def get_session(conn: asyncpg.Connection, *, id: str) -> SessionRow | None:
    """The session row, expired or not; None when absent (revoked or never existed)."""
    record = await conn.fetchrow("SELECT * FROM sessions WHERE id = $1", id)
    return SessionRow.model_validate(dict(record)) if record else None


async def rotate_refresh_hash(
    conn: asyncpg.Connection,
    *,
    id: str,
    old_hash: str | None,
    new_hash: str,
    now: datetime,
    expires_at: datetime,
) -> bool:
    """Compare-and-set the session's refresh token hash (``old_hash`` None: first set).

    Row-locking UPDATE, so of two concurrent rotations of the same token only one matches.
    Returns True when this call replaced the hash.
    """
    status = await conn.execute(
        """UPDATE sessions SET refresh_token_hash = $3, last_active_at = $4, expires_at = $5
           WHERE id = $1 AND refresh_token_hash IS NOT DISTINCT FROM $2 AND expires_at > $4""",
        id,
        old_hash,
        new_hash,
        now,
        expires_at,
    )
    return bool(status.endswith(" 1"))


async def list_live_sessions(
    conn: asyncpg.Connection, *, user_id: str | None, now: datetime, limit: int = 500
) -> list[SessionRow]:
    """Unexpired sessions, newest first; of one user, or of everyone when ``user_id`` is None."""
    records = await conn.fetch(
        """SELECT * FROM sessions WHERE ($1::char(26) IS NULL OR user_id = $1)
           AND expires_at > $2 ORDER BY created_at DESC, id DESC LIMIT $3""",
        user_id,
        now,
        limit,
    )
    return [SessionRow.model_validate(dict(r)) for r in records]


async def delete_user_session(conn: asyncpg.Connection, *, id: str, user_id: str) -> bool:
    """Delete one session of ``user_id``; True when it existed."""
    status = await conn.execute("DELETE FROM sessions WHERE id = $1 AND user_id = $2", id, user_id)
    return bool(status.endswith(" 1"))


async def delete_user_sessions(
    conn: asyncpg.Connection, *, user_id: str, keep: str | None = None
) -> int:
    """Delete every session of ``user_id`` except ``keep``; returns how many."""
    status = await conn.execute(
        "DELETE FROM sessions WHERE user_id = $1 AND id IS DISTINCT FROM $2", user_id, keep
    )
    return int(status.split()[-1])


async def delete_device_sessions(conn: asyncpg.Connection, *, user_id: str, device_id: str) -> int:
    """Delete the sessions of one device of ``user_id`` (a new login replaces them)."""
    status = await conn.execute(
        "DELETE FROM sessions WHERE user_id = $1 AND device_id = $2", user_id, device_id
    )
    return int(status.split()[-1])
