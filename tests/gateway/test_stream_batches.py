"""Stream events written at commit (``Transaction.events_at_commit``: a group commit's batch of
posts, a shared run) go in one statement per run of single events, and every user's stream
reads as if each had been appended alone, one after the other. Real PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.db import transaction
from gateway.realtime.hub import EventHub
from gateway.store import events as events_store
from tests.gateway.harness import Instance, User, run_instance
from tests.gateway.statements import counting


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


async def _stream(instance: Instance, user: User) -> list[tuple[int, str, Any]]:
    """(offset, type, data) of every event of ``user``'s stream, in order."""
    async with instance.state.pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT e.seq, p.type, p.data_json FROM user_events e
               JOIN event_payloads p ON p.id = e.event_id
               WHERE e.user_id = $1 ORDER BY e.seq""",
            user.profile["id"],
        )
    return [(r["seq"], r["type"], r["data_json"]) for r in rows]


async def _append_all(hub: EventHub, tx: Any, ids: dict[str, str], *, failing: bool) -> None:
    """Appends of several kinds, one rolled back in a savepoint when ``failing``."""
    a, b, c = ids["alice"], ids["bob"], ids["carol"]
    if failing:  # a group opened in a savepoint that rolls back goes with it
        with pytest.raises(RuntimeError):
            async with tx.savepoint():
                await hub.append(tx, [a], "conversation.changed", {"n": "lost first"})
                raise RuntimeError
    await hub.append(tx, [a, b], "conversation.changed", {"n": 1})
    await hub.append(tx, [b, a, a], "conversation.changed", {"n": 2})
    if failing:
        with pytest.raises(RuntimeError):
            async with tx.savepoint():
                await hub.append(tx, [a, c], "conversation.changed", {"n": "lost"})
                raise RuntimeError
    await hub.append_series(tx, b, "receipt", [{"n": 3}, {"n": 4}])
    await hub.append(tx, [c], "conversation.changed", {"n": 5})
    await hub.append(tx, [], "conversation.changed", {"n": "nobody"})
    await hub.append(tx, [c, b], "conversation.changed", {"n": 6})


async def test_events_at_commit_read_as_appended_one_by_one(instance: Instance) -> None:
    users = {name: await instance.register(name) for name in ("alice", "bob", "carol")}
    ids = {name: user.profile["id"] for name, user in users.items()}
    hub = instance.state.hub
    published: list[tuple[str, int | None]] = []
    publish = hub.bus.publish

    async def noting(frames: Any) -> None:
        published.extend((uid, frame.offset) for uid, frame in frames)
        await publish(frames)

    hub.bus.publish = noting  # type: ignore[method-assign]

    async def run(*, at_commit: bool) -> tuple[dict[str, list[tuple[int, str, Any]]], list[str]]:
        """What each stream gained, with offsets from 1, and the statements it took."""
        before = {name: len(await _stream(instance, user)) for name, user in users.items()}
        with counting(instance.state.pool) as statements:
            async with transaction(instance.state.pool) as tx:
                tx.events_at_commit = at_commit
                await _append_all(hub, tx, ids, failing=at_commit)
                if at_commit:  # nothing is written before the commit
                    assert not any("user_events" in s for s in statements)
        gained = {}
        for name, user in users.items():
            events = (await _stream(instance, user))[before[name] :]
            gained[name] = [(seq - before[name], kind, data) for seq, kind, data in events]
        return gained, [s for s in statements if "INSERT INTO user_events" in s]

    alone, alone_appends = await run(at_commit=False)
    published_alone, published[:] = list(published), []
    at_commit, appends = await run(at_commit=True)
    assert at_commit == alone
    assert [seq for seq, _, _ in alone["bob"]] == [1, 2, 3, 4, 5]
    # alone one statement an event with users (the series one); at commit the two events
    # before the series in one, the series, the three after it in one
    assert len(alone_appends) == 5 and len(appends) == 3, appends
    # the frames go out after commit in the same order, at the new offsets
    shift = {ids[name]: len(alone[name]) for name in ids}
    assert published == [(uid, offset + shift[uid]) for uid, offset in published_alone]


async def test_a_batch_of_events_queues_each_message_notice(instance: Instance) -> None:
    """Each ``message.created`` of a batch queues its recipients' notification rows (those
    with a channel; none here) and the statement reads back every event's offsets."""
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    a, b = alice.profile["id"], bob.profile["id"]
    events = [
        events_store.EventToAppend([a, b], "message.created", '{"n":1}'),
        events_store.EventToAppend(
            [a, b], "message.created", '{"n":2}', events_store.MessageNotice([b], a, a)
        ),
        events_store.EventToAppend([b], "receipt", '{"n":3}'),
    ]
    async with instance.state.pool.acquire() as conn, conn.transaction():
        heads = {
            u: await conn.fetchval("SELECT head FROM user_streams WHERE user_id = $1", u)
            for u in (a, b)
        }
        rows = await events_store.append_event_batch(conn, events)
        queued = await conn.fetchval("SELECT count(*) FROM notification_outbox")
    ha, hb = heads[a] or 0, heads[b] or 0
    assert rows == [[(a, ha + 1), (b, hb + 1)], [(a, ha + 2), (b, hb + 2)], [(b, hb + 3)]]
    assert queued == 0
