"""The concept decay job: the running instance's supervised worker fades an unused concept to
dormant and then archived on the documented schedule (half-life 30 days; dormant below 0.5,
archived below 0.1), driven by an injected clock, while a concept in use stays active."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from gateway.clock import Clock
from gateway.db import transaction
from gateway.services import concept_writes
from gateway.services.concepts import ConceptDeps
from gateway.store import users as users_store
from models.concepts import OccurrenceCreate
from tests.gateway.harness import Instance, run_instance

DAY = timedelta(days=1)


class MovableClock(Clock):
    """A clock the test moves forward."""

    def advance(self, by: timedelta) -> None:
        self.offset += by.total_seconds()


async def concepts(instance: Instance) -> dict[str, dict[str, Any]]:
    async with instance.state.pool.acquire() as conn:
        rows = await conn.fetch("SELECT name, status, weight, weight_at FROM concepts")
    return {r["name"]: dict(r) for r in rows}


async def decayed_to(instance: Instance, at: datetime) -> dict[str, dict[str, Any]]:
    """The concepts once the worker has run a pass at or after ``at`` (polled, generous)."""
    async with asyncio.timeout(60):
        while True:
            rows = await concepts(instance)
            if all(r["weight_at"] >= at for r in rows.values()):
                return rows
            await asyncio.sleep(0.1)


async def use(instance: Instance, concept: str, **extra: Any) -> None:
    """One occurrence, through the service the REST route runs (the instance's access tokens
    are verified against real time, which this test leaves behind)."""
    state = instance.state
    deps = ConceptDeps(state.pool, state.context.embedder, state.clock)
    data = OccurrenceCreate(concept=concept, session="s1", **extra)
    async with transaction(state.pool) as tx:
        user = await users_store.get_user_by_username(tx.conn, username="alice")
        assert user is not None
        await concept_writes.record_occurrence_in(tx, deps, user, data, None)


async def test_an_unused_concept_turns_dormant_then_archived(database_url: str) -> None:
    clock = MovableClock()
    async with run_instance(
        database_url, clock=clock, concept_decay_interval_seconds=0.2
    ) as instance:
        await instance.register("alice")
        await use(instance, "Unused rule", type="principle")
        await use(instance, "Rule in use", type="principle")

        clock.advance(29 * DAY)
        rows = await decayed_to(instance, clock.now())
        assert rows["Unused rule"]["status"] == "active"  # 0.5 ** (29/30) = 0.51
        assert 0.50 < rows["Unused rule"]["weight"] < 0.52
        await use(instance, "Rule in use")  # 0.51 + 1.0

        clock.advance(2 * DAY)  # day 31: 0.5 ** (31/30) = 0.49 < 0.5
        rows = await decayed_to(instance, clock.now())
        assert rows["Unused rule"]["status"] == "dormant"
        assert rows["Rule in use"]["status"] == "active"

        clock.advance(68 * DAY)  # day 99: 0.5 ** 3.3 = 0.101, still above 0.1
        rows = await decayed_to(instance, clock.now())
        assert rows["Unused rule"]["status"] == "dormant"
        assert rows["Unused rule"]["weight"] > 0.1
        # 1.51 * 0.5 ** (70/30) = 0.30: dormant too, until it is used again
        assert rows["Rule in use"]["status"] == "dormant"
        await use(instance, "Rule in use")

        clock.advance(2 * DAY)  # day 101: 0.097 < 0.1
        rows = await decayed_to(instance, clock.now())
        assert rows["Unused rule"]["status"] == "archived"
        assert rows["Rule in use"]["status"] == "active"  # seen again: 1.30
        assert 1.2 < rows["Rule in use"]["weight"] < 1.31
