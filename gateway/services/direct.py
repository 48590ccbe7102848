"""Direct conversations opened by inbound A2A traffic (a peer's, or an API-key client's)."""

from __future__ import annotations

import asyncpg

from gateway.ids import is_ulid
from gateway.services.tasks import Recipient
from gateway.store import conversations as conv_store
from gateway.store import groups as groups_store
from gateway.store.conversations import ParticipantRef


async def peer_conversation(
    conn: asyncpg.Connection, recipient: Recipient, peer_id: str, context_id: str | None = None
) -> str:
    """The conversation a peer's message goes into: the one its ``contextId`` names when that
    is a conversation of ours in which both the recipient and the peer take part (our answer
    to a message we sent; A2A §3.4 contexts), else the recipient's direct conversation with
    the peer (for a user, one they opened themselves as ``direct_user_user`` or
    ``direct_user_agent``), created on first contact.

    A ``contextId`` naming a group is not followed: a message that does not claim to belong
    to the group (:mod:`gateway.services.groups`) must not land in it, whatever context the
    peer reused."""
    owner_id, agent_id = recipient.user_id, recipient.agent_id
    if context_id and is_ulid(context_id):
        kind = await groups_store.get_conversation_kind(conn, conversation_id=context_id)
        if (
            kind is not None
            and kind[0] != "group"
            and await conv_store.both_take_part(
                conn,
                conversation_id=context_id,
                member=("own_agent", agent_id) if agent_id else ("user", owner_id),
                peer_id=peer_id,
            )
        ):
            return context_id
    type_ = "direct_agent_agent" if agent_id else "direct_user_user"
    await conv_store.lock_direct_pair(
        conn, conv_store.direct_pair_key(("user", owner_id), ("peer_agent", peer_id))
    )
    for candidate in (type_,) if agent_id else (type_, "direct_user_agent"):
        existing = await conv_store.find_direct_conversation(
            conn, type=candidate, user_id=owner_id, other=("peer_agent", peer_id)
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
    other: ParticipantRef = ("own_agent", recipient.agent_id)
    await conv_store.lock_direct_pair(conn, conv_store.direct_pair_key(("user", owner_id), other))
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
