"""The unsent-upload reaper: deletes uploads never attached to a message once they are older
than ``attachment_orphan_seconds`` (24 h by default), their rows and their bytes, in the local
folder or the S3-compatible bucket alike.

A client uploads first and sends the ``file`` message after; an upload whose message never
came (the client crashed, the user gave up) would otherwise stay on disk and in the uploader's
quota for ever. Each pass (:func:`reap_once`) deletes up to :data:`BATCH` rows per transaction
(fewer when ``retention_batch_size`` is smaller) until a batch comes back short: the batch's
bytes are removed while its transaction is open, one store call each, so the batch is kept
small enough for that transaction to stay short. The rows are chosen and deleted in one statement
that skips rows locked by a post attaching them right now and re-checks ``message_id IS NULL``
under the lock (:func:`gateway.store.attachments.delete_unsent`), so a file being sent is never
taken; the bytes go before the batch commits, so a failing store rolls the batch back for the
next pass. Times come from the injected clock.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import asyncpg

from gateway.clock import Clock
from gateway.errors import StorageUnavailableError
from gateway.services import attachments
from gateway.settings import Settings
from gateway.storage import AttachmentStorage

log = logging.getLogger(__name__)

BATCH = 100
"""Most uploads deleted per transaction (each also one store call made inside it)."""


async def reap_once(
    pool: asyncpg.Pool, storage: AttachmentStorage, clock: Clock, settings: Settings
) -> int:
    """Delete every unsent upload created more than ``attachment_orphan_seconds`` before the
    clock's now, :data:`BATCH` (or ``retention_batch_size``, if smaller) per transaction;
    returns how many went. Raises
    StorageUnavailableError (the batch in hand rolled back) when the store fails."""
    before = clock.now() - timedelta(seconds=settings.attachment_orphan_seconds)
    batch = min(BATCH, settings.retention_batch_size)
    total = 0
    while True:
        deleted = await attachments.delete_unsent(pool, storage, before=before, limit=batch)
        total += deleted
        if deleted < batch:
            return total
        await asyncio.sleep(0)  # let other work in between batches


async def run_attachment_reaper(
    pool: asyncpg.Pool, storage: AttachmentStorage, clock: Clock, settings: Settings
) -> None:
    """Run :func:`reap_once` every ``attachment_reap_interval_seconds`` until cancelled.

    A database, network or storage error skips the pass (logged); the next pass tries again.
    """
    while True:
        try:
            deleted = await reap_once(pool, storage, clock, settings)
            if deleted:
                log.info("deleted %d unsent uploads", deleted)
        except (asyncpg.PostgresError, OSError, StorageUnavailableError):
            log.warning("unsent-upload reaper pass failed", exc_info=True)
        await asyncio.sleep(settings.attachment_reap_interval_seconds)
