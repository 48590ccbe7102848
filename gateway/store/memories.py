"""``agent_memories`` rows (migration 0006; context-tables spec ``memoria``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from models.context import MemoryRow

_COLUMNS = """id, agent_id, type, content, importance, uses, last_used_at, origin_conversation_id,
              project_id, domain, expires_at, created_at, updated_at"""


async def insert_memory(
    conn: asyncpg.Connection, *, id: str, agent_id: str, fields: dict[str, Any]
) -> MemoryRow:
    """Insert a memory; ``fields`` holds the ``MemoryCreate`` fields."""
    record = await conn.fetchrow(
        f"""INSERT INTO agent_memories (id, agent_id, type, content, importance,
                                        origin_conversation_id, project_id, domain, expires_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {_COLUMNS}""",
        id,
        agent_id,
        fields["type"],
        fields["content"],
        fields.get("importance", 5),
        fields.get("origin_conversation_id"),
        fields.get("project_id"),
        fields.get("domain"),
        fields.get("expires_at"),
    )
    assert record is not None
    return MemoryRow.model_validate(dict(record))


async def get_memory(conn: asyncpg.Connection, *, id: str, agent_id: str) -> MemoryRow | None:
    """One memory of ``agent_id``, or None."""
    record = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM agent_memories WHERE id = $1 AND agent_id = $2", id, agent_id
    )
    return MemoryRow.model_validate(dict(record)) if record else None


async def list_memories(
    conn: asyncpg.Connection,
    *,
    agent_id: str,
    type: str | None = None,
    include_expired: bool = True,
    now: datetime,
    limit: int,
) -> list[MemoryRow]:
    """Memories of ``agent_id``, most important first, then newest."""
    records = await conn.fetch(
        f"""SELECT {_COLUMNS} FROM agent_memories
            WHERE agent_id = $1 AND ($2::text IS NULL OR type = $2)
              AND ($3 OR expires_at IS NULL OR expires_at > $4)
            ORDER BY importance DESC, id DESC LIMIT $5""",
        agent_id,
        type,
        include_expired,
        now,
        limit,
    )
    return [MemoryRow.model_validate(dict(r)) for r in records]


async def update_memory(
    conn: asyncpg.Connection, *, id: str, agent_id: str, changes: dict[str, Any]
) -> MemoryRow | None:
    """Apply ``changes`` (column → value; keys are MemoryUpdate fields). None when not found."""
    allowed = ("type", "content", "importance", "expires_at")
    names = [name for name in allowed if name in changes]
    assignments = ", ".join(f"{name} = ${i + 3}" for i, name in enumerate(names))
    record = await conn.fetchrow(
        f"""UPDATE agent_memories SET {assignments + ", " if names else ""}updated_at = NOW()
            WHERE id = $1 AND agent_id = $2 RETURNING {_COLUMNS}""",
        id,
        agent_id,
        *(changes[name] for name in names),
    )
    return MemoryRow.model_validate(dict(record)) if record else None


async def delete_memory(conn: asyncpg.Connection, *, id: str, agent_id: str) -> bool:
    """Delete one memory (and its embeddings); True when it existed."""
    deleted = await conn.fetchval(
        "DELETE FROM agent_memories WHERE id = $1 AND agent_id = $2 RETURNING id", id, agent_id
    )
    return deleted is not None


async def mark_used(conn: asyncpg.Connection, *, ids: list[str], now: datetime) -> None:
    """Count one more use of each memory in ``ids`` and stamp ``last_used_at`` (context-tables
    spec)."""
    await conn.execute(
        """UPDATE agent_memories SET uses = uses + 1, last_used_at = $2
           WHERE id = ANY($1::char(26)[])""",
        ids,
        now,
    )
