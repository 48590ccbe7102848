"""``attachments`` rows (data model: attachments)."""

from __future__ import annotations

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
