"""Retention: deletes the rows no reader needs any more, table by table, in small batches.

Each pass (:func:`retain_once`) deletes at most ``retention_batch_size`` rows per statement and
repeats a statement until fewer than a batch go, so no statement holds many row locks or runs
for long. Times come from the injected clock. What each table keeps:

``signature_nonces``
    A nonce's ``expires_at`` is already the last instant its signature could be accepted
    (created + ``signature_max_age_seconds``, or its ``expires``, plus the skew). Rows are kept
    ``signature_clock_skew_seconds`` longer still, for processes whose clocks differ a little:
    deleting a nonce inside its window would let a replay through (RFC 9421 §7.2.2).

``federation_inbox``
    A row is two things: inbound de-duplication (a peer's retry of the same ``messageId``), and
    the only map from the peer's id of a message to our copy. Edits and deletes
    (``federated_changes._own_copy``), replies the peer threads by its own id
    (``federation._local_reply_target``) and our replies threaded in the peer's terms
    (``conversations.params_for_peer``) read that map for as long as the message lives. So the
    row of a visible message stays; it grows with ``messages`` and no faster. When our copy is
    deleted (``message_changes.soft_delete`` sets ``message_deleted_at``) every reader ignores
    the row, and it is kept only for the de-duplication window, ``retention_inbox_seconds``
    after the message arrived (24 h, like Synapse's received-transaction de-duplication); a
    retry after that still meets the A2A task's own (caller, message id) key. The trade-off:
    the map is not moved onto ``messages`` (a spec table), so this table is bounded by the
    live inbound messages rather than by a time window.

``federation_outbox``
    Pending rows are never touched. A delivered row that is a message's original send (the
    payload's ``messageId`` is the message's id) stays: ``federated_changes.delivery_targets``
    reads it to send later edits and deletes to the same peers (one row per message and peer;
    its content is scrubbed when the message is deleted). Delivered edits, deletes and
    decision notices go ``retention_outbox_delivered_seconds`` after delivery; rows given up on
    go ``retention_outbox_failed_seconds`` after they failed (kept longer, for diagnosis).

``a2a_push_outbox``
    A delivered push notification is deleted when it is delivered; pending ones are the push
    worker's; those failed (their config was disabled) go ``retention_outbox_failed_seconds``
    after they were queued.

``user_events``
    Events beyond the last ``ws_replay_window`` of a user's stream or older than
    ``ws_replay_max_age_seconds`` (a device resuming there gets ``resync_required``).

``event_payloads``
    An event's payload, shared by the stream rows of all its users, goes once no row names it
    any more (``refs`` at 0): right after the pass that trimmed its last rows, whether by count
    or by age, or after a rewrite moved them to a copy.

``permissions``
    Pending requests are the consent sweeper's (it denies them at ``expires_at``).
    ``allow_once`` and ``deny`` decisions go ``retention_permissions_seconds`` after the decision;
    ``allow_always`` grants are standing policy (``find_grant``) and stay.

``password_resets``
    Tokens go once expired (a used one expires like the others; a new password deletes the
    user's tokens at once).

``messages`` (:func:`purge_messages`)
    Only when the instance (``message_retention_days``) or the conversation
    (``conversation_retention``) sets a retention: messages older than the shorter of the two
    are deleted the way a member deletes one (:mod:`gateway.services.message_retention`),
    ``retention_batch_size`` per transaction, one audit row per batch, nothing sent to peers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import asyncpg

from gateway.clock import Clock
from gateway.db import transaction
from gateway.realtime.hub import EventHub
from gateway.services import message_retention
from gateway.settings import Settings
from gateway.storage import AttachmentStorage
from gateway.store import events as events_store
from gateway.store import retention as store

log = logging.getLogger(__name__)

Delete = Callable[[asyncpg.Connection, int], Awaitable[int]]
"""One batched delete: ``(conn, limit) -> rows deleted``."""


async def drain(pool: asyncpg.Pool, delete: Delete, batch: int, *, atomic: bool = False) -> int:
    """Run ``delete`` until it removes fewer than ``batch`` rows; returns the total.

    Every batch is its own statement (``atomic``: its own transaction, for deletes of several
    statements), so locks are held for one batch only.
    """
    total = 0
    while True:
        if atomic:
            async with transaction(pool) as tx:
                deleted = await delete(tx.conn, batch)
        else:
            async with pool.acquire() as conn:
                deleted = await delete(conn, batch)
        total += deleted
        if deleted < batch:
            return total
        await asyncio.sleep(0)  # let other work in between batches


def _ago(now: datetime, seconds: float) -> datetime:
    return now - timedelta(seconds=seconds)


async def trim_events(pool: asyncpg.Pool, now: datetime, settings: Settings) -> int:
    """Delete user events outside the replay window (by count and by age); returns how many."""
    before = _ago(now, settings.ws_replay_max_age_seconds)
    keep = settings.ws_replay_window

    async def delete(conn: asyncpg.Connection, limit: int) -> int:
        return await events_store.delete_old_events(conn, before=before, keep=keep, limit=limit)

    return await drain(pool, delete, settings.retention_batch_size)


async def sweep_payloads(pool: asyncpg.Pool, settings: Settings) -> int:
    """Delete the event payloads no stream row names any more; returns how many."""

    async def delete(conn: asyncpg.Connection, limit: int) -> int:
        return await events_store.delete_unreferenced_payloads(conn, limit=limit)

    return await drain(pool, delete, settings.retention_batch_size)


async def retain_once(pool: asyncpg.Pool, clock: Clock, settings: Settings) -> dict[str, int]:
    """One retention pass over every table; returns the rows deleted per table name."""
    now = clock.now()
    batch = settings.retention_batch_size
    nonces_before = _ago(now, settings.signature_clock_skew_seconds)
    inbox_before = _ago(now, settings.retention_inbox_seconds)
    delivered_before = _ago(now, settings.retention_outbox_delivered_seconds)
    failed_before = _ago(now, settings.retention_outbox_failed_seconds)
    decided_before = _ago(now, settings.retention_permissions_seconds)

    async def nonces(conn: asyncpg.Connection, limit: int) -> int:
        return await store.delete_expired_nonces(conn, before=nonces_before, limit=limit)

    async def inbox(conn: asyncpg.Connection, limit: int) -> int:
        return await store.delete_released_inbox(conn, before=inbox_before, limit=limit)

    async def delivered(conn: asyncpg.Connection, limit: int) -> int:
        return await store.delete_delivered_changes(conn, before=delivered_before, limit=limit)

    async def failed(conn: asyncpg.Connection, limit: int) -> int:
        return await store.delete_failed_outbox(conn, before=failed_before, limit=limit)

    async def failed_push(conn: asyncpg.Connection, limit: int) -> int:
        return await store.delete_failed_push(conn, before=failed_before, limit=limit)

    async def permissions(conn: asyncpg.Connection, limit: int) -> int:
        return await store.delete_decided_permissions(conn, before=decided_before, limit=limit)

    async def resets(conn: asyncpg.Connection, limit: int) -> int:
        return await store.delete_expired_resets(conn, before=now, limit=limit)

    return {
        "signature_nonces": await drain(pool, nonces, batch),
        "federation_inbox": await drain(pool, inbox, batch),
        "federation_outbox": await drain(pool, delivered, batch) + await drain(pool, failed, batch),
        "a2a_push_outbox": await drain(pool, failed_push, batch),
        "user_events": await trim_events(pool, now, settings),
        "event_payloads": await sweep_payloads(pool, settings),
        "permissions": await drain(pool, permissions, batch, atomic=True),
        "password_resets": await drain(pool, resets, batch),
    }


async def purge_messages(
    pool: asyncpg.Pool,
    hub: EventHub,
    storage: AttachmentStorage,
    clock: Clock,
    settings: Settings,
) -> tuple[int, int]:
    """Delete the messages past their conversation's effective retention at the clock's now,
    ``retention_batch_size`` per transaction, until a batch comes back short; returns
    ``(messages deleted, batches run)``."""
    now = clock.now()
    batch = settings.retention_batch_size
    total = rounds = 0
    while True:
        deleted = await message_retention.purge_batch(
            pool,
            hub,
            storage,
            now=now,
            instance_days=settings.message_retention_days,
            limit=batch,
        )
        total += deleted
        rounds += 1
        if deleted < batch:
            return total, rounds
        await asyncio.sleep(0)  # let other work in between batches


async def run_retention(
    pool: asyncpg.Pool,
    clock: Clock,
    settings: Settings,
    hub: EventHub,
    storage: AttachmentStorage,
) -> None:
    """Run :func:`retain_once` and :func:`purge_messages` every
    ``retention_interval_seconds`` until cancelled.

    A database or network error skips the pass (logged); the next pass tries again.
    """
    while True:
        try:
            deleted = await retain_once(pool, clock, settings)
            deleted["messages"], _ = await purge_messages(pool, hub, storage, clock, settings)
            if any(deleted.values()):
                log.info("retention deleted %s", deleted)
        except (asyncpg.PostgresError, OSError):
            log.warning("retention pass failed", exc_info=True)
        await asyncio.sleep(settings.retention_interval_seconds)
