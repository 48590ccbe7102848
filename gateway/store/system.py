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


# One advisory lock key (PostgreSQL's two-int4 form) that every serving Confer process holds
# on its own direct connection: exclusive without a shared event bus, shared with one.
CLAIM_CLASS, CLAIM_OBJECT = 0x436F6E66, 0x65720001  # "Conf", "er" + 1


async def try_claim(conn: asyncpg.Connection, *, shared: bool) -> bool:
    """Take the serving-process advisory lock at session level on ``conn`` (shared or
    exclusive) without waiting; True when taken. It lasts until ``conn`` closes."""
    function = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
    taken = await conn.fetchval(f"SELECT {function}($1, $2)", CLAIM_CLASS, CLAIM_OBJECT)
    return bool(taken)


async def claim_holders(conn: asyncpg.Connection, *, this_database: bool) -> list[int]:
    """Backend pids (other than ``conn``'s) holding the serving-process lock: in this database
    only, or in every database of the server (who still uses an embedded server)."""
    rows = await conn.fetch(
        """SELECT DISTINCT l.pid FROM pg_locks l
            WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1::oid
              AND l.objid = $2::oid AND l.objsubid = 2 AND l.pid <> pg_backend_pid()
              AND (NOT $3 OR l.database =
                   (SELECT oid FROM pg_database WHERE datname = current_database()))
            ORDER BY l.pid""",
        CLAIM_CLASS,
        CLAIM_OBJECT,
        this_database,
    )
    return [row["pid"] for row in rows]
