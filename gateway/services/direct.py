"""Direct conversations opened by inbound A2A traffic (a peer's, or an API-key client's)."""

from __future__ import annotations

import asyncpg

from gateway.services.tasks import Recipient
from gateway.store import conversations as conv_store


async def peer_conversation(conn: asyncpg.Connection, recipient: Recipient, peer_id: str) -> str:
    """The recipient's direct conversation with the peer (created on first contact)."""
    owner_id, agent_id = recipient.user_id, recipient.agent_id
    type_ = "direct_agent_agent" if agent_id else "direct_user_user"
    await conv_store.lock_direct_pair(conn, f"{type_}:{owner_id}:peer_agent:{peer_id}")
    existing = await conv_store.find_direct_conversation(
        conn, type=type_, user_id=owner_id, other=("peer_agent", peer_id)
    )
    if existing is not None:
        return existing.id
    conversation = await conv_store.insert_conversation(
        conn, type=type_, name=None, created_by=owner_id
    )
    if agent_id:
        await conv_store.insert_participant(
            conn, conversation_id=conversation.id, who=("own_agent", agent_id)
        )
        await conv_store.insert_participant(
            conn, conversation_id=conversation.id, who=("user", owner_id), role="observer"
        )
    else:
        await conv_store.insert_participant(
            conn, conversation_id=conversation.id, who=("user", owner_id), role="admin"
        )
    await conv_store.insert_participant(
        conn, conversation_id=conversation.id, who=("peer_agent", peer_id)
    )
    return conversation.id


async def api_conversation(conn: asyncpg.Connection, owner_id: str, recipient: Recipient) -> str:
    """The key owner's direct conversation with the agent (its owner observes)."""
    assert recipient.agent_id is not None
    other = ("own_agent", recipient.agent_id)
    await conv_store.lock_direct_pair(conn, f"direct_user_agent:{owner_id}:own_agent:{other[1]}")
    existing = await conv_store.find_direct_conversation(
        conn, type="direct_user_agent", user_id=owner_id, other=other
    )
    if existing is not None:
        return existing.id
    conversation = await conv_store.insert_conversation(
        conn, type="direct_user_agent", name=None, created_by=owner_id
    )
    await conv_store.insert_participant(
        conn, conversation_id=conversation.id, who=("user", owner_id), role="admin"
    )
    await conv_store.insert_participant(conn, conversation_id=conversation.id, who=other)
    if recipient.user_id != owner_id:
        await conv_store.insert_participant(
            conn, conversation_id=conversation.id, who=("user", recipient.user_id), role="observer"
        )
    return conversation.id
