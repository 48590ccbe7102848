"""The concept memory's decay job: applies the disuse half of the weight schedule to every graph.

Each pass (:func:`decay_once`) decays every concept's weight to the injected clock's now and moves
faded concepts down one step: active below ``DORMANT_BELOW`` turns dormant, dormant below
``ARCHIVE_BELOW`` is archived (:mod:`gateway.services.concept_weight`). Exponential decay
composes, so the interval (``concept_decay_interval_seconds``) only sets how late a status
change can be noticed, never the weights; a concept that fell below both thresholds between
two passes is dormant after the first and archived after the next.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from gateway.clock import Clock
from gateway.db import transaction
from gateway.services.concept_weight import ARCHIVE_BELOW, DORMANT_BELOW, HALF_LIFE
from gateway.store import concepts as store

log = logging.getLogger(__name__)


async def decay_once(pool: asyncpg.Pool, clock: Clock) -> int:
    """One pass over every concept (one statement, one transaction); returns rows changed."""
    async with transaction(pool) as tx:
        return await store.update_decay(
            tx.conn,
            now=clock.now(),
            half_life_s=HALF_LIFE.total_seconds(),
            dormant_below=DORMANT_BELOW,
            archive_below=ARCHIVE_BELOW,
        )


async def run_concept_decay(pool: asyncpg.Pool, clock: Clock, *, interval: float) -> None:
    """Run :func:`decay_once` every ``interval`` seconds until cancelled.

    A database or network error skips the pass (logged); the next pass tries again.
    """
    while True:
        try:
            changed = await decay_once(pool, clock)
            log.debug("concept decay updated %d concepts", changed)
        except (asyncpg.PostgresError, OSError):
            log.warning("concept decay pass failed", exc_info=True)
        await asyncio.sleep(interval)
