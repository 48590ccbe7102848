"""The worker supervisor: a failing worker is logged by name and restarted; cancel stops it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from gateway.workers.supervisor import Backoff, Supervisor, WorkerFactory, supervise, supervised

FAST = Backoff(base=0.01, cap=0.05, reset_after=60.0)


async def wait_for(check: Callable[[], bool], within: float = 10.0) -> None:
    async with asyncio.timeout(within):
        while not check():  # noqa: ASYNC110 (polls state set by other tasks)
            await asyncio.sleep(0.01)


async def test_a_worker_that_raises_is_logged_with_its_name_and_restarted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs: list[int] = []
    healthy = asyncio.Event()

    async def flaky() -> None:
        runs.append(len(runs) + 1)
        if len(runs) < 3:
            raise ValueError(f"peer said something strange (run {len(runs)})")
        healthy.set()
        await asyncio.Event().wait()  # a healthy worker runs until cancelled

    caplog.set_level(logging.ERROR, logger="gateway.workers.supervisor")
    task = asyncio.create_task(supervise("flaky-delivery", flaky, backoff=FAST))
    await asyncio.wait_for(healthy.wait(), 10)
    assert runs == [1, 2, 3]
    failures = [r for r in caplog.records if "flaky-delivery" in r.getMessage()]
    assert len(failures) == 2
    assert failures[0].exc_info is not None and "run 1" in str(failures[0].exc_info[1])
    assert "2 in a row" in failures[1].getMessage()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_cancel_stops_a_running_worker_and_lets_it_clean_up() -> None:
    started, cleaned = asyncio.Event(), asyncio.Event()

    async def worker() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.set()

    supervisor = Supervisor(backoff=FAST)
    task = supervisor.start("listener", worker)
    await asyncio.wait_for(started.wait(), 10)
    await supervisor.stop()
    assert task.cancelled() and cleaned.is_set()
    assert supervisor.tasks == {}


async def test_cancel_during_the_backoff_sleep_stops_it() -> None:
    calls = 0

    async def always_fails() -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("boom")

    task = asyncio.create_task(
        supervise("doomed", always_fails, backoff=Backoff(base=30.0, cap=30.0))
    )
    await wait_for(lambda: calls == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert calls == 1


async def test_a_worker_that_returns_is_not_restarted() -> None:
    calls = 0

    async def switched_off() -> None:
        nonlocal calls
        calls += 1

    async with supervised([("off", switched_off)], backoff=FAST) as supervisor:
        await wait_for(lambda: supervisor.tasks["off"].done())
        await asyncio.sleep(0.1)
    assert calls == 1


async def test_supervised_starts_every_worker_and_refuses_duplicate_names() -> None:
    seen: set[str] = set()

    def worker(name: str) -> WorkerFactory:
        async def run() -> None:
            seen.add(name)
            await asyncio.Event().wait()

        return run

    async with supervised([("a", worker("a")), ("b", worker("b"))], backoff=FAST) as supervisor:
        await wait_for(lambda: seen == {"a", "b"})
        with pytest.raises(ValueError, match="already running"):
            supervisor.start("a", worker("a"))
        tasks = list(supervisor.tasks.values())
    assert all(t.cancelled() for t in tasks)


def test_backoff_doubles_and_is_capped() -> None:
    backoff = Backoff()
    assert [backoff.delay(n) for n in (1, 2, 3, 6, 7, 20)] == [1, 2, 4, 32, 60, 60]
