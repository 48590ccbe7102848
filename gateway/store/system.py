"""Questions about the database itself rather than one table."""

from __future__ import annotations

import asyncpg


async def ping(conn: asyncpg.Connection) -> None:
    """Run a trivial query; raises the driver's error when the database does not answer."""
    await conn.fetchval("SELECT 1")
