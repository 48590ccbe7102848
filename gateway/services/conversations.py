"""Conversations and messages: create, post (store + fan-out + outbox), list.

Posting is the hot path: one transaction stores the message and queues one outbox row per
remote participant; after commit the event is pushed to every local member's devices.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import asyncpg

from did.web import split_did_url
from gateway.errors import ConversationNotFoundError, RecipientNotFoundError, ValidationFailedError
from gateway.ids import new_id
from gateway.realtime.hub import EventHub
from gateway.services.identity import Identity
from gateway.services.peers import PeerDirectory
from gateway.store import conversations as conv_store
from gateway.store import federation as federation_store
from gateway.store import messages as messages_store
from gateway.store import peers as peers_store
from gateway.store import users as users_store
from gateway.store.conversations import ParticipantRef
from models import ConversationRow, Message, User
from models.api import ConversationCreate, ConversationPublic, MessageCreate, ParticipantPublic

MESSAGE_CREATED = "message.created"


async def _local_participant(
    conn: asyncpg.Connection, identity: Identity, did: str
) -> ParticipantRef:
    subject = identity.local_subject(did)
    if subject is not None:
        kind, name = subject
        if kind == "users":
            user = await users_store.get_user_by_username(conn, username=name)
            if user is not None:
                return ("user", user.id)
        else:
            agent = await users_store.get_agent(conn, id=name)
            if agent is not None:
                return ("own_agent", agent.id)
    raise RecipientNotFoundError(f"{did} is not a user or agent of this instance")


async def conversation_public(
    conn: asyncpg.Connection, conversation: ConversationRow
) -> ConversationPublic:
    """The conversation with its participants' DIDs and names."""
    rows = await conv_store.list_participants(conn, conversation_id=conversation.id)
    return ConversationPublic(
        **conversation.model_dump(include={"id", "type", "name", "created_by"}),
        created_at=conversation.created_at,
        updated_at=conversation.updated_at,
        participants=[
            ParticipantPublic(
                participant_type=r["participant_type"], did=r["did"], name=r["name"], role=r["role"]
            )
            for r in rows
        ],
    )


async def create_direct_conversation(
    pool: asyncpg.Pool,
    identity: Identity,
    peers: PeerDirectory,
    user: User,
    data: ConversationCreate,
) -> tuple[ConversationPublic, bool]:
    """Find or create the direct conversation between ``user`` and one DID.

    Returns ``(conversation, created)``. A remote DID is resolved (and cached) first; a local
    one must name an existing user or agent. Concurrent creates of the same pair serialise on
    an advisory lock, so they yield one conversation.
    """
    split_did_url(data.participant_did)  # refuse DID URLs with fragments early
    if data.participant_did == user.did:
        raise ValidationFailedError("a direct conversation needs another participant")
    other: ParticipantRef
    if identity.local_subject(data.participant_did) is None:
        peer = await peers.resolve(data.participant_did)
        other = ("peer_agent", peer.id)
    else:
        async with pool.acquire() as conn:
            other = await _local_participant(conn, identity, data.participant_did)
    async with pool.acquire() as conn, conn.transaction():
        await conv_store.lock_direct_pair(conn, f"{data.type}:{user.id}:{other[0]}:{other[1]}")
        existing = await conv_store.find_direct_conversation(
            conn, type=data.type, user_id=user.id, other=other
        )
        if existing is not None:
            return await conversation_public(conn, existing), False
        conversation = await conv_store.insert_conversation(
            conn, type=data.type, name=data.name, created_by=user.id
        )
        await conv_store.insert_participant(
            conn, conversation_id=conversation.id, who=("user", user.id), role="admin"
        )
        await conv_store.insert_participant(conn, conversation_id=conversation.id, who=other)
        if other[0] == "peer_agent":
            await peers_store.upsert_contact(
                conn, user_id=user.id, peer_id=other[1], alias=None, added_via="conversation"
            )
        return await conversation_public(conn, conversation), True


async def get_conversation(
    pool: asyncpg.Pool, user: User, conversation_id: str
) -> ConversationPublic:
    """A conversation the user takes part in. Raises ConversationNotFoundError otherwise."""
    async with pool.acquire() as conn:
        conversation = await conv_store.get_conversation_for_user(
            conn, conversation_id=conversation_id, user_id=user.id
        )
        if conversation is None:
            raise ConversationNotFoundError(f"no conversation {conversation_id}")
        return await conversation_public(conn, conversation)


async def list_conversations(
    pool: asyncpg.Pool, user: User, limit: int
) -> list[ConversationPublic]:
    """The user's conversations, most recently active first."""
    async with pool.acquire() as conn:
        rows = await conv_store.list_conversations_for_user(conn, user_id=user.id, limit=limit)
        return [await conversation_public(conn, row) for row in rows]


def send_message_params(
    message: Message, *, sender_name: str | None, recipient_did: str
) -> dict[str, Any]:
    """A2A 1.0 ``SendMessageRequest`` params carrying ``message`` (A2A spec §4.5, §9)."""
    confer: dict[str, Any] = {
        "sender": message.sender_did,
        "recipient": recipient_did,
        "createdAt": message.created_at.isoformat(),
    }
    if sender_name:
        confer["senderName"] = sender_name
    if message.in_reply_to:
        confer["inReplyTo"] = message.in_reply_to
    return {
        "message": {
            "messageId": message.id,
            "contextId": message.conversation_id,
            "role": "ROLE_USER",
            "parts": [{"text": message.content or ""}],
            "metadata": {"confer": confer},
        },
        "configuration": {"returnImmediately": True},
    }


async def post_message(
    pool: asyncpg.Pool,
    hub: EventHub,
    user: User,
    conversation_id: str,
    data: MessageCreate,
) -> Message:
    """Store a message from ``user``, queue it for remote participants, push it to devices.

    Raises ConversationNotFoundError when the user is not a participant and
    ValidationFailedError when ``in_reply_to`` is not a message of this conversation.
    """
    async with pool.acquire() as conn, conn.transaction():
        conversation = await conv_store.get_conversation_for_user(
            conn, conversation_id=conversation_id, user_id=user.id
        )
        if conversation is None:
            raise ConversationNotFoundError(f"no conversation {conversation_id}")
        if data.in_reply_to and not await messages_store.message_in_conversation(
            conn, message_id=data.in_reply_to, conversation_id=conversation_id
        ):
            raise ValidationFailedError("in_reply_to is not a message of this conversation")
        message = await messages_store.insert_message(
            conn,
            id=new_id(),
            conversation_id=conversation_id,
            sender_type="user",
            sender_id=user.id,
            sender_did=user.did,
            content=data.content,
            in_reply_to=data.in_reply_to,
            via=data.via,
        )
        await conv_store.touch_conversation(conn, conversation_id=conversation_id)
        participants = await conv_store.list_participants(conn, conversation_id=conversation_id)
        for p in participants:
            if p["participant_type"] != "peer_agent":
                continue
            await federation_store.insert_outbox(
                conn,
                destination=_destination(p["endpoint"]),
                endpoint=p["endpoint"],
                sender_did=user.did,
                peer_id=p["peer_id"],
                message_id=message.id,
                payload=send_message_params(
                    message, sender_name=user.display_name or user.username, recipient_did=p["did"]
                ),
            )
        local_users = [p["user_id"] for p in participants if p["user_id"]]
        outgoing = await hub.append(
            conn, local_users, MESSAGE_CREATED, message.model_dump(mode="json")
        )
    await hub.send(outgoing)
    return message


def _destination(endpoint: str) -> str:
    return urlsplit(endpoint).netloc.lower()


async def list_messages(
    pool: asyncpg.Pool, user: User, conversation_id: str, *, before: str | None, limit: int
) -> tuple[list[Message], str | None]:
    """A page of messages newest first, and the cursor for the next page (None at the end)."""
    async with pool.acquire() as conn:
        conversation = await conv_store.get_conversation_for_user(
            conn, conversation_id=conversation_id, user_id=user.id
        )
        if conversation is None:
            raise ConversationNotFoundError(f"no conversation {conversation_id}")
        items = await messages_store.list_messages(
            conn, conversation_id=conversation_id, before=before, limit=limit + 1
        )
    next_before = items[limit - 1].id if len(items) > limit else None
    return items[:limit], next_before
