"""Accounts side tables of migration 0003: username skeletons, admins, disabled accounts and
used refresh tokens."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from gateway.errors import UsernameTakenError


async def insert_skeleton(conn: asyncpg.Connection, *, user_id: str, skeleton: str) -> None:
    """Reserve ``skeleton`` for ``user_id``. Raises UsernameTakenError when another user (even
    a deleted one) holds the same or a confusable name."""
    try:
        await conn.execute(
            "INSERT INTO username_skeletons (user_id, skeleton) VALUES ($1, $2)", user_id, skeleton
        )
    except asyncpg.UniqueViolationError as exc:
        raise UsernameTakenError("that username, or one that looks like it, is taken") from exc


async def skeleton_taken(conn: asyncpg.Connection, *, skeleton: str) -> bool:
    """True when some user (deleted ones included) holds ``skeleton``."""
    return bool(
        await conn.fetchval("SELECT 1 FROM username_skeletons WHERE skeleton = $1", skeleton)
    )


async def is_admin(conn: asyncpg.Connection, *, user_id: str) -> bool:
    """True when ``user_id`` is an admin."""
    return bool(await conn.fetchval("SELECT 1 FROM admins WHERE user_id = $1", user_id))


async def insert_admin(
    conn: asyncpg.Connection, *, user_id: str, granted_by: str | None = None
) -> bool:
    """Make ``user_id`` an admin; False when it already was."""
    status = await conn.execute(
        """INSERT INTO admins (user_id, granted_by) VALUES ($1, $2)
           ON CONFLICT (user_id) DO NOTHING""",
        user_id,
        granted_by,
    )
    return bool(status.endswith(" 1"))


async def get_disabled(conn: asyncpg.Connection, *, user_id: str) -> asyncpg.Record | None:
    """``(reason, disabled_by, disabled_at)`` when the account is disabled, else None."""
    return await conn.fetchrow(
        "SELECT reason, disabled_by, disabled_at FROM disabled_users WHERE user_id = $1", user_id
    )


async def insert_disabled(
    conn: asyncpg.Connection, *, user_id: str, reason: str | None, disabled_by: str, now: datetime
) -> bool:
    """Disable an account; False when it already was disabled."""
    status = await conn.execute(
        """INSERT INTO disabled_users (user_id, reason, disabled_by, disabled_at)
           VALUES ($1, $2, $3, $4) ON CONFLICT (user_id) DO NOTHING""",
        user_id,
        reason,
        disabled_by,
        now,
    )
    return bool(status.endswith(" 1"))


async def delete_disabled(conn: asyncpg.Connection, *, user_id: str) -> bool:
    """Re-enable an account; False when it was not disabled."""
    status = await conn.execute("DELETE FROM disabled_users WHERE user_id = $1", user_id)
    return bool(status.endswith(" 1"))


async def insert_used_token(
    conn: asyncpg.Connection, *, token_hash: str, session_id: str, user_id: str, now: datetime
) -> None:
    """Remember a rotated-away refresh token hash (for reuse detection)."""
    await conn.execute(
        """INSERT INTO used_refresh_tokens (token_hash, session_id, user_id, used_at)
           VALUES ($1, $2, $3, $4) ON CONFLICT (token_hash) DO NOTHING""",
        token_hash,
        session_id,
        user_id,
        now,
    )


async def get_used_token(conn: asyncpg.Connection, *, token_hash: str) -> asyncpg.Record | None:
    """``(session_id, user_id, used_at)`` of a rotated-away refresh token, or None."""
    return await conn.fetchrow(
        "SELECT session_id, user_id, used_at FROM used_refresh_tokens WHERE token_hash = $1",
        token_hash,
    )
