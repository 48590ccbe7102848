"""The unit of work: after-commit work runs only after COMMIT, in order, never after rollback."""

from __future__ import annotations

import asyncpg
import pytest

from gateway.db import create_pool, transaction


@pytest.fixture
async def pool(database_url: str):
    pool = await create_pool(database_url)
    try:
        async with pool.acquire() as conn:
            await conn.execute("CREATE TABLE uow_probe (n int)")
        yield pool
    finally:
        await pool.close()


async def test_after_commit_work_runs_after_commit_in_order(pool: asyncpg.Pool) -> None:
    seen: list[tuple[int, int]] = []

    async def record(n: int) -> None:
        # Another connection sees the row: the transaction has committed by now.
        async with pool.acquire() as other:
            seen.append((n, await other.fetchval("SELECT count(*) FROM uow_probe")))

    async with transaction(pool) as tx:
        await tx.conn.execute("INSERT INTO uow_probe VALUES (1)")
        tx.call_after(lambda: record(1))
        tx.call_after(lambda: record(2))
        assert seen == []
    assert seen == [(1, 1), (2, 1)]


async def test_rollback_drops_after_commit_work(pool: asyncpg.Pool) -> None:
    ran: list[str] = []

    async def mark() -> None:
        ran.append("ran")

    with pytest.raises(RuntimeError):
        async with transaction(pool) as tx:
            await tx.conn.execute("INSERT INTO uow_probe VALUES (1)")
            tx.call_after(mark)
            raise RuntimeError("boom")
    assert ran == []
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM uow_probe") == 0


async def test_savepoint_rollback_forgets_its_work_only(pool: asyncpg.Pool) -> None:
    ran: list[str] = []

    def note(name: str):
        async def work() -> None:
            ran.append(name)

        return work

    async with transaction(pool) as tx:
        tx.call_after(note("outer"))
        with pytest.raises(ValueError):
            async with tx.savepoint():
                await tx.conn.execute("INSERT INTO uow_probe VALUES (2)")
                tx.call_after(note("inner"))
                raise ValueError
        await tx.conn.execute("INSERT INTO uow_probe VALUES (3)")
    assert ran == ["outer"]
    async with pool.acquire() as conn:
        assert await conn.fetch("SELECT n FROM uow_probe") == [(3,)]


async def test_failing_after_commit_work_is_logged_and_the_rest_runs(
    pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []

    async def broken() -> None:
        raise ConnectionError("bus down")

    async def fine() -> None:
        ran.append("fine")

    async with transaction(pool) as tx:
        tx.call_after(broken)
        tx.call_after(fine)
    assert ran == ["fine"]
    assert "after-commit work" in caplog.text
