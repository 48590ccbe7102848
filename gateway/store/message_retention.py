"""Message retention: a conversation's chosen ``days`` (table ``conversation_retention``) and
the batch of messages past their conversation's effective retention."""

from __future__ import annotations

from datetime import datetime

import asyncpg


async def get_days(conn: asyncpg.Connection, *, conversation_id: str) -> int | None:
    """The conversation's own retention in days; None when it follows the instance's."""
    days = await conn.fetchval(
        "SELECT days FROM conversation_retention WHERE conversation_id = $1", conversation_id
    )
    return None if days is None else int(days)


async def set_days(
    conn: asyncpg.Connection, *, conversation_id: str, days: int | None, user_id: str
) -> None:
    """Set the conversation's retention to ``days`` (1..3650), or drop it (None: the
    instance's applies)."""
    if days is None:
        await conn.execute(
            "DELETE FROM conversation_retention WHERE conversation_id = $1", conversation_id
        )
        return
    await conn.execute(
        """INSERT INTO conversation_retention (conversation_id, days, set_by)
           VALUES ($1, $2, $3)
           ON CONFLICT (conversation_id)
           DO UPDATE SET days = EXCLUDED.days, set_by = EXCLUDED.set_by, updated_at = NOW()""",
        conversation_id,
        days,
        user_id,
    )


async def lock_expired_messages(
    conn: asyncpg.Connection, *, now: datetime, instance_days: int | None, limit: int
) -> list[tuple[str, str]]:
    """Lock up to ``limit`` visible messages, oldest first, created more than their
    conversation's effective retention before ``now``; returns ``(message_id,
    conversation_id)`` pairs. The effective retention is the shorter of the conversation's
    ``days`` and ``instance_days`` (either may be absent; both absent: the message stays).
    Rows locked by an edit or delete under way are skipped (the next batch meets them)."""
    # Without an instance retention only conversations with a row can expire anything: start
    # from those (idx_messages_conversation_created) rather than from every message.
    join = "LEFT JOIN" if instance_days is not None else "JOIN"
    records = await conn.fetch(
        f"""SELECT m.id, m.conversation_id FROM messages m
            {join} conversation_retention r ON r.conversation_id = m.conversation_id
            WHERE m.deleted_at IS NULL
              AND m.created_at < $1::timestamptz - make_interval(days => LEAST(r.days, $2::int))
            ORDER BY m.created_at, m.id
            LIMIT $3 FOR UPDATE OF m SKIP LOCKED""",
        now,
        instance_days,
        limit,
    )
    return [(r["id"], r["conversation_id"]) for r in records]
