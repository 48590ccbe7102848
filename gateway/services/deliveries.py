"""Delivery status for the sender: where each message's federation deliveries stand.

Built from the outbox (``federation_outbox``): one entry per peer a message itself was sent
to (its edits and deletes are not listed). The delivery worker announces every recorded
attempt to the sender's devices as a ``message.delivery_updated`` event
(:func:`announce_delivery`), in the transaction that records it, so the event commits with
the state it reports. The sender is the posting user, or the owner of the posting agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg

from gateway.db import Transaction
from gateway.errors import MessageNotFoundError
from gateway.realtime.hub import EventHub
from gateway.services.participants import require_membership
from gateway.store import federation as federation_store
from gateway.store import messages as messages_store
from models import User
from models.federation_api import DeliveryList, DeliveryPublic, DeliveryState

DELIVERY_UPDATED = "message.delivery_updated"


def delivery_state(row: Mapping[str, Any]) -> DeliveryState:
    """``queued | retrying | delivered | failed`` of an outbox row."""
    if row["delivered_at"] is not None:
        return "delivered"
    if row["failed_at"] is not None:
        return "failed"
    return "retrying" if row["last_error"] is not None else "queued"


def delivery_public(row: Mapping[str, Any]) -> DeliveryPublic:
    """An outbox row (``store.federation.list_message_deliveries`` columns) for the API."""
    state = delivery_state(row)
    return DeliveryPublic(
        id=row["id"],
        message_id=row["message_id"],
        destination=row["destination"],
        peer_did=row["peer_did"],
        state=state,
        attempts=row["attempts"],
        next_attempt_at=row["next_attempt_at"] if state in ("queued", "retrying") else None,
        reason=row["last_error"] if state in ("retrying", "failed") else None,
        parked=bool(row["parked"]) and state in ("queued", "retrying"),
        delivered_at=row["delivered_at"],
        failed_at=row["failed_at"],
        created_at=row["created_at"],
    )


async def message_deliveries(conn: asyncpg.Connection, message_id: str) -> list[DeliveryPublic]:
    """The deliveries of ``message_id``, oldest first."""
    rows = await federation_store.list_message_deliveries(conn, message_id=message_id)
    return [delivery_public(r) for r in rows]


async def list_deliveries(
    pool: asyncpg.Pool, user: User, conversation_id: str, message_id: str
) -> DeliveryList:
    """The deliveries of a visible message of a conversation ``user`` takes part in.

    Raises ConversationNotFoundError / MessageNotFoundError (404).
    """
    async with pool.acquire() as conn:
        await require_membership(conn, conversation_id=conversation_id, user=user)
        message = await messages_store.get_message(conn, id=message_id)
        if message is None or message.conversation_id != conversation_id:
            raise MessageNotFoundError(f"no message {message_id}")
        return DeliveryList(items=await message_deliveries(conn, message_id))


async def announce_delivery(tx: Transaction, hub: EventHub, outbox_id: str) -> None:
    """Append ``message.delivery_updated`` (``{"message_id", "conversation_id",
    "delivery": DeliveryPublic}``) to the sender's stream in ``tx``; nothing for a change
    (edit, delete) or a message without a local sender."""
    await announce_deliveries(tx, hub, [outbox_id])


async def announce_deliveries(tx: Transaction, hub: EventHub, outbox_ids: list[str]) -> None:
    """:func:`announce_delivery` for each of ``outbox_ids``: one read for all of them, and
    one append per sender, each sender's events in the order of ``outbox_ids``."""
    rows = await federation_store.list_deliveries_for_sender(tx.conn, outbox_ids=outbox_ids)
    by_sender: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row["sender_user_id"] is None:
            continue
        by_sender.setdefault(row["sender_user_id"], []).append(
            {
                "message_id": row["message_id"],
                "conversation_id": row["conversation_id"],
                "delivery": delivery_public(row).model_dump(mode="json"),
            }
        )
    for user_id in sorted(by_sender):  # stream locks in user-id order, as hub.append takes them
        await hub.append_series(tx, user_id, DELIVERY_UPDATED, by_sender[user_id])
