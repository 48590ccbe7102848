"""``attachments`` rows (data model: attachments) and the fetches of peers' files
(``attachment_fetches``, migration 0016).

A peer's file has its ``attachments`` row from the start, with an empty ``storage_url``
(:data:`NOT_STORED`; the spec's column is NOT NULL) until its bytes are here; rows are read
with ``storage_url`` None then, and with the fetch's ``state`` and ``error`` where it matters.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg

from models import AttachmentRow

NOT_STORED = ""
"""``storage_url`` of a peer's file whose bytes are not here (yet)."""

_WITH_FETCH = """a.*, f.source_url, f.origin_did, f.state AS fetch_state,
    COALESCE(f.attempts, 0) AS fetch_attempts, f.next_at AS fetch_next_at,
    f.error AS fetch_error"""


def _row(record: asyncpg.Record) -> AttachmentRow:
    values = dict(record)
    if values["storage_url"] == NOT_STORED:
        values["storage_url"] = None
    return AttachmentRow.model_validate(values)


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
    return _row(record)


async def lock_uploads(conn: asyncpg.Connection, *, user_id: str) -> None:
    """Serialise the uploads of ``user_id`` until the transaction ends (an advisory lock), so
    two concurrent uploads cannot both fit the quota that only one of them fits."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 7341))", f"uploads:{user_id}"
    )


async def stored_upload_bytes(conn: asyncpg.Connection, *, user_id: str) -> int:
    """Bytes of the files ``user_id`` uploaded that are stored here, sent or not. Files peers
    sent them (rows with an ``attachment_fetches`` row) are not theirs to count."""
    used: int = await conn.fetchval(
        """SELECT COALESCE(SUM(a.size_bytes), 0)::bigint FROM attachments a
           WHERE a.user_id = $1 AND a.storage_url <> $2
             AND NOT EXISTS (SELECT 1 FROM attachment_fetches f WHERE f.attachment_id = a.id)""",
        user_id,
        NOT_STORED,
    )
    return used


async def lock_unattached_upload(
    conn: asyncpg.Connection, *, attachment_id: str, user_id: str
) -> AttachmentRow | None:
    """The user's upload not yet attached to a message, locked (``FOR UPDATE``) until the
    transaction ends so that neither the reaper nor an account deletion removes it while a
    message takes it; None when there is no such upload."""
    record = await conn.fetchrow(
        """SELECT * FROM attachments WHERE id = $1 AND user_id = $2 AND message_id IS NULL
           FOR UPDATE""",
        attachment_id,
        user_id,
    )
    return _row(record) if record else None


async def delete_unsent(
    conn: asyncpg.Connection,
    *,
    before: datetime | None,
    user_id: str | None,
    limit: int | None,
) -> list[str]:
    """Delete up to ``limit`` uploads not attached to any message — created before
    ``before`` (when given) and of ``user_id`` (when given); every such upload when ``limit``
    is None — in one statement; returns their storage URLs.

    Rows are locked ``FOR UPDATE SKIP LOCKED``: an upload a post is attaching right now (its
    row locked by :func:`lock_unattached_upload` or :func:`attach_to_message`) is skipped, and
    a row attached and committed meanwhile is re-checked under the lock (READ COMMITTED
    re-evaluates ``message_id IS NULL`` on the newest version) and kept.
    """
    records = await conn.fetch(
        """DELETE FROM attachments WHERE id IN (
             SELECT id FROM attachments
             WHERE message_id IS NULL
               AND ($1::timestamptz IS NULL OR created_at < $1)
               AND ($2::text IS NULL OR user_id = $2)
             ORDER BY created_at LIMIT $3
             FOR UPDATE SKIP LOCKED)
           AND message_id IS NULL
           RETURNING storage_url""",
        before,
        user_id,
        limit,
    )
    return [r["storage_url"] for r in records if r["storage_url"] != NOT_STORED]


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
        f"""SELECT {_WITH_FETCH} FROM attachments a
           LEFT JOIN attachment_fetches f ON f.attachment_id = a.id
           LEFT JOIN messages m ON m.id = a.message_id
           WHERE a.id = $1 AND (
             (a.message_id IS NULL AND a.user_id = $2)
             OR (m.deleted_at IS NULL AND EXISTS (
                   SELECT 1 FROM conversation_participants p
                   WHERE p.conversation_id = m.conversation_id AND p.user_id = $2)))""",
        attachment_id,
        user_id,
    )
    return _row(record) if record else None


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
) -> None:
    """Record a peer's file (bytes still on its instance; its fetch ``pending``, due now) for
    the copy ``message_id`` owned by ``user_id``, and wake the fetch worker on commit."""
    await conn.execute(
        """INSERT INTO attachments
             (id, message_id, user_id, filename, content_type, size_bytes, sha256, storage_url)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)""",
        id,
        message_id,
        user_id,
        filename,
        content_type,
        size_bytes,
        sha256,
        NOT_STORED,
    )
    await conn.execute(
        """INSERT INTO attachment_fetches (attachment_id, source_url, origin_did, next_at)
           VALUES ($1, $2, $3, NOW())""",
        id,
        source_url,
        origin_did,
    )
    await conn.execute("SELECT pg_notify($1, $2)", FETCH_CHANNEL, id)


async def claim_due_fetches(
    conn: asyncpg.Connection, *, now: datetime, lease: timedelta, limit: int
) -> list[AttachmentRow]:
    """Pending fetches due at ``now``, each leased (``next_at`` moved ``lease`` on) so no other
    worker takes it meanwhile; fetches for deleted messages are not claimed."""
    records = await conn.fetch(
        """WITH claimed AS (
             UPDATE attachment_fetches SET next_at = $2::timestamptz + $3::interval
             WHERE attachment_id IN (
               SELECT f.attachment_id FROM attachment_fetches f
               JOIN attachments a ON a.id = f.attachment_id
               JOIN messages m ON m.id = a.message_id
               WHERE f.state = 'pending' AND f.next_at <= $2 AND m.deleted_at IS NULL
               ORDER BY f.next_at LIMIT $1
               FOR UPDATE OF f SKIP LOCKED)
             RETURNING *)
           SELECT a.*, c.source_url, c.origin_did, c.state AS fetch_state,
                  c.attempts AS fetch_attempts, c.next_at AS fetch_next_at, c.error AS fetch_error
           FROM claimed c JOIN attachments a ON a.id = c.attachment_id""",
        limit,
        now,
        lease,
    )
    return [_row(r) for r in records]


async def next_fetch_due_at(conn: asyncpg.Connection) -> datetime | None:
    """When the earliest pending fetch is due, or None."""
    due: datetime | None = await conn.fetchval(
        "SELECT MIN(next_at) FROM attachment_fetches WHERE state = 'pending'"
    )
    return due


async def complete_fetch(conn: asyncpg.Connection, *, id: str, storage_url: str) -> bool:
    """The bytes are stored: the attachment gets ``storage_url``, its fetch is ``fetched``.
    False when the fetch is no longer pending or its message was deleted meanwhile (the caller
    then drops the stored bytes)."""
    status: str = await conn.execute(
        """WITH done AS (
             UPDATE attachment_fetches f SET state = 'fetched', attempts = f.attempts + 1,
               next_at = NULL, error = NULL
             FROM attachments a JOIN messages m ON m.id = a.message_id
             WHERE f.attachment_id = $1 AND a.id = f.attachment_id AND f.state = 'pending'
               AND m.deleted_at IS NULL
             RETURNING f.attachment_id)
           UPDATE attachments SET storage_url = $2 WHERE id IN (SELECT attachment_id FROM done)""",
        id,
        storage_url,
    )
    return status == "UPDATE 1"


async def update_fetch_failure(
    conn: asyncpg.Connection, *, id: str, error: str, next_at: datetime | None
) -> None:
    """Record a failed attempt: retried at ``next_at``, or ``failed`` for good when None."""
    await conn.execute(
        """UPDATE attachment_fetches SET attempts = attempts + 1, error = $2, next_at = $3,
             state = CASE WHEN $3::timestamptz IS NULL THEN 'failed' ELSE 'pending' END
           WHERE attachment_id = $1 AND state = 'pending'""",
        id,
        error[:500],
        next_at,
    )


async def delete_message_attachments(conn: asyncpg.Connection, *, message_id: str) -> list[str]:
    """Delete the attachment rows of a message (their fetches go with them); returns the
    storage URLs of the bytes that were here."""
    records = await conn.fetch(
        "DELETE FROM attachments WHERE message_id = $1 RETURNING storage_url", message_id
    )
    return [r["storage_url"] for r in records if r["storage_url"] != NOT_STORED]


async def get_attachment_for_instance(
    conn: asyncpg.Connection, *, attachment_id: str, instance_did: str
) -> AttachmentRow | None:
    """The stored attachment of a visible message whose conversation has a peer participant
    of the instance ``instance_did`` (its DID, or a DID under it); None otherwise."""
    record = await conn.fetchrow(
        """SELECT a.* FROM attachments a JOIN messages m ON m.id = a.message_id
           WHERE a.id = $1 AND a.storage_url <> $3 AND m.deleted_at IS NULL
             AND EXISTS (
               SELECT 1 FROM conversation_participants p
               JOIN peer_agents pa ON pa.id = p.peer_id
               WHERE p.conversation_id = m.conversation_id
                 AND (pa.did = $2 OR starts_with(pa.did, $2 || ':')))""",
        attachment_id,
        instance_did,
        NOT_STORED,
    )
    return _row(record) if record else None


async def get_message_attachment(
    conn: asyncpg.Connection, *, message_id: str
) -> AttachmentRow | None:
    """The attachment linked to ``message_id`` (a ``file`` message has at most one), or None."""
    record = await conn.fetchrow(
        "SELECT * FROM attachments WHERE message_id = $1 ORDER BY created_at LIMIT 1", message_id
    )
    return _row(record) if record else None
