"""The SQL of ``confer backup`` and ``confer restore``: an exported snapshot, the stored files
it references, whether a database is empty, wiping one, and re-pointing restored files."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from gateway.store.attachments import NOT_STORED


@dataclass(frozen=True)
class StoredFile:
    """An attachment whose bytes are here: its ``storage_url``, recorded SHA-256 and size."""

    storage_url: str
    sha256: str | None
    size_bytes: int | None


async def export_snapshot(conn: asyncpg.Connection) -> str:
    """Export the snapshot of ``conn``'s open REPEATABLE READ transaction, for
    ``pg_dump --snapshot`` (PostgreSQL: ``pg_export_snapshot()``, valid while it stays open)."""
    snapshot: str = await conn.fetchval("SELECT pg_export_snapshot()")
    return snapshot


async def list_stored_files(conn: asyncpg.Connection) -> list[StoredFile]:
    """Every attachment with bytes in storage (a peer's file not fetched yet has none)."""
    records = await conn.fetch(
        """SELECT DISTINCT storage_url, sha256, size_bytes FROM attachments
           WHERE storage_url <> $1 ORDER BY storage_url""",
        NOT_STORED,
    )
    return [StoredFile(r["storage_url"], r["sha256"], r["size_bytes"]) for r in records]


async def get_server_major(conn: asyncpg.Connection) -> int:
    """The server's major version (``server_version_num`` 150020 → 15)."""
    number = int(await conn.fetchval("SHOW server_version_num"))
    return number // 10000


async def count_relations(conn: asyncpg.Connection) -> int:
    """Tables, views, sequences and foreign tables outside the system schemas: 0 for an
    empty database."""
    count: int = await conn.fetchval(
        """SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
             AND n.nspname NOT IN ('pg_catalog', 'information_schema')
             AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'"""
    )
    return count


async def wipe_public_schema(conn: asyncpg.Connection) -> None:
    """Drop everything in schema ``public`` (extensions installed there included) and
    recreate it empty — where Confer keeps all its objects."""
    await conn.execute("DROP SCHEMA public CASCADE")
    await conn.execute("CREATE SCHEMA public")


async def update_storage_urls(conn: asyncpg.Connection, moved: dict[str, str]) -> int:
    """Re-point attachments from old to new storage URLs; returns the rows changed."""
    if not moved:
        return 0
    result = await conn.execute(
        """UPDATE attachments a SET storage_url = m.new
           FROM unnest($1::text[], $2::text[]) AS m(old, new) WHERE a.storage_url = m.old""",
        list(moved),
        list(moved.values()),
    )
    return int(result.split()[-1])
