"""``threads`` rows (data model: threads): archived long topics."""

from __future__ import annotations

import asyncpg

from gateway.ids import new_id
from models import ThreadRow


async def insert_thread(
    conn: asyncpg.Connection,
    *,
    conversation_id: str,
    root_message_id: str,
    title: str | None,
    summary: str | None,
    tags: list[str] | None,
) -> ThreadRow:
    """Archive the thread rooted at ``root_message_id``; ``participants_json`` is the list of
    sender DIDs in it (in order of first message)."""
    record = await conn.fetchrow(
        """INSERT INTO threads (id, conversation_id, root_message_id, title, summary, tags,
                                participants_json)
           VALUES ($1, $2, $3, $4, $5, $6, (
             SELECT COALESCE(jsonb_agg(did ORDER BY first_id), '[]'::jsonb) FROM (
               SELECT sender_did AS did, min(id) AS first_id FROM messages
               WHERE (id = $3 OR thread_root = $3) AND deleted_at IS NULL
                 AND sender_did IS NOT NULL
               GROUP BY sender_did) senders))
           RETURNING *""",
        new_id(),
        conversation_id,
        root_message_id,
        title,
        summary,
        tags,
    )
    assert record is not None
    return ThreadRow.model_validate(dict(record))


async def get_thread_by_root(conn: asyncpg.Connection, *, root_message_id: str) -> ThreadRow | None:
    """The archived thread rooted at a message, if any."""
    record = await conn.fetchrow(
        "SELECT * FROM threads WHERE root_message_id = $1", root_message_id
    )
    return ThreadRow.model_validate(dict(record)) if record else None


async def update_thread(
    conn: asyncpg.Connection,
    *,
    conversation_id: str,
    thread_id: str,
    title: str | None,
    summary: str | None,
    tags: list[str] | None,
    close: bool,
) -> ThreadRow | None:
    """Change title/summary/tags (None = unchanged) and optionally close; None if not found."""
    record = await conn.fetchrow(
        """UPDATE threads SET title = COALESCE($3, title), summary = COALESCE($4, summary),
             tags = COALESCE($5, tags),
             closed_at = CASE WHEN $6 THEN COALESCE(closed_at, NOW()) ELSE closed_at END
           WHERE id = $2 AND conversation_id = $1 RETURNING *""",
        conversation_id,
        thread_id,
        title,
        summary,
        tags,
        close,
    )
    return ThreadRow.model_validate(dict(record)) if record else None


async def list_threads(
    conn: asyncpg.Connection, *, conversation_id: str, open_only: bool, limit: int
) -> list[ThreadRow]:
    """The conversation's archived threads, newest first."""
    records = await conn.fetch(
        """SELECT * FROM threads WHERE conversation_id = $1 AND (NOT $2 OR closed_at IS NULL)
           ORDER BY id DESC LIMIT $3""",
        conversation_id,
        open_only,
        limit,
    )
    return [ThreadRow.model_validate(dict(r)) for r in records]
