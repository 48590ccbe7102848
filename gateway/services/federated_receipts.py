"""Read receipts across instances: a remote member's read reaches the sender's devices.

Outbound (in the read's transaction, :func:`gateway.services.outbound.queue_for_peers` with a
:class:`~gateway.services.outbound.Receipt`): for each peer whose messages the read reached,
one outbox row — an A2A ``SendMessage`` with a fresh ``messageId``, signed as the reader, and
``metadata.confer.read = {"messageId": <the peer's id of its latest message read>}``. The
durable outbox keeps order per destination and conversation, so a receipt never overtakes the
message it names.

Inbound (:func:`apply_receipt`): the named message must be ours, sent by the addressed local
user or agent, visible, in a conversation where the signing peer takes part; then the peer's
read position moves forward (never back), the message's ``read_by`` gains the peer (by its
``peer_agents`` id, like a local reader's user id) and every local member's devices get the
same ``receipt`` event a local read sends, with the reader's ``did`` added. Applying is
idempotent: a receipt at or behind the peer's position changes nothing.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from a2a.confer import ConferMetadata
from a2a.protocol import InvalidParamsError, SendMessageParams, agent_text_message
from gateway.db import transaction
from gateway.ids import is_ulid, new_id
from gateway.realtime.hub import EventHub
from gateway.services.callers import A2ACaller
from gateway.services.tasks import Recipient
from gateway.store import audit as audit_store
from gateway.store import conversations as conv_store
from gateway.store import message_changes as change_store
from gateway.store import messages as messages_store
from models import PeerAgentRow

RECEIPT = "receipt"


async def apply_receipt(
    caller: A2ACaller,
    recipient: Recipient,
    params: SendMessageParams,
    *,
    pool: asyncpg.Pool,
    hub: EventHub,
) -> dict[str, Any]:
    """Apply a peer's read receipt (module docstring); returns the ``SendMessage`` result
    (``{"message": …}`` with ``data.applied``).

    One unit of work: the read position, ``read_by``, the ``receipt`` events (``hub``) and the
    audit row commit together. Raises InvalidParamsError (-32602) for a malformed
    ``confer.read`` and for API-key callers (receipts travel between instances only).
    """
    confer = ConferMetadata.of(params.message.metadata)
    if "read" in confer.malformed or confer.read is None:
        raise InvalidParamsError("Invalid params: message.metadata.confer.read")
    if caller.peer is None:
        raise InvalidParamsError("Invalid params: read receipts travel between instances")
    named = confer.read.messageId
    applied = False
    async with transaction(pool) as tx:
        conn = tx.conn
        receipt = await _advance(conn, caller, recipient, named)
        if receipt is not None:
            rows = await conv_store.list_participants(
                conn, conversation_id=receipt["conversation_id"]
            )
            users = [r["user_id"] for r in rows if r["user_id"]]
            await hub.append(tx, users, RECEIPT, receipt)
            applied = True
        await audit_store.insert_audit(
            conn,
            action="federation.inbound",
            user_id=recipient.user_id,
            details={
                "method": "SendMessage/read",
                "caller": caller.ref,
                "message_id": named[:64],
                "applied": applied,
            },
        )
    reply = agent_text_message(
        "Receipt applied." if applied else "Nothing to change.",
        message_id=new_id(),
        context_id=params.message.contextId or new_id(),
        task_id=new_id(),
        data={"applied": applied, "messageId": named},
    )
    return {"message": reply}


async def _advance(
    conn: asyncpg.Connection, caller: A2ACaller, recipient: Recipient, message_id: str
) -> dict[str, Any] | None:
    """Move the peer's read position to ``message_id``; the receipt event's body, or None when
    the message is not one the peer may acknowledge or the position was already there."""
    assert caller.peer is not None
    peer = caller.peer.peer
    message = await messages_store.get_message(conn, id=message_id) if is_ulid(message_id) else None
    if message is None or message.sender_did != recipient.did:  # visible messages only
        return None
    return await advance_peer_read(
        conn, peer=peer, conversation_id=message.conversation_id, message_id=message.id
    )


async def advance_peer_read(
    conn: asyncpg.Connection, *, peer: PeerAgentRow, conversation_id: str, message_id: str
) -> dict[str, Any] | None:
    """Move the read position of ``peer`` (a participant of ``conversation_id``) forward to
    our message ``message_id`` and add it to the message's ``read_by``; returns the
    ``receipt`` event's body, or None when the peer takes no part there or already read that
    far (never moves back)."""
    membership = await conv_store.find_participant(
        conn, conversation_id=conversation_id, who=("peer_agent", peer.id)
    )
    if membership is None:
        return None
    if not await change_store.advance_read(
        conn, participant_id=membership.id, message_id=message_id
    ):
        return None
    read_at = await change_store.mark_read(
        conn, participant_id=membership.id, message_id=message_id, user_id=peer.id
    )
    return {
        "conversation_id": conversation_id,
        "user_id": peer.id,
        "did": peer.did,
        "message_id": message_id,
        "last_read_at": read_at.isoformat(),
    }
