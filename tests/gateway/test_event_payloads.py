"""A durable event's payload is stored once (migration 0031, ``gateway.store.events``).

What the change must keep: a replay returns the same frames, byte for byte, before and after
the migration (and the downgrade gives the rows back); offsets go on gapless after it; a
rewrite (a deleted message's tombstone) changes only the streams it names, even when they
share a payload with others; retention frees a payload once no stream row names it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from gateway import migrations
from gateway.db import create_pool
from gateway.ids import new_id
from gateway.realtime.hub import EventHub
from gateway.realtime.subscriber import event_frame
from gateway.store import events as events_store

BEFORE = "0030"  # the last revision with one full row per user and event

OLD_ROWS = """SELECT user_id, seq, type, data_json::text AS data, created_at FROM user_events
              ORDER BY user_id, seq"""


async def _users(conn: asyncpg.Connection, count: int) -> list[str]:
    ids = sorted(new_id() for _ in range(count))
    await conn.execute(
        """INSERT INTO users (id, username, did, password_hash)
           SELECT u, 'u' || lower(u), 'did:web:example.test:users:' || lower(u), 'x'
           FROM unnest($1::text[]) AS t(u)""",
        ids,
    )
    return ids


async def _old_frames(conn: asyncpg.Connection, user_id: str) -> list[bytes]:
    """A replay as revision 0030's reader made it."""
    rows = await conn.fetch(
        """SELECT seq, type, data_json::text AS data FROM user_events
           WHERE user_id = $1 ORDER BY seq""",
        user_id,
    )
    return [event_frame(r["type"], r["seq"], r["data"]).wire() for r in rows]


async def _replay(pool: asyncpg.Pool, user_id: str) -> list[bytes]:
    """A replay through the hub, as a resuming device gets it."""
    hub = EventHub(pool=pool)
    head = await hub.head(user_id)
    return [f.wire() for f in await hub.replay(user_id, after=0, upto=head.head, limit=1000)]


async def test_the_migration_keeps_every_stream_byte_for_byte(empty_database: str) -> None:
    await asyncio.to_thread(migrations.upgrade, empty_database, BEFORE)
    conn = await asyncpg.connect(empty_database)
    try:
        alice, bob, carol = await _users(conn, 3)
        t0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
        # (users, type, data, time): one event fanned out to three, one to two, one to one;
        # two events of the same data and type at different times, and two identical ones
        # in one transaction of one user (offsets 4 and 5 of alice)
        events = [
            ([alice, bob, carol], "message.created", {"id": "m1", "content": "héllo, 世界"}, 0),
            ([alice, bob], "receipt", {"message_id": "m1", "user_id": "x"}, 1),
            ([carol], "conversation.updated", {"id": "c1", "name": None, "n": 1.5e3}, 2),
            ([alice, bob, carol], "receipt", {"message_id": "m1", "user_id": "x"}, 3),
            ([alice], "typing.cleared", {"a": [1, 2, {"b": "c"}]}, 4),
            ([alice], "typing.cleared", {"a": [1, 2, {"b": "c"}]}, 4),
        ]
        heads: dict[str, int] = {}
        for users, kind, data, minutes in events:
            for user in users:
                heads[user] = heads.get(user, 0) + 1
                await conn.execute(
                    """INSERT INTO user_events (user_id, seq, type, data_json, created_at)
                       VALUES ($1, $2, $3, $4::jsonb, $5)""",
                    user,
                    heads[user],
                    kind,
                    json.dumps(data),
                    t0 + timedelta(minutes=minutes),
                )
        for user, head in heads.items():
            await conn.execute(
                "INSERT INTO user_streams (user_id, epoch, head) VALUES ($1, $2, $3)",
                user,
                f"epoch-{user}",
                head,
            )
        before = {u: await _old_frames(conn, u) for u in (alice, bob, carol)}
        rows_before = [dict(r) for r in await conn.fetch(OLD_ROWS)]
    finally:
        await conn.close()
    assert [len(before[u]) for u in (alice, bob, carol)] == [5, 3, 3]

    await asyncio.to_thread(migrations.upgrade, empty_database)
    pool = await create_pool(empty_database, min_size=1, max_size=2)
    try:
        for user in (alice, bob, carol):
            assert await _replay(pool, user) == before[user], user
        async with pool.acquire() as conn:
            # one payload per event; alice's two identical ones share one
            payloads = await conn.fetch("SELECT type, refs FROM event_payloads ORDER BY type")
            assert sorted((r["type"], r["refs"]) for r in payloads) == [
                ("conversation.updated", 1),
                ("message.created", 3),
                ("receipt", 2),
                ("receipt", 3),
                ("typing.cleared", 2),
            ]
            # the streams go on from their heads, gapless
            appended = await events_store.append_events(
                conn, user_ids=[alice, bob, carol], type="message.created", data='{"id":"m2"}'
            )
            assert sorted(appended) == [(alice, 6), (bob, 4), (carol, 4)]
            epochs = await conn.fetch("SELECT user_id, epoch FROM user_streams")
            assert {r["epoch"] for r in epochs} == {f"epoch-{u}" for u in (alice, bob, carol)}
            await conn.execute(
                "DELETE FROM user_events WHERE seq = 6 OR (seq = 4 AND user_id <> $1)", alice
            )
    finally:
        await pool.close()

    await asyncio.to_thread(migrations.downgrade, empty_database, BEFORE)
    conn = await asyncpg.connect(empty_database)
    try:
        assert [dict(r) for r in await conn.fetch(OLD_ROWS)] == rows_before
        for user in (alice, bob, carol):
            assert await _old_frames(conn, user) == before[user], user
        gone = await conn.fetchval("SELECT to_regclass('event_payloads') IS NULL")
        assert gone
    finally:
        await conn.close()


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    opened = await create_pool(database_url, min_size=1, max_size=4)
    try:
        yield opened
    finally:
        await opened.close()


async def _payloads(conn: asyncpg.Connection) -> dict[int, int]:
    rows = await conn.fetch("SELECT id, refs FROM event_payloads")
    return {r["id"]: r["refs"] for r in rows}


async def _counted_right(conn: asyncpg.Connection) -> bool:
    """Every payload's ``refs`` is the number of stream rows naming it."""
    wrong = await conn.fetchval(
        """SELECT count(*) FROM event_payloads p
           WHERE refs <> (SELECT count(*) FROM user_events e WHERE e.event_id = p.id)"""
    )
    return int(wrong) == 0


async def test_a_fan_out_stores_its_payload_once(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        users = await _users(conn, 50)
        text = json.dumps({"id": "m1", "content": "to everyone"}, separators=(",", ":"))
        appended = await events_store.append_events(
            conn, user_ids=users, type="message.created", data=text
        )
        assert sorted(appended) == [(u, 1) for u in users]
        assert list((await _payloads(conn)).values()) == [50]
        # each new stream has an epoch of its own, unlike any of another statement's streams
        later = await _users(conn, 2)
        await events_store.append_events(conn, user_ids=later, type="a", data="{}")
        epochs = [r["epoch"] for r in await conn.fetch("SELECT epoch FROM user_streams")]
        assert len(set(epochs)) == 52
        assert all(re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", e) for e in epochs)
        width = await conn.fetchval("SELECT max(pg_column_size(e.*)) FROM user_events e")
        assert width < 100  # a reference, not a copy of the data
        # a series for one user: a payload each, offsets in order
        offsets = await events_store.append_series(
            conn, user_id=users[0], type="delivery.updated", data=['{"n":1}', '{"n":2}']
        )
        assert offsets == [2, 3]
        assert await _counted_right(conn)
    frames = await _replay(pool, users[0])
    assert frames == [
        event_frame("message.created", 1, '{"id": "m1", "content": "to everyone"}').wire(),
        event_frame("delivery.updated", 2, '{"n": 1}').wire(),
        event_frame("delivery.updated", 3, '{"n": 2}').wire(),
    ]


async def test_a_rewrite_changes_only_the_streams_it_names(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        alice, bob, carol = await _users(conn, 3)
        message = json.dumps({"id": "m1", "content": "secret"})
        await events_store.append_events(
            conn, user_ids=[alice, bob, carol], type="message.created", data=message
        )
        [shared] = await _payloads(conn)
        # carol left: the tombstone reaches alice and bob; carol keeps what she had
        tombstone = {"id": "m1", "deleted": True}
        await events_store.rewrite_events(
            conn,
            user_ids=[alice, bob],
            types=["message.created", "message.edited"],
            data_id="m1",
            type_sql="'message.deleted'",
            data_sql="$4::jsonb",
            args=(tombstone,),
        )
        refs = await _payloads(conn)
        assert refs[shared] == 1 and sorted(refs.values()) == [1, 2]
        assert await _counted_right(conn)
        # now everyone: carol's row is the only one left on the old payload, changed in place
        await events_store.rewrite_events(
            conn,
            user_ids=[alice, bob, carol],
            types=["message.created", "message.edited"],
            data_id="m1",
            type_sql="'message.deleted'",
            data_sql="$4::jsonb",
            args=(tombstone,),
        )
        assert await _payloads(conn) == refs
        assert await _counted_right(conn)
        secret = await conn.fetchval(
            "SELECT count(*) FROM event_payloads WHERE data_json::text LIKE '%secret%'"
        )
        assert secret == 0
    for user in (alice, bob, carol):
        assert await _replay(pool, user) == [
            event_frame("message.deleted", 1, '{"id": "m1", "deleted": true}').wire()
        ]


async def test_retention_frees_a_payload_once_no_stream_names_it(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        alice, bob = await _users(conn, 2)
        await events_store.append_events(conn, user_ids=[alice, bob], type="a", data='{"n":1}')
        await events_store.append_events(conn, user_ids=[alice], type="b", data='{"n":2}')
        await events_store.append_events(conn, user_ids=[alice], type="c", data='{"n":3}')
        first, second, third = sorted(await _payloads(conn))
        long_ago = datetime(2000, 1, 1, tzinfo=UTC)
        # alice keeps her last two: the first event leaves her stream, bob still holds it
        deleted = await events_store.delete_old_events(conn, before=long_ago, keep=2, limit=10)
        assert deleted == 1
        assert await _payloads(conn) == {first: 1, second: 1, third: 1}
        assert await events_store.delete_unreferenced_payloads(conn, limit=10) == 0
        # alice keeps one: the second event is nobody's any more
        assert await events_store.delete_old_events(conn, before=long_ago, keep=1, limit=10) == 1
        assert await _payloads(conn) == {first: 1, second: 0, third: 1}
        assert await events_store.delete_unreferenced_payloads(conn, limit=10) == 1
        assert await _payloads(conn) == {first: 1, third: 1}
        # by age: everything older than the future goes, and so do the payloads
        future = datetime.now(UTC) + timedelta(days=1)
        assert await events_store.delete_old_events(conn, before=future, keep=10, limit=10) == 2
        assert await events_store.delete_unreferenced_payloads(conn, limit=10) == 2
        assert await _payloads(conn) == {}
        # the streams' heads stay where they were: the next event follows on
        again = await events_store.append_events(conn, user_ids=[alice, bob], type="d", data="{}")
        assert sorted(again) == sorted([(alice, 4), (bob, 2)])
