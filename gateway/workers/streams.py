"""Keeps the replay window bounded: trims old events from every user's stream."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import asyncpg

from gateway.clock import Clock
from gateway.settings import Settings
from gateway.store import events as events_store

log = logging.getLogger(__name__)

TRIM_EVERY_SECONDS = 300.0


async def trim_events_once(pool: asyncpg.Pool, clock: Clock, settings: Settings) -> int:
    """Delete events beyond ``ws_replay_window`` per user or older than the max age.

    Returns the number of events deleted. A device resuming from a trimmed offset gets
    ``resync_required``.
    """
    before = clock.now() - timedelta(seconds=settings.ws_replay_max_age_seconds)
    async with pool.acquire() as conn:
        return await events_store.delete_old_events(
            conn, before=before, keep=settings.ws_replay_window
        )


async def trim_events_forever(pool: asyncpg.Pool, clock: Clock, settings: Settings) -> None:
    """Run ``trim_events_once`` every few minutes until cancelled; errors are logged."""
    while True:
        try:
            await trim_events_once(pool, clock, settings)
        except (asyncpg.PostgresError, OSError):
            log.warning("trimming user events failed", exc_info=True)
        await asyncio.sleep(TRIM_EVERY_SECONDS)
