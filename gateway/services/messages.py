"""Changing and reading messages: one by id, edit (versions, stale-write 409), soft delete
(tombstone everywhere), threads, and read receipts with exact unread counts.

A deleted message is gone from every read path: history, by id and thread queries skip it;
its content is erased from the row and its previous versions; the user-stream events that
carried it are rewritten into tombstones (so a replay never shows it); pending federation
deliveries of it are dropped. An edit locks the row and refuses a deleted message, so an
edit racing a delete can never revive it.
"""

from __future__ import annotations

import functools
from typing import Any

import asyncpg

from gateway.db import Transaction, transaction
from gateway.errors import (
    EditConflictError,
    MessageNotFoundError,
    NotMessageAuthorError,
    ValidationFailedError,
)
from gateway.realtime.hub import EventHub
from gateway.services import unread
from gateway.services.attachments import described, discard_message_files
from gateway.services.content import validate_message
from gateway.services.conversations import check_can_post, conversation_public
from gateway.services.deliveries import message_deliveries
from gateway.services.outbound import Change, Receipt, queue_for_peers
from gateway.services.participants import require_membership
from gateway.storage import AttachmentStorage
from gateway.store import attachments as attachments_store
from gateway.store import conversations as conv_store
from gateway.store import message_changes as change_store
from gateway.store import messages as messages_store
from models import Message, User
from models.api import (
    MembershipPublic,
    MessageCreate,
    MessageDetail,
    MessageListed,
    MessageUpdate,
    MessageVersionPublic,
    ReadCreate,
)
from models.base import wire_timestamp

MESSAGE_EDITED = "message.edited"
MESSAGE_DELETED = "message.deleted"
RECEIPT = "receipt"


async def _local_users(conn: asyncpg.Connection, conversation_id: str) -> list[str]:
    rows = await conv_store.list_participants(conn, conversation_id=conversation_id)
    return [r["user_id"] for r in rows if r["user_id"]]


async def get_message(
    pool: asyncpg.Pool, user: User, conversation_id: str, message_id: str
) -> MessageDetail:
    """A visible message with version, edit time, receipts, previous versions and its
    federation deliveries."""
    async with pool.acquire() as conn:
        await require_membership(conn, conversation_id=conversation_id, user=user)
        message = await messages_store.get_message(conn, id=message_id)
        details = await change_store.get_details(conn, message_id=message_id)
        if message is None or details is None or message.conversation_id != conversation_id:
            raise MessageNotFoundError(f"no message {message_id}")
        versions = await change_store.list_versions(conn, message_id=message_id)
        deliveries = await message_deliveries(conn, message_id)
    return MessageDetail(
        message=message,
        version=len(versions) + 1,
        edited_at=details["updated_at"] if versions else None,
        read_by=details["read_by_json"] or [],
        delivered_at=details["delivered_at"],
        previous_versions=[MessageVersionPublic(**dict(v)) for v in versions],
        deliveries=deliveries,
    )


async def _locked_own_message(
    conn: asyncpg.Connection, user: User, conversation_id: str, message_id: str
) -> asyncpg.Record:
    row = await change_store.lock_message(
        conn, conversation_id=conversation_id, message_id=message_id
    )
    if row is None or row["deleted_at"] is not None:
        raise MessageNotFoundError(f"no message {message_id}")
    if row["sender_id"] != user.id:
        raise NotMessageAuthorError("only the author may change this message")
    return row


async def edit_message(
    pool: asyncpg.Pool,
    hub: EventHub,
    user: User,
    conversation_id: str,
    message_id: str,
    data: MessageUpdate,
) -> MessageDetail:
    """Replace the content of the caller's message, keeping the previous version.

    Raises EditConflictError (409) when ``data.version`` is not the current version,
    MessageNotFoundError (404) for a deleted message, NotMessageAuthorError (403),
    ConversationArchivedError (409) and ValidationFailedError (422).
    """
    async with transaction(pool) as tx:
        conn = tx.conn
        conversation, _ = await require_membership(conn, conversation_id=conversation_id, user=user)
        await check_can_post(conn, conversation, user)
        row = await _locked_own_message(conn, user, conversation_id, message_id)
        current = await change_store.current_version(conn, message_id=message_id)
        if data.version != current:
            raise EditConflictError(f"the message is at version {current}", version=current)
        original = await messages_store.get_message(conn, id=message_id)
        assert original is not None
        _validate_edit(original, data)
        content_json = data.content_json
        if original.content_type == "file" and isinstance(content_json, dict):
            content_json = await _file_description(conn, message_id, content_json)
        await change_store.insert_version(
            conn,
            message_id=message_id,
            version=current,
            content=row["content"],
            content_json=row["content_json"],
            created_at=row["updated_at"],
        )
        message = await change_store.update_content(
            conn, message_id=message_id, content=data.content, content_json=content_json
        )
        users = await _local_users(conn, conversation_id)
        body = {**message.model_dump(mode="json"), "version": current + 1}
        await hub.append(tx, users, MESSAGE_EDITED, body)
        await queue_for_peers(conn, Change.edit(message, current + 1))
    return await get_message(pool, user, conversation_id, message_id)


async def _file_description(
    conn: asyncpg.Connection, message_id: str, content_json: dict[str, Any]
) -> dict[str, Any]:
    """An edited ``file`` message's ``content_json``: it keeps its attachment, and the file's
    name, type and size stay the stored attachment's. ValidationFailedError (422) when the
    edit names another attachment."""
    row = await attachments_store.get_message_attachment(conn, message_id=message_id)
    if row is None or content_json.get("attachment_id") != row.id:
        raise ValidationFailedError("a file message keeps its attachment_id")
    return described(content_json, row)


def _validate_edit(original: Message, data: MessageUpdate) -> None:
    if data.content is None and data.content_json is None:
        raise ValidationFailedError("send content and/or content_json")
    candidate = MessageCreate(
        content=data.content, content_type=original.content_type, content_json=data.content_json
    )
    # the stored citations, as stored: an edit changes the content only, so a citation stored
    # before its URL rules were tightened never refuses it
    validate_message(candidate.model_copy(update={"citations": original.citations}))


async def delete_message(
    pool: asyncpg.Pool,
    hub: EventHub,
    storage: AttachmentStorage,
    user: User,
    conversation_id: str,
    message_id: str,
) -> None:
    """Soft-delete the caller's message everywhere (its attached file leaves ``storage``, so
    peers can no longer fetch it) and emit a ``message.deleted`` tombstone."""
    async with transaction(pool) as tx:
        conn = tx.conn
        await require_membership(conn, conversation_id=conversation_id, user=user)
        await _locked_own_message(conn, user, conversation_id, message_id)
        await remove_message(tx, hub, storage, conversation_id, message_id, federate=True)


async def remove_message(
    tx: Transaction,
    hub: EventHub,
    storage: AttachmentStorage,
    conversation_id: str,
    message_id: str,
    *,
    federate: bool,
) -> None:
    """Soft-delete a message in ``tx`` (its file leaves ``storage``) with its tombstone for
    local members; with ``federate`` the delete is queued for the conversation's peers too
    (a moderator removing a peer's message removes our copy only)."""
    conn = tx.conn
    deleted_at = await change_store.soft_delete(conn, message_id=message_id)
    await discard_message_files(tx, storage, message_id=message_id)
    tombstone: dict[str, Any] = {
        "id": message_id,
        "conversation_id": conversation_id,
        "deleted_at": wire_timestamp(deleted_at),
    }
    users = await _local_users(conn, conversation_id)
    await change_store.scrub_events(
        conn, user_ids=users, message_id=message_id, tombstone=tombstone
    )
    await change_store.drop_pending_deliveries(conn, message_id=message_id)
    if federate:
        await queue_for_peers(conn, Change.delete(message_id, conversation_id))
    # cached unread counts go before the devices hear of the delete
    tx.call_after(functools.partial(unread.invalidate, hub.ephemeral, conversation_id))
    await hub.append(tx, users, MESSAGE_DELETED, tombstone)


async def list_thread(
    pool: asyncpg.Pool,
    user: User,
    conversation_id: str,
    message_id: str,
    *,
    after: str | None,
    limit: int,
) -> tuple[list[MessageListed], str | None]:
    """The thread ``message_id`` belongs to (root first, replies in order), paged forward."""
    async with pool.acquire() as conn:
        await require_membership(conn, conversation_id=conversation_id, user=user)
        anchor = await messages_store.get_message(conn, id=message_id)
        if anchor is None or anchor.conversation_id != conversation_id:
            raise MessageNotFoundError(f"no message {message_id}")
        items = await change_store.list_thread(
            conn,
            conversation_id=conversation_id,
            root_id=anchor.thread_root or anchor.id,
            after=after,
            limit=limit + 1,
        )
        next_after = items[limit - 1].id if len(items) > limit else None
        return await change_store.listed(conn, items[:limit]), next_after


async def mark_read(
    pool: asyncpg.Pool, hub: EventHub, user: User, conversation_id: str, data: ReadCreate
) -> MembershipPublic:
    """Everything up to ``data.message_id`` is read: the position only moves forward, the
    message's ``read_by_json`` gains the reader, members get a ``receipt`` event, and the
    peers whose messages the read reached get one (:mod:`gateway.services.federated_receipts`)."""
    async with transaction(pool) as tx:
        conn = tx.conn
        conversation, membership = await require_membership(
            conn, conversation_id=conversation_id, user=user
        )
        if not await messages_store.message_in_conversation(
            conn, message_id=data.message_id, conversation_id=conversation_id
        ):
            raise MessageNotFoundError(f"no message {data.message_id}")
        if await change_store.advance_read(
            conn, participant_id=membership.id, message_id=data.message_id
        ):
            read_at = await change_store.mark_read(
                conn, participant_id=membership.id, message_id=data.message_id, user_id=user.id
            )
            receipt = {
                "conversation_id": conversation_id,
                "user_id": user.id,
                "message_id": data.message_id,
                "last_read_at": wire_timestamp(read_at),
            }
            users = await _local_users(conn, conversation_id)
            await hub.append(tx, users, RECEIPT, receipt)
            # the peers whose messages this read reached hear of it (federated_receipts)
            await queue_for_peers(conn, Receipt(conversation_id, user.did, data.message_id))
        public = await conversation_public(conn, conversation, viewer=user)
    assert public.membership is not None
    return public.membership
