"""``project_memory`` and ``project_memory_versions`` rows (data model; migration 0006)."""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.ids import new_id
from models import ProjectMemoryRow

_COLUMNS = """id, user_id, project_id, peer_id, facts_md, decisions_md, meta_json, version,
              created_at, updated_at"""


def _row(record: asyncpg.Record) -> ProjectMemoryRow:
    return ProjectMemoryRow.model_validate(dict(record))


async def get_project_memory(
    conn: asyncpg.Connection, *, user_id: str, project_id: str, peer_id: str, lock: bool = False
) -> ProjectMemoryRow | None:
    """The document of (user, project, peer), optionally locked FOR UPDATE; None when absent."""
    record = await conn.fetchrow(
        f"""SELECT {_COLUMNS} FROM project_memory
            WHERE user_id = $1 AND project_id = $2 AND peer_id = $3
            {"FOR UPDATE" if lock else ""}""",
        user_id,
        project_id,
        peer_id,
    )
    return _row(record) if record else None


async def insert_project_memory(
    conn: asyncpg.Connection,
    *,
    user_id: str,
    project_id: str,
    peer_id: str,
    fields: dict[str, Any],
) -> ProjectMemoryRow | None:
    """Create version 1; None when a concurrent writer created it first."""
    record = await conn.fetchrow(
        f"""INSERT INTO project_memory (id, user_id, project_id, peer_id, facts_md, decisions_md,
                                        meta_json, version)
            VALUES ($1, $2, $3, $4, $5, $6, $7, 1)
            ON CONFLICT (user_id, project_id, peer_id) DO NOTHING RETURNING {_COLUMNS}""",
        new_id(),
        user_id,
        project_id,
        peer_id,
        fields.get("facts_md"),
        fields.get("decisions_md"),
        fields.get("meta"),
    )
    return _row(record) if record else None


async def update_project_memory(
    conn: asyncpg.Connection, *, id: str, expected_version: int, fields: dict[str, Any]
) -> ProjectMemoryRow | None:
    """Write the next version if the current one is ``expected_version``; None when stale."""
    record = await conn.fetchrow(
        f"""UPDATE project_memory
            SET facts_md = $3, decisions_md = $4, meta_json = $5, version = version + 1,
                updated_at = NOW()
            WHERE id = $1 AND version = $2 RETURNING {_COLUMNS}""",
        id,
        expected_version,
        fields.get("facts_md"),
        fields.get("decisions_md"),
        fields.get("meta"),
    )
    return _row(record) if record else None


async def insert_version(conn: asyncpg.Connection, *, row: ProjectMemoryRow, via: str) -> None:
    """Keep a copy of ``row`` as it is now in the version history."""
    await conn.execute(
        """INSERT INTO project_memory_versions (id, project_memory_id, version, facts_md,
                                                decisions_md, meta_json, written_via)
           VALUES ($1, $2, $3, $4, $5, $6, $7)""",
        new_id(),
        row.id,
        row.version,
        row.facts_md,
        row.decisions_md,
        row.meta_json,
        via,
    )


async def list_versions(
    conn: asyncpg.Connection, *, project_memory_id: str
) -> list[dict[str, Any]]:
    """Every stored version, newest first."""
    records = await conn.fetch(
        """SELECT version, facts_md, decisions_md, meta_json AS meta, written_via, created_at
           FROM project_memory_versions WHERE project_memory_id = $1 ORDER BY version DESC""",
        project_memory_id,
    )
    return [dict(r) for r in records]


async def list_for_user(
    conn: asyncpg.Connection, *, user_id: str, project_id: str | None, limit: int
) -> list[dict[str, Any]]:
    """The user's documents (with the peer's DID), most recently updated first."""
    records = await conn.fetch(
        """SELECT pm.id, pm.project_id, pm.facts_md, pm.decisions_md, pm.meta_json, pm.version,
                  pm.created_at, pm.updated_at, pa.did AS peer_did
            FROM project_memory pm JOIN peer_agents pa ON pa.id = pm.peer_id
            WHERE pm.user_id = $1 AND ($2::text IS NULL OR pm.project_id = $2)
            ORDER BY pm.updated_at DESC LIMIT $3""",
        user_id,
        project_id,
        limit,
    )
    return [dict(r) for r in records]
