"""Claiming the outbox in lanes (migration 0024), and what each destination accepts in one
request (the batch extension its Agent Card declares).

A delivery's ``lane`` is its conversation: order holds per destination and lane, so several
requests may be in flight to one destination as long as no two carry rows of the same lane.
A claimed lane is always a *prefix* of that lane's pending rows (its oldest ones, in order),
and a lane with any leased row is not claimable at all, so a later row never overtakes an
earlier one of its conversation, whichever process holds the lease.

A destination that is failing (``failures > 0``) or parked gets only its oldest pending row,
one request at a time (the probe of a parked one once per probe interval), exactly as before
lanes: backoff and parking are per destination, and a peer that is down costs nothing
between attempts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from gateway.store.federation import TRACE_CONTEXT_KEY, OutboxRow

_PENDING = "o.delivered_at IS NULL AND o.failed_at IS NULL"


@dataclass(frozen=True)
class Claimed:
    """A leased row, its ``lane`` ('' for a row without one), how many rows one request to
    its destination may carry (``per_batch``, 1 without the batch extension) and the largest
    batch body the destination accepts (``max_bytes``, None without the extension)."""

    row: OutboxRow
    lane: str
    per_batch: int
    max_bytes: int | None


async def claim_batches(
    conn: asyncpg.Connection,
    *,
    now: datetime,
    lease: timedelta,
    probe_interval: timedelta,
    max_items: int,
    concurrency: int,
    in_flight: Mapping[str, int],
    limit: int,
) -> list[Claimed]:
    """Lease what may be sent now, in id order.

    Per healthy destination: the first ``min(max_items, its declared batch maxItems, 1 if
    none)`` rows of each free, due lane (no live lease, its head's ``next_attempt_at`` come),
    at most ``(concurrency - in_flight[destination]) × that`` rows. Per failing or parked
    destination with nothing of this process in flight: its oldest pending row, when due
    (module docstring). ``limit`` caps the rows of one claim; a cut never splits a lane's
    prefix. The caller must send or :func:`release` every row returned.
    """
    busy = list(in_flight.items())
    records = await conn.fetch(
        f"""WITH pending AS (
             SELECT o.id, o.destination, COALESCE(o.lane, '') AS lane, o.next_attempt_at,
                    o.leased_until
             FROM federation_outbox o WHERE {_PENDING}),
           ranked AS (
             SELECT p.*,
                    row_number() OVER lane_w AS lane_pos,
                    first_value(p.next_attempt_at) OVER lane_w AS lane_due,
                    bool_or(COALESCE(p.leased_until >= $1, false))
                      OVER (PARTITION BY p.destination, p.lane) AS lane_busy,
                    row_number() OVER (PARTITION BY p.destination ORDER BY p.id) AS dest_pos
             FROM pending p
             WINDOW lane_w AS (PARTITION BY p.destination, p.lane ORDER BY p.id)),
           eligible AS (
             SELECT r.id, r.destination, r.lane, r.lane_due,
                    LEAST($4, COALESCE(d.batch_max_items, 1)) AS per_batch,
                    $5 - COALESCE(b.slots, 0) AS free_slots
             FROM ranked r
             LEFT JOIN federation_destinations d ON d.destination = r.destination
             LEFT JOIN unnest($6::text[], $7::int[]) AS b(destination, slots)
               ON b.destination = r.destination
             WHERE NOT r.lane_busy AND r.lane_due <= $1
               AND NOT COALESCE(d.parked_at > $1 - $3::interval, false)
               AND CASE WHEN COALESCE(d.failures, 0) > 0 OR d.parked_at IS NOT NULL
                        THEN r.dest_pos = 1 AND COALESCE(b.slots, 0) = 0
                        ELSE r.lane_pos <= LEAST($4, COALESCE(d.batch_max_items, 1))
                             AND COALESCE(b.slots, 0) < $5 END),
           capped AS (
             SELECT e.*, row_number() OVER (PARTITION BY e.destination ORDER BY e.id) AS n
             FROM eligible e),
           picked AS (
             SELECT c.id FROM capped c WHERE c.n <= c.free_slots * c.per_batch
             ORDER BY c.lane_due, c.destination, c.lane, c.id LIMIT $8)
           UPDATE federation_outbox o
           SET leased_until = $1::timestamptz + $2::interval, attempts = o.attempts + 1
           FROM picked
           WHERE o.id = picked.id
             AND (o.leased_until IS NULL OR o.leased_until < $1) AND {_PENDING}
           RETURNING o.id, o.destination, o.endpoint, o.sender_did, o.peer_id, o.message_id,
                     o.payload_json - $9::text AS payload_json, o.attempts,
                     o.payload_json -> $9::text AS trace_context,
                     (SELECT p.did FROM peer_agents p WHERE p.id = o.peer_id) AS peer_did,
                     COALESCE(o.lane, '') AS lane,
                     LEAST($4, COALESCE((SELECT d.batch_max_items FROM federation_destinations d
                                         WHERE d.destination = o.destination), 1)) AS per_batch,
                     (SELECT d.batch_max_bytes FROM federation_destinations d
                      WHERE d.destination = o.destination) AS max_bytes""",
        now,
        lease,
        probe_interval,
        max_items,
        concurrency,
        [d for d, _ in busy],
        [n for _, n in busy],
        limit,
        TRACE_CONTEXT_KEY,
    )
    out = []
    for r in sorted(records, key=lambda r: str(r["id"])):
        values = dict(r)
        lane, per_batch, max_bytes = (
            values.pop("lane"),
            values.pop("per_batch"),
            values.pop("max_bytes"),
        )
        out.append(Claimed(OutboxRow(**values), str(lane), int(per_batch), max_bytes))
    return out


async def release(conn: asyncpg.Connection, *, ids: list[str]) -> None:
    """Give claimed rows back unsent (their claim did not count as an attempt)."""
    if ids:
        await conn.execute(
            """UPDATE federation_outbox
               SET leased_until = NULL, attempts = GREATEST(attempts - 1, 0)
               WHERE id = ANY($1::text[])""",
            ids,
        )


async def next_due_at(
    conn: asyncpg.Connection,
    *,
    probe_interval: timedelta,
    concurrency: int,
    in_flight: Mapping[str, int],
) -> datetime | None:
    """When :func:`claim_batches` (with the same ``concurrency`` and ``in_flight``) will next
    find work (None when nothing is pending).

    Only what can be claimed counts: the head of each lane of a healthy destination, the
    oldest row of a failing or parked one; each at its retry time, pushed past a live lease
    and, for a parked destination, past its next probe. Rows queued behind a head never wake
    the worker, nor do destinations with no free request slot here (the end of one of their
    requests wakes it).
    """
    busy = list(in_flight.items())
    value = await conn.fetchval(
        f"""WITH heads AS (
             SELECT DISTINCT ON (o.destination, COALESCE(o.lane, ''))
                    o.id, o.destination, o.next_attempt_at, o.leased_until
             FROM federation_outbox o WHERE {_PENDING}
             ORDER BY o.destination, COALESCE(o.lane, ''), o.id)
           SELECT MIN(GREATEST(h.next_attempt_at, h.leased_until, d.parked_at + $1::interval))
           FROM heads h LEFT JOIN federation_destinations d ON d.destination = h.destination
           LEFT JOIN unnest($3::text[], $4::int[]) AS b(destination, slots)
             ON b.destination = h.destination
           WHERE CASE WHEN COALESCE(d.failures, 0) = 0 AND d.parked_at IS NULL
                      THEN COALESCE(b.slots, 0) < $2
                      ELSE COALESCE(b.slots, 0) = 0
                           AND h.id = (SELECT min(o.id) FROM federation_outbox o
                                       WHERE o.destination = h.destination AND {_PENDING}) END""",
        probe_interval,
        concurrency,
        [d for d, _ in busy],
        [n for _, n in busy],
    )
    return value  # type: ignore[no-any-return]


async def set_batch_capability(
    conn: asyncpg.Connection,
    *,
    destination: str,
    max_items: int | None,
    max_bytes: int | None,
    now: datetime,
) -> None:
    """Remember what ``destination``'s Agent Card declares of the batch extension (None: it
    declares nothing, or the card could not be read)."""
    await conn.execute(
        """INSERT INTO federation_destinations
             (destination, batch_max_items, batch_max_bytes, card_checked_at, updated_at)
           VALUES ($1, $2, $3, $4, $4)
           ON CONFLICT (destination) DO UPDATE SET
             batch_max_items = EXCLUDED.batch_max_items,
             batch_max_bytes = EXCLUDED.batch_max_bytes,
             card_checked_at = EXCLUDED.card_checked_at""",
        destination,
        max_items,
        max_bytes,
        now,
    )


async def get_batch_capability(
    conn: asyncpg.Connection, *, destination: str
) -> tuple[int | None, int | None, datetime | None]:
    """``(max_items, max_bytes, checked_at)`` of ``destination``; all None when never read."""
    record = await conn.fetchrow(
        """SELECT batch_max_items, batch_max_bytes, card_checked_at
           FROM federation_destinations WHERE destination = $1""",
        destination,
    )
    if record is None:
        return None, None, None
    return record["batch_max_items"], record["batch_max_bytes"], record["card_checked_at"]
