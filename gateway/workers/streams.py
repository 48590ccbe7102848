"""Keeps the replay window bounded: trims old events from every user's stream."""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from gateway.clock import Clock
from gateway.settings import Settings
from gateway.workers.retention import trim_events

log = logging.getLogger(__name__)

TRIM_EVERY_SECONDS = 300.0


async def trim_events_once(pool: asyncpg.Pool, clock: Clock, settings: Settings) -> int:
    """Delete events beyond ``ws_replay_window`` per user or older than the max age, in
    batches (:func:`gateway.workers.retention.trim_events`, which the retention worker runs too).

    Returns the number of events deleted. A device resuming from a trimmed offset gets
    ``resync_required``.
    """
    return await trim_events(pool, clock.now(), settings)


async def trim_events_forever(pool: asyncpg.Pool, clock: Clock, settings: Settings) -> None:
    """Run ``trim_events_once`` every few minutes until cancelled; errors are logged."""
    while True:
        try:
            await trim_events_once(pool, clock, settings)
        except (asyncpg.PostgresError, OSError):
            log.warning("trimming user events failed", exc_info=True)
        await asyncio.sleep(TRIM_EVERY_SECONDS)
