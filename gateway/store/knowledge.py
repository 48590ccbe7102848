"""``knowledge`` and ``ambient_context`` rows (migration 0006; context-tables spec)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from models.context import AmbientContextRow, KnowledgeRow

_KNOWLEDGE = """id, user_id, category, title, content, tags, allowed_agents, priority, source,
                content_hash, project_id, domain, created_at, updated_at"""
_EDITABLE = ("category", "title", "content", "tags", "allowed_agents", "priority", "content_hash")


def _knowledge(record: asyncpg.Record) -> KnowledgeRow:
    data = dict(record)
    if data["allowed_agents"] is not None:
        data["allowed_agents"] = [a.strip() for a in data["allowed_agents"]]
    return KnowledgeRow.model_validate(data)


async def insert_knowledge(
    conn: asyncpg.Connection, *, id: str, user_id: str, content_hash: str, fields: dict[str, Any]
) -> tuple[KnowledgeRow, bool]:
    """Insert an entry unless the owner already has the same content.

    Returns ``(row, created)``; when the content hash exists the existing row comes back.
    """
    record = await conn.fetchrow(
        f"""INSERT INTO knowledge (id, user_id, category, title, content, tags, allowed_agents,
                                   priority, source, content_hash, project_id, domain)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
            ON CONFLICT (user_id, content_hash) DO NOTHING RETURNING {_KNOWLEDGE}""",
        id,
        user_id,
        fields["category"],
        fields.get("title"),
        fields["content"],
        fields.get("tags") or [],
        fields.get("allowed_agents"),
        fields.get("priority", 0),
        fields.get("source"),
        content_hash,
        fields.get("project_id"),
        fields.get("domain"),
    )
    if record is not None:
        return _knowledge(record), True
    existing = await conn.fetchrow(
        f"SELECT {_KNOWLEDGE} FROM knowledge WHERE user_id = $1 AND content_hash = $2",
        user_id,
        content_hash,
    )
    assert existing is not None
    return _knowledge(existing), False


async def get_knowledge(conn: asyncpg.Connection, *, id: str, user_id: str) -> KnowledgeRow | None:
    """One entry of ``user_id``'s knowledge base, or None."""
    record = await conn.fetchrow(
        f"SELECT {_KNOWLEDGE} FROM knowledge WHERE id = $1 AND user_id = $2", id, user_id
    )
    return _knowledge(record) if record else None


async def list_knowledge(
    conn: asyncpg.Connection,
    *,
    user_id: str,
    category: str | None = None,
    readable_by: str | None = None,
    limit: int,
) -> list[KnowledgeRow]:
    """Entries by priority; with ``readable_by`` only those that agent may read (context-tables
    spec)."""
    records = await conn.fetch(
        f"""SELECT {_KNOWLEDGE} FROM knowledge
            WHERE user_id = $1 AND ($2::text IS NULL OR category = $2)
              AND ($3::char(26) IS NULL OR allowed_agents IS NULL OR $3 = ANY(allowed_agents))
            ORDER BY priority DESC, id DESC LIMIT $4""",
        user_id,
        category,
        readable_by,
        limit,
    )
    return [_knowledge(r) for r in records]


async def update_knowledge(
    conn: asyncpg.Connection, *, id: str, user_id: str, changes: dict[str, Any]
) -> KnowledgeRow | None:
    """Apply ``changes`` (KnowledgeUpdate fields plus ``content_hash``). None when not found.

    Raises ``asyncpg.UniqueViolationError`` when new content duplicates another entry.
    """
    names = [name for name in _EDITABLE if name in changes]
    assignments = ", ".join(f"{name} = ${i + 3}" for i, name in enumerate(names))
    record = await conn.fetchrow(
        f"""UPDATE knowledge SET {assignments + ", " if names else ""}updated_at = NOW()
            WHERE id = $1 AND user_id = $2 RETURNING {_KNOWLEDGE}""",
        id,
        user_id,
        *(changes[name] for name in names),
    )
    return _knowledge(record) if record else None


async def delete_knowledge(conn: asyncpg.Connection, *, id: str, user_id: str) -> bool:
    """Delete one entry; True when it existed."""
    deleted = await conn.fetchval(
        "DELETE FROM knowledge WHERE id = $1 AND user_id = $2 RETURNING id", id, user_id
    )
    return deleted is not None


_AMBIENT = """id, user_id, captured_at, servers, services, pending_tasks, alerts, git_state,
              expires_at"""


async def insert_ambient(
    conn: asyncpg.Connection,
    *,
    id: str,
    user_id: str,
    captured_at: datetime,
    expires_at: datetime,
    fields: dict[str, Any],
) -> AmbientContextRow:
    """Store one ambient-context snapshot."""
    record = await conn.fetchrow(
        f"""INSERT INTO ambient_context (id, user_id, captured_at, servers, services,
                                         pending_tasks, alerts, git_state, expires_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {_AMBIENT}""",
        id,
        user_id,
        captured_at,
        fields.get("servers"),
        fields.get("services"),
        fields.get("pending_tasks"),
        fields.get("alerts"),
        fields.get("git_state"),
        expires_at,
    )
    assert record is not None
    return AmbientContextRow.model_validate(dict(record))


async def get_latest_ambient(
    conn: asyncpg.Connection, *, user_id: str, now: datetime
) -> AmbientContextRow | None:
    """The newest unexpired snapshot of ``user_id`` (context-tables spec, step 5), or None."""
    record = await conn.fetchrow(
        f"""SELECT {_AMBIENT} FROM ambient_context
            WHERE user_id = $1 AND expires_at > $2
            ORDER BY captured_at DESC, id DESC LIMIT 1""",
        user_id,
        now,
    )
    return AmbientContextRow.model_validate(dict(record)) if record else None
