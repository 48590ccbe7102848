"""``user_streams``, ``user_events`` and ``event_payloads`` rows (migrations 0004, 0031): each
user's ordered event stream.

Offsets are per user, start at 1 and have no gaps: appending bumps ``user_streams.head`` under
its row lock, so two transactions that write to the same user commit in offset order.

An event's ``type`` and ``data`` are stored once, in ``event_payloads``, whatever the number of
streams it is appended to; each stream's row (``user_events``: user, offset, time) names its
payload. ``event_payloads.refs`` counts the rows naming a payload: rows are only ever taken
away from a payload (trimmed, or moved to a rewritten copy), each time lowering ``refs`` by as
many, and a payload at 0 is deleted by :func:`delete_unreferenced_payloads`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from gateway.store import notifications as notifications_store


@dataclass(frozen=True)
class StreamHead:
    """Where a user's stream stands: its ``epoch`` and the last offset written (0 = none)."""

    epoch: str
    head: int


@dataclass(frozen=True)
class StoredEvent:
    """One event of a user's stream: offset, type and its ``data`` as JSON text."""

    seq: int
    type: str
    data: str


async def ensure_streams(conn: asyncpg.Connection, *, user_ids: list[str]) -> None:
    """Create the missing streams of ``user_ids`` (a new random epoch each, head 0)."""
    await conn.execute(
        """INSERT INTO user_streams (user_id, epoch)
           SELECT u, gen_random_uuid()::text FROM unnest($1::text[]) AS t(u)
           WHERE NOT EXISTS (SELECT 1 FROM user_streams s WHERE s.user_id = t.u)
           ORDER BY u
           ON CONFLICT (user_id) DO NOTHING""",
        user_ids,
    )


@dataclass(frozen=True)
class MessageNotice:
    """A new message's notification rows, queued with its events: ``message_id`` of
    ``conversation_id`` for those of ``user_ids`` who could be notified of it
    (:data:`gateway.store.notifications.QUEUE_MESSAGE`)."""

    user_ids: list[str]
    message_id: str
    conversation_id: str


# A new stream's epoch: random, and different for each user. The VALUES of an upsert are
# computed for every row, also those that only bump an existing stream's head, and
# ``gen_random_uuid()`` is a system call on some builds (about 5 µs a row on the embedded
# PostgreSQL: 5 ms of a fan-out to 1,000): one random value per statement, hashed with each
# user's id, costs a fraction of that.
NEW_EPOCH = "md5((SELECT gen_random_uuid()::text) || {user})::uuid::text"

_APPEND = (
    """WITH bumped AS (
  INSERT INTO user_streams AS s (user_id, epoch, head)
  SELECT u, """
    + NEW_EPOCH.format(user="u")
    + """, 1 FROM unnest($1::text[]) AS t(u) ORDER BY u
  ON CONFLICT (user_id) DO UPDATE SET head = s.head + 1
  RETURNING s.user_id, s.head
), payload AS (
  INSERT INTO event_payloads (type, data_json, refs)
  VALUES ($2, $3::text::jsonb, (SELECT count(*) FROM bumped))
  RETURNING id
), stored AS (
  INSERT INTO user_events (user_id, seq, event_id)
  SELECT b.user_id, b.head, p.id FROM bumped b, payload p
  RETURNING user_id, seq
)"""
)

_APPEND_NOTIFYING = (
    _APPEND
    + """, queued AS (
  """
    + notifications_store.QUEUE_MESSAGE.format(users="$4", message="$5", conversation="$6")
    + """
  RETURNING 1
), woken AS (
  SELECT pg_notify($7, '') FROM (SELECT 1 FROM queued LIMIT 1) q
)
SELECT user_id, seq, (SELECT count(*) FROM woken) AS woken FROM stored"""
)


async def append_events(
    conn: asyncpg.Connection,
    *,
    user_ids: list[str],
    type: str,
    data: str,
    notice: MessageNotice | None = None,
) -> list[tuple[str, int]]:
    """Append one event (``data`` is JSON text) to each user's stream; returns (user_id, seq).

    One statement: the event's payload is stored once, and each user's stream gets a row
    naming it. A user without a stream gets one (a new random epoch) holding this event at
    offset 1; the others' heads are bumped under their row locks, taken in user-id order, so
    concurrent fan-outs to overlapping groups never deadlock. With ``notice``, the same
    statement queues the message's notification rows and, when it queued any, wakes the
    notification worker (``NOTIFY``, delivered on commit), as
    :func:`gateway.store.notifications.queue_message` does.
    """
    if notice is None:
        records = await conn.fetch(
            _APPEND + " SELECT user_id, seq FROM stored", user_ids, type, data
        )
    else:
        records = await conn.fetch(
            _APPEND_NOTIFYING,
            user_ids,
            type,
            data,
            notice.user_ids,
            notice.message_id,
            notice.conversation_id,
            notifications_store.NOTIFY_CHANNEL,
        )
    return [(r["user_id"], r["seq"]) for r in records]


@dataclass(frozen=True)
class EventToAppend:
    """One event of :func:`append_event_batch`: its ``type`` and ``data`` (JSON text), the
    users whose streams get it (each at most once), and the message notice it queues."""

    user_ids: list[str]
    type: str
    data: str
    notice: MessageNotice | None = None


_APPEND_BATCH = f"""WITH given AS (
  SELECT t.e, t.u FROM unnest($1::int4[], $2::text[]) AS t(e, u)
), counts AS (
  SELECT u, count(*)::int AS n FROM given GROUP BY u
), bumped AS (
  INSERT INTO user_streams AS s (user_id, epoch, head)
  SELECT u, gen_random_uuid()::text, n FROM counts ORDER BY u
  ON CONFLICT (user_id) DO UPDATE SET head = s.head + EXCLUDED.head
  RETURNING s.user_id, s.head
), numbered AS (
  SELECT g.e, g.u, b.head - c.n + row_number() OVER (PARTITION BY g.u ORDER BY g.e) AS seq
  FROM given g JOIN counts c ON c.u = g.u JOIN bumped b ON b.user_id = g.u
), items AS MATERIALIZED (
  SELECT nextval('event_payloads_id_seq') AS id, v.type, v.data, v.e, c.n
  FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS v(type, data, e)
  JOIN (SELECT e, count(*) AS n FROM given GROUP BY e) c ON c.e = v.e
), payload AS (
  INSERT INTO event_payloads (id, type, data_json, refs)
  SELECT id, type, data::jsonb, n FROM items
), stored AS (
  INSERT INTO user_events (user_id, seq, event_id)
  SELECT n.u, n.seq, i.id FROM numbered n JOIN items i ON i.e = n.e
), queued AS (
  {notifications_store.QUEUE_MESSAGES.format(users="$5", messages="$6", conversations="$7")}
  RETURNING 1
), woken AS (
  SELECT pg_notify($8, '') FROM (SELECT 1 FROM queued LIMIT 1) q
)
SELECT e, u AS user_id, seq, (SELECT count(*) FROM woken) AS woken
FROM numbered ORDER BY e, u"""


async def append_event_batch(
    conn: asyncpg.Connection, events: Sequence[EventToAppend]
) -> list[list[tuple[str, int]]]:
    """Append ``events``, in order, in one statement: what as many :func:`append_events`
    calls would write, one after the other (each event's payload stored once, each user's new
    events at consecutive offsets in the events' order, their notices queued, the worker woken
    once). Returns each event's
    (user_id, seq), in user-id order. Streams are locked in user-id order, as there."""
    given_events: list[int] = []
    given_users: list[str] = []
    notice_users: list[str] = []
    notice_messages: list[str] = []
    notice_conversations: list[str] = []
    for index, event in enumerate(events, start=1):
        given_events += [index] * len(event.user_ids)
        given_users += event.user_ids
        if event.notice is not None:
            notice = event.notice
            notice_users += notice.user_ids
            notice_messages += [notice.message_id] * len(notice.user_ids)
            notice_conversations += [notice.conversation_id] * len(notice.user_ids)
    records = await conn.fetch(
        _APPEND_BATCH,
        given_events,
        given_users,
        [event.type for event in events],
        [event.data for event in events],
        notice_users,
        notice_messages,
        notice_conversations,
        notifications_store.NOTIFY_CHANNEL,
    )
    rows: list[list[tuple[str, int]]] = [[] for _ in events]
    for record in records:
        rows[record["e"] - 1].append((record["user_id"], record["seq"]))
    return rows


async def append_series(
    conn: asyncpg.Connection, *, user_id: str, type: str, data: list[str]
) -> list[int]:
    """Append several events of one ``type`` (``data``: JSON text each, in order) to one
    user's stream in one statement, as many :func:`append_events` calls for that user would;
    returns their offsets, in order. The head moves once, under the stream's row lock."""
    if not data:
        return []
    records = await conn.fetch(
        """WITH item AS MATERIALIZED (
             SELECT nextval('event_payloads_id_seq') AS id, t.d, t.n
             FROM unnest($3::text[]) WITH ORDINALITY AS t(d, n)
           ), bumped AS (
             INSERT INTO user_streams AS s (user_id, epoch, head)
             VALUES ($1, gen_random_uuid()::text, $4)
             ON CONFLICT (user_id) DO UPDATE SET head = s.head + $4
             RETURNING s.head
           ), payload AS (
             INSERT INTO event_payloads (id, type, data_json, refs)
             SELECT id, $2, d::jsonb, 1 FROM item
           )
           INSERT INTO user_events (user_id, seq, event_id)
           SELECT $1, b.head - $4 + i.n, i.id FROM bumped b, item i
           RETURNING seq""",
        user_id,
        type,
        data,
        len(data),
    )
    return sorted(r["seq"] for r in records)


async def get_stream_head(conn: asyncpg.Connection, *, user_id: str) -> StreamHead:
    """The user's epoch and head, creating the stream when the user has none yet."""
    await ensure_streams(conn, user_ids=[user_id])
    record = await conn.fetchrow("SELECT epoch, head FROM user_streams WHERE user_id = $1", user_id)
    assert record is not None
    return StreamHead(epoch=record["epoch"], head=record["head"])


async def list_events(
    conn: asyncpg.Connection, *, user_id: str, after: int, upto: int, limit: int
) -> list[StoredEvent]:
    """Stored events with ``after < seq <= upto``, oldest first, at most ``limit``."""
    records = await conn.fetch(
        """SELECT e.seq, p.type, p.data_json::text AS data
           FROM user_events e JOIN event_payloads p ON p.id = e.event_id
           WHERE e.user_id = $1 AND e.seq > $2 AND e.seq <= $3 ORDER BY e.seq LIMIT $4""",
        user_id,
        after,
        upto,
        limit,
    )
    return [StoredEvent(r["seq"], r["type"], r["data"]) for r in records]


async def delete_old_events(
    conn: asyncpg.Connection, *, before: datetime, keep: int, limit: int
) -> int:
    """Trim the replay window: drop at most ``limit`` events older than ``before`` or beyond
    the last ``keep`` of their user's stream, and lower their payloads' ``refs`` by as many
    (in payload order; a payload left at 0 goes with :func:`delete_unreferenced_payloads`).
    Returns the number of rows deleted."""
    deleted = await conn.fetchval(
        """WITH gone AS (
             DELETE FROM user_events e USING (
               SELECT user_id, seq FROM (
                 (SELECT user_id, seq FROM user_events WHERE created_at < $1 LIMIT $3)
                 UNION
                 (SELECT o.user_id, o.seq FROM user_streams s
                    JOIN user_events o ON o.user_id = s.user_id AND o.seq <= s.head - $2
                  LIMIT $3)) AS c
               LIMIT $3) AS d
             WHERE e.user_id = d.user_id AND e.seq = d.seq
             RETURNING e.event_id
           ), released AS (
             SELECT p.id, g.n FROM event_payloads p
             JOIN (SELECT event_id, count(*) AS n FROM gone GROUP BY event_id) g
               ON g.event_id = p.id
             ORDER BY p.id FOR UPDATE OF p
           ), lowered AS (
             UPDATE event_payloads p SET refs = p.refs - r.n FROM released r WHERE p.id = r.id
           )
           SELECT count(*) FROM gone""",
        before,
        keep,
        limit,
    )
    return int(deleted)


async def delete_unreferenced_payloads(conn: asyncpg.Connection, *, limit: int) -> int:
    """Delete at most ``limit`` payloads no stream row names any more (``refs`` 0: none gets
    a new row after its append); returns how many."""
    status = await conn.execute(
        """DELETE FROM event_payloads WHERE id IN (
             SELECT id FROM event_payloads WHERE refs <= 0 LIMIT $1)""",
        limit,
    )
    return int(status.split()[-1])


def _rewrite(type_sql: str, data_sql: str) -> str:
    """The statement of :func:`rewrite_events`: ``type_sql`` and ``data_sql`` compute the new
    type and data from the old payload ``x`` (its own parameters from ``$4`` on).

    The rows are locked first (user, offset order), then their payloads (id order). A payload
    all of whose rows are rewritten is changed in place; one that other rows name as well
    keeps them, and these rows get a rewritten copy (one per payload, ids drawn first so the
    rows can be pointed at them), its ``refs`` lowered by as many.
    """
    return f"""WITH hit AS MATERIALIZED (
  SELECT e.user_id, e.seq, e.event_id FROM user_events e
  JOIN event_payloads p ON p.id = e.event_id
  WHERE e.user_id = ANY($1::text[]) AND p.type = ANY($2::text[]) AND p.data_json->>'id' = $3
  ORDER BY e.user_id, e.seq FOR UPDATE OF e
), old AS MATERIALIZED (
  SELECT x.id, x.type, x.data_json, x.created_at, h.n, h.n < x.refs AS shared
  FROM event_payloads x
  JOIN (SELECT event_id, count(*) AS n FROM hit GROUP BY event_id) h ON h.event_id = x.id
  ORDER BY x.id FOR UPDATE OF x
), copy AS MATERIALIZED (
  SELECT id AS old_id, nextval('event_payloads_id_seq') AS id FROM old WHERE shared
), copied AS (
  INSERT INTO event_payloads (id, type, data_json, refs, created_at)
  SELECT c.id, {type_sql}, {data_sql}, x.n, x.created_at FROM copy c JOIN old x ON x.id = c.old_id
), released AS (
  UPDATE event_payloads p SET refs = p.refs - o.n FROM old o WHERE p.id = o.id AND o.shared
), in_place AS (
  UPDATE event_payloads x SET type = {type_sql}, data_json = {data_sql}
  FROM old o WHERE x.id = o.id AND NOT o.shared
)
UPDATE user_events e SET event_id = c.id FROM hit h JOIN copy c ON c.old_id = h.event_id
WHERE e.user_id = h.user_id AND e.seq = h.seq"""


async def rewrite_events(
    conn: asyncpg.Connection,
    *,
    user_ids: list[str],
    types: list[str],
    data_id: str,
    type_sql: str,
    data_sql: str,
    args: tuple[object, ...] = (),
) -> None:
    """Rewrite the stored events of ``user_ids`` whose type is one of ``types`` and whose
    ``data`` has ``id`` ``data_id``: their type becomes ``type_sql``, their data ``data_sql``
    (SQL over the old payload ``x``, e.g. ``x.type``, ``jsonb_set(x.data_json, …)``; ``args``
    are its parameters, ``$4`` on). Other users' streams keep what they had, whether or not
    they shared the payload. One statement."""
    await conn.execute(_rewrite(type_sql, data_sql), user_ids, types, data_id, *args)
