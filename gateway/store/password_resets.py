"""``password_resets``: one-time password-reset tokens, stored as SHA-256 (migration 0017)."""

from __future__ import annotations

from datetime import datetime

import asyncpg


async def insert_reset(
    conn: asyncpg.Connection, *, token_hash: str, user_id: str, now: datetime, expires_at: datetime
) -> None:
    """Store a new token's hash for ``user_id``, valid until ``expires_at``."""
    await conn.execute(
        """INSERT INTO password_resets (token_hash, user_id, created_at, expires_at)
           VALUES ($1, $2, $3, $4)""",
        token_hash,
        user_id,
        now,
        expires_at,
    )


async def use_reset(conn: asyncpg.Connection, *, token_hash: str, now: datetime) -> str | None:
    """Spend the token: the user id when it was unused, unexpired and its account live; None
    otherwise. The row lock makes it single-use under concurrent confirmations."""
    value = await conn.fetchval(
        """UPDATE password_resets r SET used_at = $2
           FROM users u
           WHERE r.token_hash = $1 AND r.used_at IS NULL AND r.expires_at > $2
             AND u.id = r.user_id AND u.deleted_at IS NULL
           RETURNING r.user_id""",
        token_hash,
        now,
    )
    return str(value) if value is not None else None


async def delete_user_resets(conn: asyncpg.Connection, *, user_id: str) -> int:
    """Forget every token of ``user_id`` (its password was just set); returns how many."""
    status = await conn.execute("DELETE FROM password_resets WHERE user_id = $1", user_id)
    return int(status.split()[-1])
