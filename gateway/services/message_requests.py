"""Message requests: a stranger's first message is held apart until the user accepts it.

A direct conversation that someone else opened, from a sender who is not the user's contact
by the user's own doing (``peer_contacts.added_via`` other than ``inbound``: see
``store.message_requests.knows``), whom the user never wrote to there, and — for a local sender
— who shares no group with the user, becomes a **request** (``message_requests``, ``pending``)
at its first message, when the user's ``preferences.privacy.message_requests`` is on (the
default). While pending (or once declined) the conversation is left out of the user's list and
unread counts and its messages raise no ``message.created`` for the user; the request itself
raises one ``message_request.created`` event. Accepting moves it into the inbox and makes the
sender a contact (``added_via = 'message_request'``); declining keeps it apart.
"""

from __future__ import annotations

from typing import Any, Literal

import asyncpg

from gateway.clock import Clock
from gateway.db import Transaction, transaction
from gateway.errors import ConversationNotFoundError
from gateway.realtime.hub import EventHub
from gateway.store import conversations as conv_store
from gateway.store import message_requests as store
from models import ConversationRow

REQUEST_CREATED = "message_request.created"
REQUEST_DECIDED = "message_request.decided"


async def held_for(
    tx: Transaction,
    hub: EventHub,
    *,
    conversation_id: str,
    user_id: str,
    sender_did: str,
    local_sender: bool,
    message: dict[str, Any],
    default: bool = True,
    conversation: ConversationRow | None = None,
    known: tuple[store.MessageRequestRow | None, bool] | None = None,
) -> bool:
    """Whether this message to ``user_id`` is held as (part of) a request (module docstring);
    opens the request and appends its ``message_request.created`` event at the first one.
    ``default`` applies when the user never set ``privacy.message_requests``
    (``CONFER_MESSAGE_REQUESTS_DEFAULT``); ``conversation``, when the caller holds its row
    and knows ``user_id`` takes part in it, spares reading it again, as ``known`` (the
    user's request and preference, :func:`gateway.store.message_requests.of_participant`,
    read in ``tx``) spares reading those."""
    conn = tx.conn
    existing, wanted = known or await store.get_request_and_preference(
        conn, conversation_id=conversation_id, user_id=user_id, default=default
    )
    if existing is not None:
        return existing.state != "accepted"
    if conversation is None:
        conversation = await conv_store.get_conversation_for_user(
            conn, conversation_id=conversation_id, user_id=user_id
        )
    if not wanted or not await _is_stranger(conn, conversation, user_id, sender_did, local_sender):
        return False
    if await store.insert_request(
        conn, conversation_id=conversation_id, user_id=user_id, sender_did=sender_did
    ):
        data = {"conversation_id": conversation_id, "sender_did": sender_did, "message": message}
        await hub.append(tx, [user_id], REQUEST_CREATED, data, conversation_id=conversation_id)
    return True


async def _is_stranger(
    conn: asyncpg.Connection,
    conversation: ConversationRow | None,
    user_id: str,
    sender_did: str,
    local: bool,
) -> bool:
    """Whether ``sender_did`` is a stranger to ``user_id`` here (the user wants requests)."""
    if conversation is None or conversation.type == "group":
        return False
    # A peer's direct conversation is created by its local member (created_by must be a local
    # user), so only a local conversation's creator tells who started it; a remote one the
    # user started made the peer a contact (added_via 'conversation') and holds their message.
    if local and conversation.created_by == user_id:
        return False
    if await store.knows(conn, user_id=user_id, did=sender_did):
        return False
    if local and await store.shares_group(conn, user_id=user_id, other_did=sender_did):
        return False
    return not await store.has_written(conn, conversation_id=conversation.id, user_id=user_id)


async def list_pending(pool: asyncpg.Pool, *, user_id: str, limit: int) -> list[dict[str, Any]]:
    """The user's pending requests, newest first: conversation, sender and when."""
    async with pool.acquire() as conn:
        rows = await store.list_requests(conn, user_id=user_id, state="pending", limit=limit)
    return [
        {
            "conversation_id": r.conversation_id,
            "sender_did": r.sender_did,
            "state": r.state,
            "created_at": r.created_at,
        }
        for r in rows
    ]


async def decide(
    pool: asyncpg.Pool,
    hub: EventHub,
    clock: Clock,
    *,
    user_id: str,
    conversation_id: str,
    decision: Literal["accepted", "declined"],
    block: bool = False,
) -> store.MessageRequestRow:
    """Accept (the conversation joins the inbox, the sender becomes a contact) or decline the
    request — with ``block``, the sender is also marked blocked in the user's contacts, so
    the federation door refuses it; ``message_request.decided`` reaches the user's devices.
    Raises ConversationNotFoundError when the user has no request there."""
    async with transaction(pool) as tx:
        row = await store.decide(
            tx.conn,
            conversation_id=conversation_id,
            user_id=user_id,
            state=decision,
            now=clock.now(),
        )
        if row is None:
            raise ConversationNotFoundError("no message request in that conversation")
        if decision == "accepted":
            await store.mark_contact(tx.conn, user_id=user_id, did=row.sender_did)
        elif block:
            await store.block_sender(tx.conn, user_id=user_id, did=row.sender_did)
        data = {"conversation_id": conversation_id, "state": decision, "blocked": block}
        await hub.append(tx, [user_id], REQUEST_DECIDED, data, conversation_id=conversation_id)
    return row


async def held_conversations(conn: asyncpg.Connection, *, user_id: str) -> dict[str, str]:
    """``{conversation_id: "pending" | "declined"}`` of the user's held conversations."""
    return await store.held_conversations(conn, user_id=user_id)
