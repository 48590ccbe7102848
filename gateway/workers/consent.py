"""Every ``permission_sweep_seconds``: resolves expired consent requests as denied, and releases
requests held for owners who are online again (:func:`release_present_owners`)."""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from gateway.agents.peer_tasks import release_present_owners
from gateway.services import consent
from gateway.state import AppState

log = logging.getLogger(__name__)


async def run_sweeper(state: AppState) -> None:
    """Deny expired permission requests and release held ones until cancelled."""
    while True:
        try:
            deps = consent.Deciding(state.hub, state.agent_queue, state.task_events, state.clock)
            await consent.expire_due(state.pool, deps)
            await release_present_owners(
                state.pool, state.clock, state.hub, state.agent_queue, state.task_events
            )
        except (asyncpg.PostgresError, OSError) as exc:
            log.warning("consent sweeper: database error: %s", exc)
        await asyncio.sleep(state.settings.permission_sweep_seconds)
