"""Message retention: how long a conversation keeps its messages, and the purge of those
past it.

The instance may set ``CONFER_MESSAGE_RETENTION_DAYS`` (unset: messages stay). A
conversation may set its own ``days`` (1..3650): a group's admins, either participant of a
direct conversation. The rule: a conversation may only shorten the instance's retention,
never lengthen it (a longer ``days`` is refused with 422 ``retention_too_long``); on an
instance without one it may choose any value. The worker applies the shorter of the two, so
an instance that later lowers its setting wins over older, longer choices.

A purged message goes the way a member's delete goes (:func:`messages.remove_message`): its
row becomes a tombstone with its content erased everywhere it is kept (versions, embeddings,
translations, the A2A task, outbox payloads), its attachments leave the storage once the batch
commits, and the local members' devices get the ``message.deleted`` tombstone. Nothing is sent
to peers: retention is this instance's policy over its own copies.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from gateway.db import transaction
from gateway.errors import NotConversationAdminError, RetentionTooLongError
from gateway.realtime.hub import EventHub
from gateway.services.messages import remove_message
from gateway.services.participants import require_membership
from gateway.storage import AttachmentStorage
from gateway.store import audit as audit_store
from gateway.store import message_retention as store
from models import User
from models.api import RetentionPublic, RetentionUpdate

RETENTION_SET = "conversation.retention_set"
RETENTION_PURGED = "retention.messages_purged"


def effective_days(days: int | None, instance_days: int | None) -> int | None:
    """The retention the worker applies: the shorter of both; None when neither is set."""
    chosen = [d for d in (days, instance_days) if d is not None]
    return min(chosen) if chosen else None


def _public(days: int | None, instance_days: int | None) -> RetentionPublic:
    return RetentionPublic(
        days=days, instance_days=instance_days, effective_days=effective_days(days, instance_days)
    )


async def get_retention(
    pool: asyncpg.Pool, user: User, conversation_id: str, instance_days: int | None
) -> RetentionPublic:
    """The conversation's retention for one of its participants (others: 404)."""
    async with pool.acquire() as conn:
        await require_membership(conn, conversation_id=conversation_id, user=user)
        days = await store.get_days(conn, conversation_id=conversation_id)
    return _public(days, instance_days)


async def set_retention(
    pool: asyncpg.Pool,
    user: User,
    conversation_id: str,
    data: RetentionUpdate,
    instance_days: int | None,
) -> RetentionPublic:
    """Set (or with ``days`` None, drop) the conversation's retention, audited.

    Raises ConversationNotFoundError (404) for non-participants, NotConversationAdminError
    (403) for a group member who is no admin, RetentionTooLongError (422) for ``days`` longer
    than ``instance_days``.
    """
    if data.days is not None and instance_days is not None and data.days > instance_days:
        raise RetentionTooLongError(
            f"this instance keeps messages {instance_days} days; a conversation may only"
            " choose a shorter retention"
        )
    async with transaction(pool) as tx:
        conversation, membership = await require_membership(
            tx.conn, conversation_id=conversation_id, user=user, lock=True
        )
        if conversation.type == "group" and membership.role != "admin":
            raise NotConversationAdminError("only admins of this group may set its retention")
        await store.set_days(
            tx.conn, conversation_id=conversation_id, days=data.days, user_id=user.id
        )
        await audit_store.insert_audit(
            tx.conn,
            action=RETENTION_SET,
            user_id=user.id,
            details={"conversation_id": conversation_id, "days": data.days},
        )
    return _public(data.days, instance_days)


async def purge_batch(
    pool: asyncpg.Pool,
    hub: EventHub,
    storage: AttachmentStorage,
    *,
    now: datetime,
    instance_days: int | None,
    limit: int,
) -> int:
    """Delete up to ``limit`` messages past their conversation's effective retention at
    ``now``, in one transaction with one audit row; returns how many went."""
    async with transaction(pool) as tx:
        expired = await store.lock_expired_messages(
            tx.conn, now=now, instance_days=instance_days, limit=limit
        )
        for message_id, conversation_id in expired:
            await remove_message(tx, hub, storage, conversation_id, message_id, federate=False)
        if expired:
            await audit_store.insert_audit(
                tx.conn,
                action=RETENTION_PURGED,
                details={
                    "count": len(expired),
                    "conversation_ids": sorted({c for _, c in expired}),
                },
            )
    return len(expired)
