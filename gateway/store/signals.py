"""Lookups for typing and presence across instances (nothing here is written)."""

from __future__ import annotations

import asyncpg


async def direct_conversation_with_peer(
    conn: asyncpg.Connection, *, user_id: str, peer_id: str
) -> str | None:
    """The oldest direct conversation in which the local user and the peer take part."""
    value = await conn.fetchval(
        """SELECT c.id FROM conversations c
           JOIN conversation_participants a ON a.conversation_id = c.id AND a.user_id = $1
           JOIN conversation_participants b ON b.conversation_id = c.id AND b.peer_id = $2
           WHERE c.type LIKE 'direct%' ORDER BY c.id LIMIT 1""",
        user_id,
        peer_id,
    )
    return str(value) if value is not None else None


async def users_sharing_direct_with_peer(conn: asyncpg.Connection, *, peer_id: str) -> list[str]:
    """Ids of the local users who share a direct conversation with the peer."""
    records = await conn.fetch(
        """SELECT DISTINCT a.user_id FROM conversation_participants b
           JOIN conversations c ON c.id = b.conversation_id AND c.type LIKE 'direct%'
           JOIN conversation_participants a ON a.conversation_id = b.conversation_id
           WHERE b.peer_id = $1 AND a.user_id IS NOT NULL""",
        peer_id,
    )
    return [r["user_id"] for r in records]


async def peers_sharing_direct_with_user(
    conn: asyncpg.Connection, *, user_id: str, limit: int
) -> list[asyncpg.Record]:
    """``did`` and ``endpoint`` of the peers (at most ``limit``) who share a direct
    conversation with the local user."""
    records: list[asyncpg.Record] = await conn.fetch(
        """SELECT DISTINCT pa.did, pa.endpoint FROM conversation_participants a
           JOIN conversations c ON c.id = a.conversation_id AND c.type LIKE 'direct%'
           JOIN conversation_participants b ON b.conversation_id = a.conversation_id
           JOIN peer_agents pa ON pa.id = b.peer_id
           WHERE a.user_id = $1 ORDER BY pa.did LIMIT $2""",
        user_id,
        limit,
    )
    return records


async def participates(conn: asyncpg.Connection, *, conversation_id: str, peer_id: str) -> bool:
    """True when the peer takes part in the conversation."""
    return bool(
        await conn.fetchval(
            """SELECT EXISTS (SELECT 1 FROM conversation_participants
                              WHERE conversation_id = $1 AND peer_id = $2)""",
            conversation_id,
            peer_id,
        )
    )
