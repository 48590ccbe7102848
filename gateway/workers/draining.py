"""The loop shared by the workers that drain a table of due outbound work.

The federation outbox (:mod:`gateway.workers.delivery`), the peers' files to fetch
(:mod:`gateway.workers.attachment_fetch`) and the A2A push notifications
(:mod:`gateway.workers.a2a_push`) run the same loop: ``LISTEN`` on a channel the writing
transaction ``NOTIFY``s on commit (on a direct connection, outside the pool, so it never holds
a request's slot), claim and attempt what is due (:meth:`DrainingWorker.run_once`), and when
nothing was, sleep until the earliest due row (:meth:`DrainingWorker.next_due_at`), at most
``idle_wait`` seconds, or until woken. A database error is logged and the loop goes on after a
sleep; anything else reaches the supervisor (:mod:`gateway.workers.supervisor`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime
from typing import Any, ClassVar

import asyncpg
import httpx

from did.outbound import OutboundPolicy
from gateway.clock import Clock
from gateway.db import Pool
from gateway.errors import DatabaseBusyError
from gateway.services.identity import Identity
from gateway.settings import Settings

log = logging.getLogger(__name__)


class DrainingWorker:
    """Base of a supervised worker that drains due rows (module docstring).

    Subclasses set ``channel`` (the ``NOTIFY`` channel), ``label`` (for logs), and optionally
    ``idle_wait`` / ``min_wait`` (seconds), and implement :meth:`run_once` and
    :meth:`next_due_at`. ``policy`` is the outbound address policy every request goes through.
    """

    channel: ClassVar[str]
    label: ClassVar[str]
    idle_wait: ClassVar[float] = 5.0
    min_wait: ClassVar[float] = 0.0

    def __init__(
        self,
        pool: Pool,
        client: httpx.AsyncClient,
        identity: Identity,
        clock: Clock,
        settings: Settings,
        policy: OutboundPolicy,
    ) -> None:
        self._pool = pool
        self._client = client
        self._identity = identity
        self._clock = clock
        self._settings = settings
        self._policy = policy
        self._wake = asyncio.Event()

    def wake(self, *_: Any) -> None:
        """Ask the worker to look for due work now (also asyncpg's listener callback)."""
        self._wake.set()

    async def run(self) -> None:
        """Drain until cancelled, woken by ``NOTIFY <channel>``."""
        async with self._pool.listening(self.channel, self.wake):
            while True:
                try:
                    busy = await self.run_once()
                except (asyncpg.PostgresError, OSError, DatabaseBusyError) as exc:
                    log.warning("%s worker: database error: %s", self.label, exc)
                    busy = False
                if not busy:
                    await self._sleep()

    async def run_once(self) -> bool:
        """Claim and attempt what is due; True when there was anything."""
        raise NotImplementedError

    async def next_due_at(self) -> datetime | None:
        """When the earliest pending row is due, or None when there is none."""
        raise NotImplementedError

    async def _sleep(self) -> None:
        due = await self.next_due_at()
        wait = self.idle_wait
        if due is not None:
            until = (due - self._clock.now()).total_seconds()
            wait = min(self.idle_wait, max(self.min_wait, until))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=wait)
