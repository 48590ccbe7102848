"""Reads and writes for an agent's conversation context: history, summary, compaction."""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.store.messages import placed


async def get_own_agent_id(
    conn: asyncpg.Connection, *, conversation_id: str, user_id: str
) -> str | None:
    """The id of ``user_id``'s own agent taking part in the conversation, or None.

    The user must take part too; otherwise None (the conversation is not theirs to inspect).
    """
    value = await conn.fetchval(
        """SELECT a.id FROM conversation_participants p
           JOIN agents a ON a.id = p.agent_id AND a.user_id = $2
           WHERE p.conversation_id = $1 AND p.participant_type = 'own_agent'
             AND EXISTS (SELECT 1 FROM conversation_participants u
                         WHERE u.conversation_id = $1 AND u.user_id = $2)
           ORDER BY p.id LIMIT 1""",
        conversation_id,
        user_id,
    )
    return str(value) if value else None


async def list_history(conn: asyncpg.Connection, *, conversation_id: str) -> list[dict[str, Any]]:
    """Visible, non-compacted messages oldest first (context-tables spec, step 6; in a group
    replica, in the home's order), with sender names."""
    records = await conn.fetch(
        f"""SELECT m.id, m.sender_type, m.sender_id, m.content_type, m.content, m.created_at,
                  COALESCE(u.display_name, u.username, a.name, pa.name, m.sender_did) AS sender
           FROM messages m
           LEFT JOIN users u ON m.sender_type = 'user' AND u.id = m.sender_id
           LEFT JOIN agents a ON m.sender_type = 'own_agent' AND a.id = m.sender_id
           LEFT JOIN peer_agents pa ON m.sender_type = 'peer_agent' AND pa.id = m.sender_id
           WHERE m.conversation_id = $1 AND m.deleted_at IS NULL
             AND NOT EXISTS (SELECT 1 FROM message_compactions c WHERE c.message_id = m.id)
           ORDER BY {placed("m.id")}, m.id""",
        conversation_id,
    )
    return [dict(r) for r in records]


async def get_summary(conn: asyncpg.Connection, *, conversation_id: str) -> dict[str, Any] | None:
    """The conversation's summary row (context-tables spec, step 7), or None."""
    record = await conn.fetchrow(
        "SELECT * FROM conversation_summaries WHERE conversation_id = $1", conversation_id
    )
    return dict(record) if record else None


async def compact(
    conn: asyncpg.Connection,
    *,
    conversation_id: str,
    message_ids: list[str],
    summary: str,
    provider: str,
    model: str,
) -> None:
    """Store the new summary and mark ``message_ids`` compacted (they stay in ``messages``)."""
    await conn.execute(
        """INSERT INTO conversation_summaries
             (conversation_id, summary, compacted_through, provider, model, updated_at)
           VALUES ($1, $2, $3, $4, $5, NOW())
           ON CONFLICT (conversation_id) DO UPDATE
             SET summary = EXCLUDED.summary, compacted_through = EXCLUDED.compacted_through,
                 provider = EXCLUDED.provider, model = EXCLUDED.model, updated_at = NOW()""",
        conversation_id,
        summary,
        max(message_ids),
        provider,
        model,
    )
    await conn.executemany(
        """INSERT INTO message_compactions (message_id, conversation_id) VALUES ($1, $2)
           ON CONFLICT (message_id) DO NOTHING""",
        [(message_id, conversation_id) for message_id in message_ids],
    )


async def get_conversation_project(conn: asyncpg.Connection, *, conversation_id: str) -> str | None:
    """The project a conversation works on: the newest project named by a concept occurrence
    recorded from it, or else by a memory that originated in it; None when neither names one."""
    project: str | None = await conn.fetchval(
        """SELECT project FROM (
             SELECT project, seen_at AS at FROM concept_occurrences
             WHERE conversation_id = $1 AND project IS NOT NULL
             UNION ALL
             SELECT project_id, created_at FROM agent_memories
             WHERE origin_conversation_id = $1 AND project_id IS NOT NULL) named
           ORDER BY at DESC LIMIT 1""",
        conversation_id,
    )
    return project
