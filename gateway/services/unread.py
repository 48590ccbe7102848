"""Unread counters cached in the ephemeral store (Redis), PostgreSQL staying the truth.

The count itself is always computed by PostgreSQL (:func:`gateway.store.messages.count_unread`);
with ``CONFER_REDIS_URL`` set it is cached under a key that names the exact state it was
computed from, so a cached value can never be served for another state:

``unread:{user_id}:{conversation_id}:{generation}:{updated_at}:{last_read_at}``

- ``updated_at`` of the conversation moves (strictly) with every new message
  (``touch_conversation``);
- ``last_read_at`` of the membership moves (strictly) with every read;
- ``generation`` (``unread:gen:{conversation_id}``, ``INCR``) moves after every delete commits.

Key parts are read before the count is computed, so a value is never older than its key.
Entries expire after :data:`TTL` seconds; a lost Redis only costs the PostgreSQL query.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.realtime.ephemeral import EphemeralStore
from gateway.store import messages as messages_store
from models import ConversationRow, ParticipantRow

TTL = 24 * 3600.0


def cache_of(state: Any) -> EphemeralStore | None:
    """The shared store to cache counts in: the hub's when Redis is configured, else None
    (an in-process cache would miss other processes' deletes)."""
    return state.hub.ephemeral if state.settings.redis_url else None


def _generation_key(conversation_id: str) -> str:
    return f"unread:gen:{conversation_id}"


async def unread_count(
    conn: asyncpg.Connection,
    cache: EphemeralStore | None,
    *,
    conversation: ConversationRow,
    membership: ParticipantRow,
    user_id: str,
) -> int:
    """Visible messages from others after the member's read position (cached when possible)."""
    key = None
    if cache is not None:
        generation = await cache.get_counter(_generation_key(conversation.id)) or 0
        read = membership.last_read_at.isoformat() if membership.last_read_at else "-"
        stamp = conversation.updated_at.isoformat()
        key = f"unread:{user_id}:{conversation.id}:{generation}:{stamp}:{read}"
        cached = await cache.get_counter(key)
        if cached is not None:
            return cached
    count = await messages_store.count_unread(
        conn, conversation_id=conversation.id, participant_id=membership.id, user_id=user_id
    )
    if cache is not None and key is not None:
        await cache.set_counter(key, count, TTL)
    return count


async def invalidate(cache: EphemeralStore, conversation_id: str) -> None:
    """After a delete (or a group home's placement of a post) committed: every cached count
    of the conversation is stale."""
    await cache.incr(_generation_key(conversation_id))
