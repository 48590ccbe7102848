"""Resolves expired consent requests as denied, every ``permission_sweep_seconds``."""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from gateway.services import consent
from gateway.state import AppState

log = logging.getLogger(__name__)


async def run_sweeper(state: AppState) -> None:
    """Deny pending permission requests past their expiry until cancelled."""
    while True:
        try:
            await consent.expire_due(state)
        except (asyncpg.PostgresError, OSError) as exc:
            log.warning("consent sweeper: database error: %s", exc)
        await asyncio.sleep(state.settings.permission_sweep_seconds)
