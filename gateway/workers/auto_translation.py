"""Runs automatic translations (:mod:`gateway.services.auto_translation`) every second."""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from gateway.realtime.hub import EventHub
from gateway.services.auto_translation import translate_pending
from gateway.services.translation import Translator

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0


async def run_auto_translator(
    translator: Translator, hub: EventHub, poll_seconds: float = POLL_SECONDS
) -> None:
    """Translate pending messages until cancelled, announcing each through ``hub``; database
    errors are logged and retried after ``poll_seconds``."""
    failures: dict[tuple[str, str], int] = {}
    while True:
        try:
            if await translate_pending(translator, hub, failures):
                continue  # more may be waiting
        except (asyncpg.PostgresError, OSError) as exc:
            log.warning("auto translator: database error: %s", exc)
        await asyncio.sleep(poll_seconds)
