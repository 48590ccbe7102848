"""Attachments: streamed upload (size cap, SHA-256), linking to a ``file`` message, and
download for the uploader (until attached) or the participants of the message's conversation."""

from __future__ import annotations

import functools

import asyncpg

from gateway.db import Transaction
from gateway.errors import (
    AttachmentForbiddenError,
    AttachmentNotFoundError,
    AttachmentPendingError,
    AttachmentUnavailableError,
    ValidationFailedError,
)
from gateway.ids import new_id
from gateway.services.content import check_text
from gateway.storage import AttachmentStorage, ReadChunk
from gateway.store import attachments as attachments_store
from models import AttachmentRow, User


async def upload(
    pool: asyncpg.Pool,
    storage: AttachmentStorage,
    user: User,
    *,
    filename: str,
    content_type: str | None,
    read: ReadChunk,
    max_bytes: int,
) -> AttachmentRow:
    """Store an upload and record it. Raises PayloadTooLargeError (413) over ``max_bytes`` and
    ValidationFailedError (422) for an unusable file name or a content type longer than its
    column (128 characters; refused rather than cut, which would store another media type)."""
    name = filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
    if not name or len(name) > 255:
        raise ValidationFailedError("the file needs a name of 1 to 255 characters")
    check_text(name, "filename")
    media_type = content_type or "application/octet-stream"
    if len(media_type) > 128:
        raise ValidationFailedError("the file's content type is longer than 128 characters")
    check_text(media_type, "content_type")
    attachment_id = new_id()
    size, sha256, url = await storage.save(attachment_id, read, max_bytes=max_bytes)
    try:
        async with pool.acquire() as conn:
            return await attachments_store.insert_attachment(
                conn,
                id=attachment_id,
                user_id=user.id,
                filename=name,
                content_type=media_type,
                size_bytes=size,
                storage_url=url,
                sha256=sha256,
            )
    except BaseException:
        await storage.delete(url)
        raise


async def link_to_message(
    conn: asyncpg.Connection, *, attachment_id: str, user: User, message_id: str
) -> None:
    """Attach the caller's upload to their ``file`` message (inside its transaction)."""
    if not await attachments_store.attach_to_message(
        conn, attachment_id=attachment_id, user_id=user.id, message_id=message_id
    ):
        raise ValidationFailedError("attachment_id is not an unattached upload of yours")


async def get_for_download(pool: asyncpg.Pool, user: User, attachment_id: str) -> AttachmentRow:
    """The attachment if the caller may download it; AttachmentNotFoundError (404) otherwise."""
    async with pool.acquire() as conn:
        row = await attachments_store.get_visible_attachment(
            conn, attachment_id=attachment_id, user_id=user.id
        )
    if row is None:
        raise AttachmentNotFoundError(f"no attachment {attachment_id}")
    if row.fetch_state == "pending":
        raise AttachmentPendingError(f"{row.filename} is still being fetched from its sender")
    if row.storage_url is None:
        raise AttachmentUnavailableError(f"{row.filename}: {row.fetch_error or 'not fetched'}")
    return row


async def get_for_instance(
    pool: asyncpg.Pool, instance_did: str, attachment_id: str
) -> AttachmentRow:
    """The attachment an instance may fetch (a signed GET by ``instance_did``): one of a
    visible message in a conversation where that instance has a participant. Raises
    AttachmentForbiddenError (403) otherwise, whether or not the attachment exists."""
    async with pool.acquire() as conn:
        row = await attachments_store.get_attachment_for_instance(
            conn, attachment_id=attachment_id, instance_did=instance_did
        )
    if row is None:
        raise AttachmentForbiddenError(f"{instance_did} may not fetch attachment {attachment_id}")
    return row


async def discard_message_files(
    tx: Transaction, storage: AttachmentStorage, *, message_id: str
) -> None:
    """A message was deleted: its attachment rows go in ``tx``, their bytes once it commits."""
    urls = await attachments_store.delete_message_attachments(tx.conn, message_id=message_id)
    for url in urls:
        tx.call_after(functools.partial(storage.delete, url))
