"""Attachments: streamed upload (size cap, per-user quota and rate limit, SHA-256), linking to
a ``file`` message (whose ``filename``, ``mime_type`` and ``size_bytes`` are the stored
upload's), download for the uploader (until attached) or the participants of the message's
conversation, and the deletion of uploads never sent (the reaper, account deletion)."""

from __future__ import annotations

import contextlib
import functools
from datetime import datetime
from typing import Any

import asyncpg

from gateway.db import Transaction, transaction
from gateway.errors import (
    AttachmentForbiddenError,
    AttachmentNotFoundError,
    AttachmentPendingError,
    AttachmentQuotaExceededError,
    AttachmentUnavailableError,
    PayloadTooLargeError,
    StorageUnavailableError,
    ValidationFailedError,
)
from gateway.ids import new_id
from gateway.services.content import check_text
from gateway.services.ratelimits import UPLOAD_USER, RateLimiter
from gateway.storage import AttachmentStorage, ReadChunk
from gateway.store import attachments as attachments_store
from models import AttachmentRow, User


async def upload(
    pool: asyncpg.Pool,
    storage: AttachmentStorage,
    limiter: RateLimiter,
    user: User,
    *,
    filename: str,
    content_type: str | None,
    read: ReadChunk,
    max_bytes: int,
    quota_bytes: int,
) -> AttachmentRow:
    """Store an upload and record it.

    Raises RateLimitedError (429, ``Retry-After``) beyond ``CONFER_RATE_LIMIT_UPLOADS``,
    AttachmentQuotaExceededError (413 ``attachment_quota_exceeded``) when the user's stored
    uploads (:func:`gateway.store.attachments.stored_upload_bytes`) and this one would pass
    ``quota_bytes``, PayloadTooLargeError (413) over ``max_bytes``, StorageUnavailableError
    (503) when the storage fails, and ValidationFailedError (422) for an unusable file name or
    a content type longer than its column (128 characters; refused rather than cut, which
    would store another media type). Nothing is kept when it raises.
    """
    name = filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
    if not name or len(name) > 255:
        raise ValidationFailedError("the file needs a name of 1 to 255 characters")
    check_text(name, "filename")
    media_type = content_type or "application/octet-stream"
    if len(media_type) > 128:
        raise ValidationFailedError("the file's content type is longer than 128 characters")
    check_text(media_type, "content_type")
    await limiter.hit(UPLOAD_USER, user.id)
    async with pool.acquire() as conn:
        used = await attachments_store.stored_upload_bytes(conn, user_id=user.id)
    room = quota_bytes - used
    if room <= 0:
        raise _over_quota(used, quota_bytes)
    attachment_id = new_id()
    try:
        size, sha256, url = await storage.save(attachment_id, read, max_bytes=min(max_bytes, room))
    except PayloadTooLargeError:
        if room < max_bytes:  # it was the quota's room that ran out, not the per-file cap
            raise _over_quota(used, quota_bytes) from None
        raise
    try:
        async with transaction(pool) as tx:
            # Checked again under the user's lock: uploads running side by side each saw the
            # room before the others were recorded.
            await attachments_store.lock_uploads(tx.conn, user_id=user.id)
            used = await attachments_store.stored_upload_bytes(tx.conn, user_id=user.id)
            if used + size > quota_bytes:
                raise _over_quota(used, quota_bytes)
            return await attachments_store.insert_attachment(
                tx.conn,
                id=attachment_id,
                user_id=user.id,
                filename=name,
                content_type=media_type,
                size_bytes=size,
                storage_url=url,
                sha256=sha256,
            )
    except BaseException:
        with contextlib.suppress(StorageUnavailableError):  # the first error is the answer
            await storage.delete(url)
        raise


def _over_quota(used: int, quota_bytes: int) -> AttachmentQuotaExceededError:
    return AttachmentQuotaExceededError(
        f"your uploads take {used} of your {quota_bytes} bytes; this file does not fit"
        " (delete messages with files, or wait for unsent uploads to expire)",
        used_bytes=used,
        quota_bytes=quota_bytes,
    )


async def take_upload(
    conn: asyncpg.Connection, *, user: User, content_json: dict[str, Any]
) -> dict[str, Any]:
    """The ``content_json`` of a ``file`` message, its ``filename``, ``mime_type`` and
    ``size_bytes`` replaced by those of the stored upload it names (what the server measured
    and recorded at the upload, not what the client claims); the upload's row stays locked
    until the transaction ends (:func:`gateway.store.attachments.lock_unattached_upload`).

    Raises ValidationFailedError (422) when ``attachment_id`` is not an unattached upload of
    the caller's.
    """
    row = await attachments_store.lock_unattached_upload(
        conn, attachment_id=str(content_json["attachment_id"]), user_id=user.id
    )
    if row is None:
        raise ValidationFailedError("attachment_id is not an unattached upload of yours")
    return described(content_json, row)


def described(content_json: dict[str, Any], row: AttachmentRow) -> dict[str, Any]:
    """``content_json`` with the file's description taken from its attachment ``row``."""
    return {
        **content_json,
        "attachment_id": row.id,
        "filename": row.filename,
        "mime_type": row.content_type,
        "size_bytes": row.size_bytes,
    }


async def delete_unsent(
    pool: asyncpg.Pool,
    storage: AttachmentStorage,
    *,
    before: datetime | None = None,
    user_id: str | None = None,
    limit: int | None = None,
) -> int:
    """Delete (up to ``limit``) uploads never attached to a message (created before ``before``,
    of ``user_id``, when given): rows and stored bytes; returns how many rows went.

    One statement takes the rows (an upload a post holds is skipped:
    :func:`gateway.store.attachments.delete_unsent`); their bytes are removed before it
    commits, so a failing store (StorageUnavailableError, 503) rolls the rows back and they
    are tried again, never left as rows without bytes or bytes without rows. A commit that
    fails after the bytes went leaves rows whose download is 409 ``attachment_unavailable``
    until the next pass takes them.
    """
    async with transaction(pool) as tx:
        urls = await attachments_store.delete_unsent(
            tx.conn, before=before, user_id=user_id, limit=limit
        )
        for url in urls:
            await storage.delete(url)
    return len(urls)


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
