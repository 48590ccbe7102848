"""Batched deletes of rows no reader needs any more (the retention worker's SQL).

Each function deletes at most ``limit`` rows in one statement and returns how many it deleted,
so a caller loops until fewer than ``limit`` go and never holds many row locks at once. What
each table keeps, and why, is explained in :mod:`gateway.workers.retention`.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg


def _count(status: str) -> int:
    return int(status.split()[-1])


async def delete_expired_nonces(conn: asyncpg.Connection, *, before: datetime, limit: int) -> int:
    """Delete signature nonces whose ``expires_at`` is before ``before`` (index on it)."""
    return _count(
        await conn.execute(
            """DELETE FROM signature_nonces WHERE (keyid, nonce) IN (
                 SELECT keyid, nonce FROM signature_nonces WHERE expires_at < $1 LIMIT $2)""",
            before,
            limit,
        )
    )


async def delete_released_inbox(conn: asyncpg.Connection, *, before: datetime, limit: int) -> int:
    """Delete inbox rows of deleted messages that arrived before ``before``.

    Only rows with ``message_deleted_at`` set (see ``message_changes.soft_delete``) qualify: the
    row of a visible message is the only map from the peer's message id to ours.
    """
    return _count(
        await conn.execute(
            """DELETE FROM federation_inbox
               WHERE (origin_did, remote_message_id, recipient_did) IN (
                 SELECT origin_did, remote_message_id, recipient_did FROM federation_inbox
                 WHERE message_deleted_at IS NOT NULL AND created_at < $1 LIMIT $2)""",
            before,
            limit,
        )
    )


async def delete_delivered_changes(
    conn: asyncpg.Connection, *, before: datetime, limit: int
) -> int:
    """Delete delivered outbox rows that are not a message's original send (edits, deletes,
    decisions: ``payload.message.messageId`` differs from ``message_id``), delivered before
    ``before``. Original sends stay: ``federated_changes.delivery_targets`` reads them."""
    return _count(
        await conn.execute(
            """DELETE FROM federation_outbox WHERE id IN (
                 SELECT id FROM federation_outbox
                 WHERE delivered_at IS NOT NULL AND delivered_at < $1
                   AND (payload_json #>> '{message,messageId}') IS DISTINCT FROM message_id::text
                 LIMIT $2)""",
            before,
            limit,
        )
    )


async def delete_failed_outbox(conn: asyncpg.Connection, *, before: datetime, limit: int) -> int:
    """Delete outbox rows given up on (``failed_at``) before ``before``; nothing reads them
    but an operator looking into a peer's failures."""
    return _count(
        await conn.execute(
            """DELETE FROM federation_outbox WHERE id IN (
                 SELECT id FROM federation_outbox
                 WHERE failed_at IS NOT NULL AND failed_at < $1 LIMIT $2)""",
            before,
            limit,
        )
    )


async def delete_expired_resets(conn: asyncpg.Connection, *, before: datetime, limit: int) -> int:
    """Delete password-reset tokens that expired before ``before`` (used or not, they can no
    longer be spent)."""
    return _count(
        await conn.execute(
            """DELETE FROM password_resets WHERE token_hash IN (
                 SELECT token_hash FROM password_resets WHERE expires_at < $1 LIMIT $2)""",
            before,
            limit,
        )
    )


async def delete_failed_push(conn: asyncpg.Connection, *, before: datetime, limit: int) -> int:
    """Delete push notifications given up on (their config was disabled) that were queued
    before ``before``; pending ones are the push worker's."""
    return _count(
        await conn.execute(
            """DELETE FROM a2a_push_outbox WHERE id IN (
                 SELECT id FROM a2a_push_outbox
                 WHERE state = 'failed' AND created_at < $1 LIMIT $2)""",
            before,
            limit,
        )
    )


async def delete_decided_permissions(
    conn: asyncpg.Connection, *, before: datetime, limit: int
) -> int:
    """Delete ``allow_once`` and ``deny`` decisions (expired requests are denials) taken before
    ``before``; ``allow_always`` grants are standing policy and stay.

    Their tasks (finished by the decision) lose the ``permission_id`` link first. Two
    statements: run it inside a transaction. Rows locked by a decision under way are skipped.
    """
    ids = [
        r["id"]
        for r in await conn.fetch(
            """SELECT id FROM permissions p
               WHERE decision IN ('allow_once', 'deny') AND decided_at < $1
                 AND NOT EXISTS (SELECT 1 FROM a2a_tasks t WHERE t.permission_id = p.id
                                   AND t.state = 'TASK_STATE_AUTH_REQUIRED')
               LIMIT $2 FOR UPDATE SKIP LOCKED""",
            before,
            limit,
        )
    ]
    if not ids:
        return 0
    await conn.execute(
        "UPDATE a2a_tasks SET permission_id = NULL WHERE permission_id = ANY($1::text[])", ids
    )
    return _count(await conn.execute("DELETE FROM permissions WHERE id = ANY($1::text[])", ids))
