"""``attachments`` rows (data model: attachments)."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg

from models import AttachmentRow


async def insert_attachment(
    conn: asyncpg.Connection,
    *,
    id: str,
    user_id: str,
    filename: str,
    content_type: str | None,
    size_bytes: int,
    storage_url: str,
    sha256: str,
) -> AttachmentRow:
    """Record an uploaded (not yet attached) file."""
    record = await conn.fetchrow(
        """INSERT INTO attachments
             (id, user_id, filename, content_type, size_bytes, storage_url, sha256)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *""",
        id,
        user_id,
        filename,
        content_type,
        size_bytes,
        storage_url,
        sha256,
    )
    assert record is not None
    return AttachmentRow.model_validate(dict(record))


async def attach_to_message(
    conn: asyncpg.Connection, *, attachment_id: str, user_id: str, message_id: str
) -> bool:
    """Link the user's unattached upload to a message; False when there is no such upload."""
    status: str = await conn.execute(
        """UPDATE attachments SET message_id = $3
           WHERE id = $1 AND user_id = $2 AND message_id IS NULL""",
        attachment_id,
        user_id,
        message_id,
    )
    return status == "UPDATE 1"


async def get_visible_attachment(
    conn: asyncpg.Connection, *, attachment_id: str, user_id: str
) -> AttachmentRow | None:
    """The attachment if ``user_id`` uploaded it and it is unattached, or takes part in the
    conversation of its (not deleted) message; None otherwise."""
    record = await conn.fetchrow(
        """SELECT a.* FROM attachments a
           LEFT JOIN messages m ON m.id = a.message_id
           WHERE a.id = $1 AND (
             (a.message_id IS NULL AND a.user_id = $2)
             OR (m.deleted_at IS NULL AND EXISTS (
                   SELECT 1 FROM conversation_participants p
                   WHERE p.conversation_id = m.conversation_id AND p.user_id = $2)))""",
        attachment_id,
        user_id,
    )
    return AttachmentRow.model_validate(dict(record)) if record else None


FETCH_CHANNEL = "confer_attachment_fetch"
"""``NOTIFY`` channel that wakes the attachment fetch worker."""


async def insert_received_attachment(
    conn: asyncpg.Connection,
    *,
    id: str,
    message_id: str,
    user_id: str,
    filename: str,
    content_type: str | None,
    size_bytes: int | None,
    sha256: str | None,
    source_url: str,
    origin_did: str,
) -> AttachmentRow:
    """Record a peer's file (bytes still on its instance, ``fetch_state = 'pending'``, due now)
    for the copy ``message_id`` owned by ``user_id``, and wake the fetch worker on commit."""
    record = await conn.fetchrow(
        """INSERT INTO attachments
             (id, message_id, user_id, filename, content_type, size_bytes, sha256,
              source_url, origin_did, fetch_state, fetch_next_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', NOW()) RETURNING *""",
        id,
        message_id,
        user_id,
        filename,
        content_type,
        size_bytes,
        sha256,
        source_url,
        origin_did,
    )
    assert record is not None
    await conn.execute("SELECT pg_notify($1, $2)", FETCH_CHANNEL, id)
    return AttachmentRow.model_validate(dict(record))


async def claim_due_fetches(
    conn: asyncpg.Connection, *, now: datetime, lease: timedelta, limit: int
) -> list[AttachmentRow]:
    """Pending fetches due at ``now``, each leased (``fetch_next_at`` moved ``lease`` on) so no
    other worker takes it meanwhile; rows of deleted messages are not claimed."""
    records = await conn.fetch(
        """UPDATE attachments SET fetch_next_at = $2::timestamptz + $3::interval
           WHERE id IN (
             SELECT a.id FROM attachments a JOIN messages m ON m.id = a.message_id
             WHERE a.fetch_state = 'pending' AND a.fetch_next_at <= $2
               AND m.deleted_at IS NULL
             ORDER BY a.fetch_next_at LIMIT $1
             FOR UPDATE OF a SKIP LOCKED)
           RETURNING *""",
        limit,
        now,
        lease,
    )
    return [AttachmentRow.model_validate(dict(r)) for r in records]


async def next_fetch_due_at(conn: asyncpg.Connection) -> datetime | None:
    """When the earliest pending fetch is due, or None."""
    due: datetime | None = await conn.fetchval(
        "SELECT MIN(fetch_next_at) FROM attachments WHERE fetch_state = 'pending'"
    )
    return due


async def complete_fetch(conn: asyncpg.Connection, *, id: str, storage_url: str) -> bool:
    """The bytes are stored: the row becomes ``fetched``. False when it is no longer pending
    or its message was deleted meanwhile (the caller then drops the stored bytes)."""
    status: str = await conn.execute(
        """UPDATE attachments a SET storage_url = $2, fetch_state = 'fetched',
             fetch_attempts = a.fetch_attempts + 1, fetch_next_at = NULL, fetch_error = NULL
           FROM messages m
           WHERE a.id = $1 AND m.id = a.message_id AND a.fetch_state = 'pending'
             AND m.deleted_at IS NULL""",
        id,
        storage_url,
    )
    return status == "UPDATE 1"


async def update_fetch_failure(
    conn: asyncpg.Connection, *, id: str, error: str, next_at: datetime | None
) -> None:
    """Record a failed attempt: retried at ``next_at``, or ``failed`` for good when None."""
    await conn.execute(
        """UPDATE attachments SET fetch_attempts = fetch_attempts + 1, fetch_error = $2,
             fetch_next_at = $3,
             fetch_state = CASE WHEN $3::timestamptz IS NULL THEN 'failed' ELSE 'pending' END
           WHERE id = $1 AND fetch_state = 'pending'""",
        id,
        error[:500],
        next_at,
    )


async def delete_message_attachments(conn: asyncpg.Connection, *, message_id: str) -> list[str]:
    """Delete the attachment rows of a message; returns the storage URLs of their bytes."""
    records = await conn.fetch(
        "DELETE FROM attachments WHERE message_id = $1 RETURNING storage_url", message_id
    )
    return [r["storage_url"] for r in records if r["storage_url"]]


async def get_attachment_for_instance(
    conn: asyncpg.Connection, *, attachment_id: str, instance_did: str
) -> AttachmentRow | None:
    """The stored attachment of a visible message whose conversation has a peer participant
    of the instance ``instance_did`` (its DID, or a DID under it); None otherwise."""
    record = await conn.fetchrow(
        """SELECT a.* FROM attachments a JOIN messages m ON m.id = a.message_id
           WHERE a.id = $1 AND a.storage_url IS NOT NULL AND m.deleted_at IS NULL
             AND EXISTS (
               SELECT 1 FROM conversation_participants p
               JOIN peer_agents pa ON pa.id = p.peer_id
               WHERE p.conversation_id = m.conversation_id
                 AND (pa.did = $2 OR starts_with(pa.did, $2 || ':')))""",
        attachment_id,
        instance_did,
    )
    return AttachmentRow.model_validate(dict(record)) if record else None


async def get_message_attachment(
    conn: asyncpg.Connection, *, message_id: str
) -> AttachmentRow | None:
    """The attachment linked to ``message_id`` (a ``file`` message has at most one), or None."""
    record = await conn.fetchrow(
        "SELECT * FROM attachments WHERE message_id = $1 ORDER BY created_at LIMIT 1", message_id
    )
    return AttachmentRow.model_validate(dict(record)) if record else None
