"""Every ``permission_sweep_seconds``: resolves expired consent requests as denied, and releases
requests held for owners who are online again (:func:`release_present_owners`)."""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from gateway.agents.peer_tasks import release_present_owners
from gateway.services import consent

log = logging.getLogger(__name__)


async def run_sweeper(pool: asyncpg.Pool, deps: consent.Deciding, *, interval: float) -> None:
    """Deny expired permission requests and release held ones every ``interval`` seconds,
    until cancelled (runs under the worker supervisor)."""
    while True:
        try:
            await consent.expire_due(pool, deps)
            await release_present_owners(pool, deps.clock, deps.hub, deps.queue, deps.task_events)
        except (asyncpg.PostgresError, OSError) as exc:
            log.warning("consent sweeper: database error: %s", exc)
        await asyncio.sleep(interval)
