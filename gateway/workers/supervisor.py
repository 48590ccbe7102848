"""Every background loop runs under a supervisor: named, logged, restarted with backoff.

The idea is Synapse's ``run_as_background_process``
(``synapse/metrics/background_process_metrics.py``): one wrapper names the loop, logs any
exception with that name, and keeps the process alive. A worker that a peer's strange answer
can kill must not silently stop federation for everyone.

- ``supervise(name, factory)`` runs ``await factory()`` until cancelled. When it raises, the
  exception is logged (``log.exception``, with the worker's name) and the factory is called again
  after a delay: ``Backoff.base`` (1 s) doubling per consecutive failure, capped at
  ``Backoff.cap`` (60 s). A run that lasted at least ``Backoff.reset_after`` (60 s) before failing
  counts as healthy, so the next delay starts from ``base`` again.
- A factory that *returns* has finished on purpose (e.g. the message indexer when embeddings are
  off): it is logged and not restarted.
- Cancellation is the way to stop: it reaches the running factory (which cleans up in its
  ``finally``) or the backoff sleep, and ``supervise`` re-raises it.
- ``Supervisor`` owns the tasks of several supervised workers; ``async with supervised(workers)``
  starts a list of ``(name, factory)`` and stops them all (cancel, then wait) on exit. That is how
  the app's lifespan starts every worker (``gateway.app``); :meth:`Supervisor.states` tells
  ``/readyz`` whether each is still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger(__name__)

WorkerFactory = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Backoff:
    """Restart delays in seconds: ``base * 2**(failures - 1)``, at most ``cap``; a run of at
    least ``reset_after`` seconds resets the count."""

    base: float = 1.0
    cap: float = 60.0
    reset_after: float = 60.0

    def delay(self, failures: int) -> float:
        """The wait before restarting after ``failures`` consecutive failures (>= 1)."""
        return min(self.cap, self.base * 2.0 ** max(0, failures - 1))


DEFAULT_BACKOFF = Backoff()


async def supervise(
    name: str, factory: WorkerFactory, *, backoff: Backoff = DEFAULT_BACKOFF
) -> None:
    """Run ``await factory()`` as the worker ``name`` until cancelled (module docstring).

    Every exception but cancellation is logged and followed by a restart after the backoff
    delay; returning ends the worker. Raises CancelledError when cancelled.
    """
    failures = 0
    while True:
        started = time.monotonic()
        try:
            await factory()
        except asyncio.CancelledError:
            raise
        except Exception:
            if time.monotonic() - started >= backoff.reset_after:
                failures = 0
            failures += 1
            delay = backoff.delay(failures)
            log.exception(
                "background worker %r failed (%d in a row); restarting in %.1f s",
                name,
                failures,
                delay,
            )
            await asyncio.sleep(delay)
        else:
            log.info("background worker %r finished", name)
            return


class Supervisor:
    """The supervised workers of one process: :meth:`start` each, :meth:`stop` them all."""

    def __init__(self, *, backoff: Backoff = DEFAULT_BACKOFF) -> None:
        self._backoff = backoff
        self._tasks: dict[str, asyncio.Task[None]] = {}

    @property
    def tasks(self) -> dict[str, asyncio.Task[None]]:
        """The running workers by name (a copy)."""
        return dict(self._tasks)

    def states(self) -> dict[str, str]:
        """Each worker's state by name: ``running``, ``finished`` (returned on purpose, see
        :func:`supervise`) or ``stopped`` (cancelled, or ended by an error that escaped)."""
        return {name: _state(task) for name, task in self._tasks.items()}

    def start(self, name: str, factory: WorkerFactory) -> asyncio.Task[None]:
        """Start ``factory`` supervised as ``name`` (unique in this supervisor).

        Raises ValueError when ``name`` is already taken.
        """
        if name in self._tasks:
            raise ValueError(f"a worker named {name!r} is already running")
        task = asyncio.create_task(
            supervise(name, factory, backoff=self._backoff), name=f"confer-{name}"
        )
        self._tasks[name] = task
        return task

    async def stop(self) -> None:
        """Cancel every worker and wait until each has finished its clean-up."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _state(task: asyncio.Task[None]) -> str:
    if not task.done():
        return "running"
    if task.cancelled() or task.exception() is not None:
        return "stopped"
    return "finished"


@contextlib.asynccontextmanager
async def supervised(
    workers: Iterable[tuple[str, WorkerFactory]], *, backoff: Backoff = DEFAULT_BACKOFF
) -> AsyncIterator[Supervisor]:
    """Start every ``(name, factory)`` under one Supervisor; stop them all on exit."""
    supervisor = Supervisor(backoff=backoff)
    try:
        for name, factory in workers:
            supervisor.start(name, factory)
        yield supervisor
    finally:
        await supervisor.stop()
