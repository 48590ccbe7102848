"""The data model's ``agent.{agent_id}.tasks`` queue: how workers learn about queued tasks.

PostgreSQL's ``agent_tasks`` is the ledger and the source of truth: a task exists, is claimed
(``FOR UPDATE SKIP LOCKED``) and finishes there. A queue only *dispatches* — it tells a worker
"task X is queued" — so a lost dispatch delays a task but never loses it: every worker also
sweeps the ledger every ``sweep_seconds`` and after each task it runs.

- :class:`PostgresTaskQueue` (default): ``NOTIFY confer_agent_tasks``, sent inside the
  enqueuing transaction and so delivered exactly when it commits, wakes the worker of every
  process (``LISTEN``); each looks for the oldest claimable task. Sweep: 2 s.
- :class:`gateway.agents.nats_queue.NatsTaskQueue` (``CONFER_NATS_URL``): one JetStream
  work-queue stream and one durable pull consumer shared by every process, so each dispatch
  reaches one process, which claims that very task. Sweep: 30 s.

Callers that enqueue announce the task with :meth:`TaskQueue.announce` in the same unit of work
(:class:`gateway.db.Transaction`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gateway.db import Pool, Transaction
from gateway.settings import Settings
from gateway.store import agent_tasks as tasks_store
from gateway.store.agent_tasks import Dispatch

log = logging.getLogger(__name__)


async def _nothing() -> None:
    return None


@dataclass
class Delivery:
    """What :meth:`TaskQueue.take` hands the worker.

    ``task_id`` None means "look at the ledger" (a PostgreSQL notification). Otherwise the
    worker claims that task and calls ``ack`` — whether or not the claim succeeded, since the
    ledger keeps the task — or ``nak`` to let another process have the dispatch now.
    """

    task_id: str | None
    ack: Callable[[], Awaitable[None]] = _nothing
    nak: Callable[[], Awaitable[None]] = _nothing


class TaskQueue(ABC):
    """Dispatches queued agent tasks to workers (``start`` before use, ``close`` after)."""

    sweep_seconds: float
    """How often a worker claims queued tasks without being told (seconds)."""

    @abstractmethod
    async def start(self) -> None:
        """Connect (and create what the broker needs)."""

    @abstractmethod
    async def close(self) -> None:
        """Disconnect; idempotent."""

    @abstractmethod
    async def publish(self, dispatch: Dispatch) -> None:
        """Tell one worker that ``dispatch.task_id`` is queued. Call after the enqueuing
        transaction has committed. Never raises: a failed publish is logged (the sweep runs
        the task)."""

    @abstractmethod
    async def take(self, wait_seconds: float) -> Delivery | None:
        """The next dispatch for this process, or None after ``wait_seconds``."""

    async def announce(self, tx: Transaction, dispatch: Dispatch) -> None:
        """Dispatch a task queued in ``tx`` once ``tx`` commits (never for a rolled-back one).

        The default publishes after commit (:meth:`gateway.db.Transaction.call_after`); a
        publish lost in a crash only delays the task until the next sweep.
        """
        tx.call_after(functools.partial(self.publish, dispatch))


class PostgresTaskQueue(TaskQueue):
    """``NOTIFY``/``LISTEN confer_agent_tasks`` on the ledger's own database.

    :meth:`announce` notifies inside the enqueuing transaction, so PostgreSQL delivers the
    notification exactly when it commits. Every process listening is woken, and the worker
    claims the oldest claimable task; :meth:`take` returns ``Delivery(task_id=None)``.
    """

    def __init__(self, pool: Pool, *, sweep_seconds: float = 2.0) -> None:
        self.sweep_seconds = sweep_seconds
        self._pool = pool
        self._listener: Any = None
        self._notified = asyncio.Event()

    def _on_notify(self, *_: Any) -> None:
        self._notified.set()

    async def start(self) -> None:
        # Its own connection, outside the pool: a LISTEN for the life of the process must not
        # hold a slot that requests wait for.
        self._listener = await self._pool.connect_direct()
        await self._listener.add_listener(tasks_store.CHANNEL, self._on_notify)

    async def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(Exception):  # a closed connection listens no more anyway
                await listener.remove_listener(tasks_store.CHANNEL, self._on_notify)
            await listener.close()

    async def announce(self, tx: Transaction, dispatch: Dispatch) -> None:
        await tasks_store.notify_queued(tx.conn, dispatch)

    async def publish(self, dispatch: Dispatch) -> None:
        try:
            async with self._pool.acquire() as conn:
                await tasks_store.notify_queued(conn, dispatch)
        except Exception:
            log.warning("could not notify agent task %s; the sweep runs it", dispatch.task_id)

    async def take(self, wait_seconds: float) -> Delivery | None:
        try:
            await asyncio.wait_for(self._notified.wait(), wait_seconds)
        except TimeoutError:
            return None
        self._notified.clear()
        return Delivery(task_id=None)


def build_task_queue(settings: Settings, pool: Pool) -> TaskQueue:
    """``NatsTaskQueue`` when ``CONFER_NATS_URL`` is set, else ``PostgresTaskQueue``."""
    sweep = settings.agent_queue_sweep_seconds
    if settings.nats_url:
        from gateway.agents.nats_queue import NatsTaskQueue

        return NatsTaskQueue(
            settings.nats_url,
            stream=settings.agent_queue_stream,
            consumer=settings.agent_queue_consumer,
            subject_prefix=settings.agent_queue_subject_prefix,
            max_age_seconds=settings.agent_queue_max_age_seconds,
            sweep_seconds=sweep if sweep is not None else 30.0,
            connect_timeout=settings.backend_connect_timeout_seconds,
        )
    return PostgresTaskQueue(pool, sweep_seconds=sweep if sweep is not None else 2.0)
