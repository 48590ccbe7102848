"""Group commit (``gateway.db.GroupCommit``): works of one key that arrive while another is
being written share one transaction, each in its own savepoint, and every caller sees what it
would see alone. Real PostgreSQL; the posts over real HTTP and WebSocket.

The shared transaction of a JSON-RPC batch (``gateway.db.SharedTransaction``), at the end:
consecutive units of one key commit once, each in its own savepoint; a unit that fails rolls
back alone; another key, or a commit on demand, ends the run; a failed commit says which units
it lost."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from gateway.db import GroupCommit, Transaction, create_pool, shared_transaction, transaction
from tests.gateway.harness import run_instance
from tests.gateway.statements import counting


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, max_size=4)
    async with pool.acquire() as conn:
        await conn.execute(
            """CREATE TABLE probe (n int PRIMARY KEY, tag text,
                                   txid bigint NOT NULL DEFAULT txid_current(),
                                   UNIQUE (tag) DEFERRABLE INITIALLY DEFERRED)"""
        )
    yield pool
    await pool.close()


async def rows(pool: asyncpg.Pool) -> dict[int, int]:
    """``{n: txid}`` of what is committed."""
    async with pool.acquire() as conn:
        return {r["n"]: r["txid"] for r in await conn.fetch("SELECT n, txid FROM probe")}


class Probe:
    """Works that insert one row each and note their after-commit work, with a gate that holds
    the first work in its transaction until the others have queued behind it."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()
        self.after: list[tuple[int, bool]] = []

    def work(self, n: int, *, tag: str | None = None, fail: bool = False, hold: bool = False):
        async def run(tx: Transaction) -> int:
            await tx.conn.execute("INSERT INTO probe (n, tag) VALUES ($1, $2)", n, tag)

            async def noted() -> None:  # committed (visible elsewhere) by the time it runs
                async with self.pool.acquire() as other:
                    seen = await other.fetchval("SELECT 1 FROM probe WHERE n = $1", n)
                self.after.append((n, seen == 1))

            tx.call_after(noted)
            if hold:
                self.entered.set()
                await self.gate.wait()
            if fail:
                raise ValueError(f"work {n} fails after writing")
            return n

        return run


async def test_works_queued_behind_one_share_a_transaction_and_fail_alone(pool) -> None:
    commits, probe = GroupCommit(), Probe(pool)
    first = asyncio.create_task(commits.run(pool, "k", probe.work(0, hold=True)))
    await asyncio.wait_for(probe.entered.wait(), 30)
    queued = [
        asyncio.create_task(commits.run(pool, "k", probe.work(n, fail=n == 3))) for n in range(1, 6)
    ]
    other_key = await asyncio.wait_for(commits.run(pool, "other", probe.work(9)), 30)
    assert other_key == 9  # another key does not wait for "k"
    await asyncio.sleep(0.05)
    assert not any(t.done() for t in queued)  # they wait for the first transaction
    probe.gate.set()
    assert await first == 0
    results = await asyncio.gather(*queued, return_exceptions=True)
    assert results[:2] == [1, 2] and results[3:] == [4, 5]
    assert isinstance(results[2], ValueError)

    stored = await rows(pool)
    assert sorted(stored) == [0, 1, 2, 4, 5, 9]  # the failing work's row rolled back alone
    assert stored[1] == stored[2] == stored[4] == stored[5]  # one transaction
    assert len({stored[0], stored[1], stored[9]}) == 3
    # after-commit work of the batch ran after its commit, in arrival order; none for 3
    assert [n for n, _ in probe.after if n != 9] == [0, 1, 2, 4, 5]
    assert all(seen for _, seen in probe.after)


async def test_a_batch_runs_without_savepoints_until_a_work_fails(pool) -> None:
    """Savepoints cost two round trips a work: a batch runs unguarded, and only when one of
    its works fails is everything rolled back and run again, each work in its savepoint."""
    for failing in (None, 2):
        commits, probe = GroupCommit(), Probe(pool)
        runs: list[int] = []

        def counted(n: int, probe: Probe = probe, runs: list[int] = runs, **kw: Any):
            inner = probe.work(n, **kw)

            async def run(tx: Transaction) -> int:
                runs.append(n)
                return await inner(tx)

            return run

        base = 100 * (1 + (failing or 0))
        with counting(pool) as statements:
            first = asyncio.create_task(commits.run(pool, "k", counted(base, hold=True)))
            await asyncio.wait_for(probe.entered.wait(), 30)
            queued = [
                asyncio.create_task(commits.run(pool, "k", counted(base + n, fail=n == failing)))
                for n in (1, 2, 3)
            ]
            await asyncio.sleep(0.05)
            probe.gate.set()
            await first
            results = await asyncio.gather(*queued, return_exceptions=True)
        savepoints = [s for s in statements if s.startswith("SAVEPOINT")]
        stored = await rows(pool)
        if failing is None:
            assert results == [base + 1, base + 2, base + 3]
            assert savepoints == [], statements
            assert runs == [base, base + 1, base + 2, base + 3]  # each once
        else:
            assert results[0] == base + 1 and results[2] == base + 3
            assert isinstance(results[1], ValueError)
            assert base + 2 not in stored and {base + 1, base + 3} <= set(stored)
            assert len(savepoints) == 3, statements  # the second run, one per work
            assert runs == [base, base + 1, base + 2, base + 1, base + 2, base + 3]
            # after-commit work only from the run that committed, none for the failing one
            assert [n for n, _ in probe.after if n != base] == [base + 1, base + 3]


async def test_max_batch_cancelled_callers_and_a_failed_commit(pool) -> None:
    commits, probe = GroupCommit(max_batch=2), Probe(pool)
    first = asyncio.create_task(commits.run(pool, "k", probe.work(0, hold=True)))
    await asyncio.wait_for(probe.entered.wait(), 30)
    queued = [asyncio.create_task(commits.run(pool, "k", probe.work(n))) for n in (1, 2, 3)]
    gone = asyncio.create_task(commits.run(pool, "k", probe.work(4)))
    await asyncio.sleep(0.05)
    gone.cancel()  # its caller went away before its work started: it never runs
    probe.gate.set()
    assert [await first, *await asyncio.gather(*queued)] == [0, 1, 2, 3]
    with contextlib.suppress(asyncio.CancelledError):
        await gone
    stored = await rows(pool)
    assert sorted(stored) == [0, 1, 2, 3]
    assert stored[1] == stored[2] != stored[3]  # at most two per transaction, in order

    # A COMMIT that fails (a deferred unique constraint) fails every caller of the batch, and
    # nothing of it is stored.
    probe = Probe(pool)
    first = asyncio.create_task(commits.run(pool, "k", probe.work(10, hold=True)))
    await asyncio.wait_for(probe.entered.wait(), 30)
    clash = [
        asyncio.create_task(commits.run(pool, "k", probe.work(n, tag="same"))) for n in (11, 12)
    ]
    await asyncio.sleep(0.05)
    probe.gate.set()
    assert await first == 10
    results = await asyncio.gather(*clash, return_exceptions=True)
    assert all(isinstance(r, asyncpg.UniqueViolationError) for r in results), results
    assert 11 not in await rows(pool) and 12 not in await rows(pool)
    assert [n for n, _ in probe.after] == [10]


@pytest.mark.parametrize("group_commit_max", [32, 1])
async def test_concurrent_posts_are_stored_once_in_order_and_share_commits(
    database_url: str, group_commit_max: int
) -> None:
    """24 posts at once into one conversation: each answered with its own message, stored
    once, delivered to the recipient's socket once and in id order; with group commit some
    share a transaction, with ``post_group_commit_max=1`` none do."""
    async with run_instance(database_url, post_group_commit_max=group_commit_max) as a:
        alice, bob = await a.register("alice"), await a.register("bob")
        cid = (await alice.direct_with(bob.did))["id"]
        await alice.send(cid, "warm-up")
        async with bob.websocket() as ws:
            limits = httpx.Limits(max_connections=32)
            async with httpx.AsyncClient(base_url=a.base_url, timeout=60, limits=limits) as c:
                answers = await asyncio.gather(
                    *(
                        c.post(
                            f"/v1/conversations/{cid}/messages",
                            json={"content": f"m{i}"},
                            headers=alice.headers,
                        )
                        for i in range(24)
                    )
                )
            assert [r.status_code for r in answers] == [201] * 24
            posted = {r.json()["content"]: r.json()["id"] for r in answers}
            assert sorted(posted) == sorted(f"m{i}" for i in range(24))
            seen: list[str] = []
            async with asyncio.timeout(60):
                while len(seen) < 24:
                    frame = json.loads(await ws.recv())
                    if frame.get("type") == "message.created":
                        seen.append(frame["data"]["id"])
        assert seen == sorted(posted.values())  # once each, in id order, gap-free
        async with a.state.pool.acquire() as conn:
            stored = await conn.fetch(
                "SELECT id, content FROM messages WHERE conversation_id = $1 AND content LIKE 'm%'",
                cid,
            )
            # A stream row's created_at is its transaction's start (now()): rows of one
            # transaction share it, savepoints or not (xmin would not: a savepoint has its own).
            events: list[Any] = await conn.fetch(
                """SELECT data_json->>'id' AS id, e.created_at FROM user_events e
                   JOIN event_payloads p ON p.id = e.event_id
                   WHERE type = 'message.created' AND data_json->>'content' LIKE 'm%'
                     AND user_id = $1""",
                bob.profile["id"],
            )
        assert {r["content"]: r["id"] for r in stored} == posted
        assert sorted(e["id"] for e in events) == sorted(posted.values())
        transactions = len({e["created_at"] for e in events})
        if group_commit_max == 1:
            assert transactions >= 20  # two BEGINs in one microsecond are possible, if rare
        else:
            assert transactions < 24


def insert(n: int, after: list[int], *, tag: str | None = None, fail: bool = False) -> Any:
    """A unit that inserts row ``n`` and notes ``n`` in ``after`` once committed."""

    async def unit(tx: Transaction) -> int:
        await tx.conn.execute("INSERT INTO probe (n, tag) VALUES ($1, $2)", n, tag)

        async def noted() -> None:
            after.append(n)

        tx.call_after(noted)
        if fail:
            raise ValueError(f"unit {n} fails")
        return n

    return unit


async def test_units_of_one_key_commit_once_and_a_failing_unit_rolls_back_alone(
    pool: asyncpg.Pool,
) -> None:
    after: list[int] = []
    async with shared_transaction(pool) as shared:
        assert await shared.run("a", insert(1, after)) == 1
        with pytest.raises(ValueError, match="unit 2 fails"):
            await shared.run("a", insert(2, after, fail=True))
        assert await shared.run("a", insert(3, after)) == 3
        assert await rows(pool) == {}  # nothing is visible before the run commits
        assert after == []
    stored = await rows(pool)
    assert sorted(stored) == [1, 3]
    assert stored[1] == stored[3]  # one transaction
    assert after == [1, 3]  # the failed unit's after-commit work went with it
    assert shared.joined == 2
    assert not shared.lost(1) and not shared.lost(2)


async def test_another_key_or_a_commit_on_demand_ends_the_run(pool: asyncpg.Pool) -> None:
    after: list[int] = []
    async with shared_transaction(pool) as shared:
        await shared.run("a", insert(1, after))
        await shared.run("b", insert(2, after))
        assert sorted(await rows(pool)) == [1]  # the run of "a" committed first
        assert after == [1]
        await shared.commit()
        assert sorted(await rows(pool)) == [1, 2]
        await shared.run("b", insert(3, after))
    stored = await rows(pool)
    assert len({stored[1], stored[2], stored[3]}) == 3
    assert after == [1, 2, 3]


async def test_a_failed_commit_loses_its_run_only(pool: asyncpg.Pool) -> None:
    after: list[int] = []
    async with shared_transaction(pool) as shared:
        await shared.run("a", insert(1, after))
        await shared.run("b", insert(2, after, tag="same"))
        await shared.run("b", insert(3, after, tag="same"))  # the deferred check fails at COMMIT
        await shared.run("c", insert(4, after))
    assert sorted(await rows(pool)) == [1, 4]
    assert after == [1, 4]
    assert [shared.lost(unit) for unit in (1, 2, 3, 4)] == [False, True, True, False]


async def test_an_exception_leaving_the_block_rolls_the_run_back(pool: asyncpg.Pool) -> None:
    after: list[int] = []
    with pytest.raises(RuntimeError):
        async with shared_transaction(pool) as shared:
            await shared.run("a", insert(1, after))
            raise RuntimeError("the request went away")
    assert await rows(pool) == {}
    assert after == []
    async with pool.acquire() as conn:  # the connection went back to the pool, usable
        assert await conn.fetchval("SELECT 1") == 1


async def test_a_transaction_remembers_what_its_units_read_until_a_savepoint_rolls_back(
    pool: asyncpg.Pool,
) -> None:
    reads: list[str] = []

    async def read(value: str) -> str:
        reads.append(value)
        return value

    async with transaction(pool) as tx:
        assert await tx.remembered("k", lambda: read("first")) == "first"
        assert await tx.remembered("k", lambda: read("again")) == "first"  # not read again
        with pytest.raises(ValueError):
            async with tx.savepoint():
                tx.remember("k", "written in a unit that fails")
                assert await tx.remembered("other", lambda: read("other")) == "other"
                raise ValueError
        assert tx.recall("k") == "first" and tx.recall("other") is None
    assert reads == ["first", "other"]


async def test_work_for_the_end_of_a_run_runs_before_its_commit_and_fails_it_whole(
    pool: asyncpg.Pool,
) -> None:
    """Stream events of a shared run are written at its end (``events_at_commit``): the work
    a failed unit registered goes with it; work that fails at the end loses the whole run."""
    after: list[int] = []

    def at_end(n: int, *, fail: bool = False) -> Any:
        async def unit(tx: Transaction) -> None:
            assert tx.events_at_commit

            async def write() -> None:
                await tx.conn.execute("INSERT INTO probe (n) VALUES ($1)", 100 + n)
                if fail:
                    raise ValueError(f"the end of unit {n} fails")

            tx.call_before_commit(write)
            await insert(n, after, fail=n == 2)(tx)

        return unit

    async with shared_transaction(pool) as shared:
        await shared.run("a", at_end(1))
        with pytest.raises(ValueError):
            await shared.run("a", at_end(2))
        assert await rows(pool) == {}
    assert sorted(await rows(pool)) == [1, 101]  # unit 2's work for the end went with it
    async with shared_transaction(pool) as shared:
        await shared.run("b", at_end(3, fail=True))
    assert sorted(await rows(pool)) == [1, 101] and shared.lost(1)
    assert after == [1]
