"""Questions about the database itself rather than one table."""

from __future__ import annotations

import asyncpg


async def ping(conn: asyncpg.Connection) -> None:
    """Run a trivial query; raises the driver's error when the database does not answer."""
    await conn.fetchval("SELECT 1")


async def get_alembic_revision(conn: asyncpg.Connection) -> str | None:
    """The revision recorded in ``alembic_version``, or None when the database was never
    migrated (no table, or an empty one)."""
    if await conn.fetchval("SELECT to_regclass('alembic_version')") is None:
        return None
    value = await conn.fetchval("SELECT version_num FROM alembic_version LIMIT 1")
    return value  # type: ignore[no-any-return]
