"""Federation runtime rows (migration 0002): the outbox, the inbox and the nonce store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from gateway.ids import new_id


@dataclass(frozen=True)
class OutboxRow:
    """One pending delivery of ``message_id`` (None for a group's membership event) to the
    peer ``peer_id`` at ``endpoint``."""

    id: str
    destination: str
    endpoint: str
    sender_did: str
    peer_id: str
    message_id: str | None
    payload_json: dict[str, Any]
    attempts: int
    peer_did: str | None = None
    trace_context: dict[str, str] | None = None


TRACE_CONTEXT_KEY = "_traceContext"
"""Where an outbox row keeps the W3C trace context of the request that queued it: a key of
``payload_json`` beside the A2A params, never sent (``claim_batches`` returns it apart)."""


async def insert_outbox(
    conn: asyncpg.Connection,
    *,
    destination: str,
    endpoint: str,
    sender_did: str,
    peer_id: str,
    message_id: str | None,
    payload: dict[str, Any],
    trace_context: dict[str, str] | None = None,
    lane: str | None = None,
) -> str:
    """Queue a delivery and wake the delivery workers (``NOTIFY confer_outbox``);
    ``message_id`` None for a delivery that is no message (a group's membership event).

    ``trace_context`` (``traceparent``, ``tracestate``) is kept with the row for the delivery's
    span (:data:`TRACE_CONTEXT_KEY`). ``lane`` is the ordering key (the conversation id):
    order holds per destination and lane (:mod:`gateway.store.outbox_batches`)."""
    outbox_id = new_id()
    if trace_context:
        payload = {**payload, TRACE_CONTEXT_KEY: trace_context}
    # one statement: the row, and the NOTIFY naming its destination (sent on commit)
    await conn.execute(
        """WITH queued AS (
             INSERT INTO federation_outbox
               (id, destination, endpoint, sender_did, peer_id, message_id, payload_json, lane)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING destination)
           SELECT pg_notify('confer_outbox', destination) FROM queued""",
        outbox_id,
        destination,
        endpoint,
        sender_did,
        peer_id,
        message_id,
        payload,
        lane,
    )
    return outbox_id


async def list_peer_destinations(
    conn: asyncpg.Connection, *, conversation_id: str
) -> list[asyncpg.Record]:
    """The peer agents taking part in ``conversation_id``, by join order: ``peer_id``,
    ``did`` and A2A ``endpoint`` of each (where a message posted there is delivered)."""
    records: list[asyncpg.Record] = await conn.fetch(
        """SELECT pa.id AS peer_id, pa.did, pa.endpoint
           FROM conversation_participants p JOIN peer_agents pa ON pa.id = p.peer_id
           WHERE p.conversation_id = $1 AND p.participant_type = 'peer_agent'
           ORDER BY p.id""",
        conversation_id,
    )
    return records


async def mark_delivered(conn: asyncpg.Connection, *, id: str, now: datetime) -> None:
    """Record a successful delivery."""
    await conn.execute(
        """UPDATE federation_outbox SET delivered_at = $2, leased_until = NULL, last_error = NULL
           WHERE id = $1""",
        id,
        now,
    )


async def mark_retry(
    conn: asyncpg.Connection, *, id: str, next_attempt_at: datetime, error: str
) -> None:
    """Schedule another attempt at ``next_attempt_at`` after a transient failure."""
    await conn.execute(
        """UPDATE federation_outbox
           SET next_attempt_at = $2, leased_until = NULL, last_error = $3 WHERE id = $1""",
        id,
        next_attempt_at,
        error[:1000],
    )


async def mark_failed(conn: asyncpg.Connection, *, id: str, now: datetime, error: str) -> None:
    """Give up on a delivery (permanent refusal or too many attempts)."""
    await conn.execute(
        """UPDATE federation_outbox SET failed_at = $2, leased_until = NULL, last_error = $3
           WHERE id = $1""",
        id,
        now,
        error[:1000],
    )


async def record_outcomes(
    conn: asyncpg.Connection,
    *,
    now: datetime,
    outcomes: list[tuple[str, str, datetime | None, str | None]],
) -> None:
    """Record the outcome of several deliveries in one statement, each as
    :func:`mark_delivered`, :func:`mark_retry` or :func:`mark_failed` would.

    ``outcomes`` holds ``(id, "delivered" | "retry" | "failed", next_attempt_at, error)``:
    ``next_attempt_at`` is read for a retry only, ``error`` (cut to 1,000 characters) for a
    retry or a failure. Raises ValueError for another outcome.
    """
    for _, outcome, _, _ in outcomes:
        if outcome not in ("delivered", "retry", "failed"):
            raise ValueError(f"unknown delivery outcome {outcome!r}")
    await conn.execute(
        """UPDATE federation_outbox o
           SET delivered_at = CASE WHEN t.outcome = 'delivered' THEN $1 ELSE o.delivered_at END,
               failed_at = CASE WHEN t.outcome = 'failed' THEN $1 ELSE o.failed_at END,
               next_attempt_at = CASE WHEN t.outcome = 'retry' THEN t.next_attempt_at
                                      ELSE o.next_attempt_at END,
               leased_until = NULL,
               last_error = CASE WHEN t.outcome = 'delivered' THEN NULL ELSE t.error END
           FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::text[])
                AS t(id, outcome, next_attempt_at, error)
           WHERE o.id = t.id""",
        now,
        [i for i, _, _, _ in outcomes],
        [o for _, o, _, _ in outcomes],
        [n if o == "retry" else None for _, o, n, _ in outcomes],
        [None if e is None or o == "delivered" else e[:1000] for _, o, _, e in outcomes],
    )


async def get_inbox(
    conn: asyncpg.Connection, *, origin_did: str, remote_message_id: str, recipient_did: str
) -> str | None:
    """Our message id for an inbound (origin, remote id) already accepted for
    ``recipient_did`` (one copy per recipient: a group sends one id to several), or None."""
    value = await conn.fetchval(
        """SELECT message_id FROM federation_inbox
           WHERE origin_did = $1 AND remote_message_id = $2 AND recipient_did = $3""",
        origin_did,
        remote_message_id,
        recipient_did,
    )
    return value  # type: ignore[no-any-return]


async def list_receipt_targets(
    conn: asyncpg.Connection, *, conversation_id: str, up_to: str
) -> list[asyncpg.Record]:
    """For a read of ``conversation_id`` up to ``up_to``: per peer that sent messages there,
    its latest visible message at or before ``up_to`` that it sent us (``message_id``, the
    peer's id of it ``remote_id``) and where to tell it (``peer_id``, ``did``, ``endpoint``)."""
    records: list[asyncpg.Record] = await conn.fetch(
        """SELECT DISTINCT ON (m.sender_id) m.id AS message_id, i.remote_message_id AS remote_id,
                  p.id AS peer_id, p.did, p.endpoint
           FROM messages m
           JOIN peer_agents p ON p.id = m.sender_id
           JOIN federation_inbox i ON i.message_id = m.id AND i.origin_did = p.did
           WHERE m.conversation_id = $1 AND m.sender_type = 'peer_agent' AND m.id <= $2
             AND m.deleted_at IS NULL AND p.endpoint IS NOT NULL
           ORDER BY m.sender_id, m.id DESC""",
        conversation_id,
        up_to,
    )
    return records


async def get_remote_id(
    conn: asyncpg.Connection, *, message_id: str, origin_did: str
) -> str | None:
    """The id ``origin_did`` gave our message ``message_id`` when it sent it to us, or None."""
    value = await conn.fetchval(
        """SELECT remote_message_id FROM federation_inbox
           WHERE message_id = $1 AND origin_did = $2""",
        message_id,
        origin_did,
    )
    return value  # type: ignore[no-any-return]


async def insert_inbox(
    conn: asyncpg.Connection,
    *,
    origin_did: str,
    remote_message_id: str,
    message_id: str,
    recipient_did: str,
    now: datetime | None = None,
) -> None:
    """Remember that (origin, remote id) was stored for ``recipient_did`` as ``message_id``,
    received at ``now`` (default: the database's clock; the de-duplication window counts
    from it)."""
    await conn.execute(
        """INSERT INTO federation_inbox
             (origin_did, remote_message_id, message_id, recipient_did, created_at)
           VALUES ($1, $2, $3, $4, COALESCE($5, NOW()))""",
        origin_did,
        remote_message_id,
        message_id,
        recipient_did,
        now,
    )


async def insert_nonce(
    conn: asyncpg.Connection, *, keyid: str, nonce: str, expires_at: datetime
) -> bool:
    """Record a signature nonce; False when it was seen before (a replay, RFC 9421 §7.2.2)."""
    inserted = await conn.fetchval(
        """INSERT INTO signature_nonces (keyid, nonce, expires_at) VALUES ($1, $2, $3)
           ON CONFLICT DO NOTHING RETURNING 1""",
        keyid,
        nonce,
        expires_at,
    )
    return inserted is not None


def outbox_id() -> str:
    """A fresh id for callers that need it before inserting."""
    return new_id()


async def record_destination_failure(
    conn: asyncpg.Connection, *, destination: str, now: datetime, error: str
) -> int:
    """Count one more consecutive failure of ``destination``; returns the count."""
    value = await conn.fetchval(
        """INSERT INTO federation_destinations (destination, failures, failing_since, last_error,
                                                updated_at)
           VALUES ($1, 1, $2, $3, $2)
           ON CONFLICT (destination) DO UPDATE SET
             failures = federation_destinations.failures + 1,
             failing_since = COALESCE(federation_destinations.failing_since,
                                      EXCLUDED.failing_since),
             last_error = EXCLUDED.last_error, updated_at = EXCLUDED.updated_at
           RETURNING failures""",
        destination,
        now,
        error[:1000],
    )
    return int(value)


async def park_destination(conn: asyncpg.Connection, *, destination: str, now: datetime) -> None:
    """Stop regular attempts to ``destination``; the next probe is due a probe interval later."""
    await conn.execute(
        """UPDATE federation_destinations SET parked_at = $2, updated_at = $2
           WHERE destination = $1""",
        destination,
        now,
    )


async def clear_destination(conn: asyncpg.Connection, *, destination: str, now: datetime) -> bool:
    """Mark ``destination`` healthy and unparked; True when it was failing or parked.

    Its pending deliveries become due at once, so a recovered peer is caught up right away.
    """
    cleared = await conn.fetchval(
        """UPDATE federation_destinations
           SET failures = 0, failing_since = NULL, parked_at = NULL, updated_at = $2
           WHERE destination = $1 AND (failures > 0 OR parked_at IS NOT NULL) RETURNING 1""",
        destination,
        now,
    )
    if cleared is None:
        return False
    await conn.execute(
        """UPDATE federation_outbox SET next_attempt_at = $2
           WHERE destination = $1 AND delivered_at IS NULL AND failed_at IS NULL
             AND next_attempt_at > $2""",
        destination,
        now,
    )
    await conn.execute("SELECT pg_notify('confer_outbox', $1)", destination)
    return True


async def destination_unhealthy(conn: asyncpg.Connection, *, destination: str) -> bool:
    """True when ``destination`` is failing or parked (what :func:`clear_destination` clears)."""
    value = await conn.fetchval(
        """SELECT 1 FROM federation_destinations
           WHERE destination = $1 AND (failures > 0 OR parked_at IS NOT NULL)""",
        destination,
    )
    return value is not None


async def get_destination(conn: asyncpg.Connection, *, destination: str) -> dict[str, Any] | None:
    """The health row of ``destination``, or None."""
    record = await conn.fetchrow(
        "SELECT * FROM federation_destinations WHERE destination = $1", destination
    )
    return dict(record) if record else None


_DELIVERY_COLUMNS = """o.id, o.destination, pa.did AS peer_did, o.message_id, o.attempts,
       o.next_attempt_at, o.last_error, o.delivered_at, o.failed_at, o.created_at,
       (d.parked_at IS NOT NULL) AS parked"""
_DELIVERY_JOINS = """federation_outbox o JOIN peer_agents pa ON pa.id = o.peer_id
       LEFT JOIN federation_destinations d ON d.destination = o.destination"""
# a message's own send, not a later edit, delete or decision notice naming it
_ORIGINAL_SEND = "(o.payload_json #>> '{message,messageId}') = o.message_id::text"


async def list_message_deliveries(
    conn: asyncpg.Connection, *, message_id: str
) -> list[asyncpg.Record]:
    """The outbox rows that send ``message_id`` itself, one per peer, oldest first.

    Columns: ``id``, ``destination``, ``peer_did``, ``message_id``, ``attempts``,
    ``next_attempt_at``, ``last_error``, ``delivered_at``, ``failed_at``, ``created_at``,
    ``parked`` (the destination is parked). Rows given up on disappear after the retention
    window (``retention_outbox_failed_seconds``).
    """
    records: list[asyncpg.Record] = await conn.fetch(
        f"""SELECT {_DELIVERY_COLUMNS} FROM {_DELIVERY_JOINS}
            WHERE o.message_id = $1 AND {_ORIGINAL_SEND} ORDER BY o.id""",
        message_id,
    )
    return records


async def list_deliveries_for_sender(
    conn: asyncpg.Connection, *, outbox_ids: list[str]
) -> list[asyncpg.Record]:
    """The deliveries of ``outbox_ids`` that are a message's own send (not a later edit,
    delete or system message), in the order of ``outbox_ids``: the columns of
    :func:`list_message_deliveries` with the message's ``conversation_id`` and
    ``sender_user_id`` (the sending user, or the owner of the sending agent)."""
    records: list[asyncpg.Record] = await conn.fetch(
        f"""SELECT {_DELIVERY_COLUMNS}, m.conversation_id,
                   CASE m.sender_type WHEN 'user' THEN m.sender_id
                        WHEN 'own_agent' THEN (SELECT a.user_id FROM agents a
                                               WHERE a.id = m.sender_id) END AS sender_user_id
            FROM {_DELIVERY_JOINS} JOIN messages m ON m.id = o.message_id
            JOIN unnest($1::text[]) WITH ORDINALITY AS w(id, n) ON w.id = o.id
            WHERE {_ORIGINAL_SEND}
            ORDER BY w.n""",
        outbox_ids,
    )
    return records


async def list_outbox(
    conn: asyncpg.Connection,
    *,
    state: str | None,
    destination: str | None,
    before: str | None,
    limit: int,
) -> list[asyncpg.Record]:
    """Outbox rows newest first (columns of :func:`list_message_deliveries` plus
    ``endpoint``, ``leased_until`` and ``original``: a message's own send), filtered by
    ``state`` (``pending`` | ``delivered`` | ``failed``) and ``destination``, below ``before``."""
    records: list[asyncpg.Record] = await conn.fetch(
        f"""SELECT {_DELIVERY_COLUMNS}, o.endpoint, o.leased_until,
                   {_ORIGINAL_SEND} AS original
            FROM {_DELIVERY_JOINS}
            WHERE ($1::text IS NULL
                   OR ($1 = 'pending' AND o.delivered_at IS NULL AND o.failed_at IS NULL)
                   OR ($1 = 'delivered' AND o.delivered_at IS NOT NULL)
                   OR ($1 = 'failed' AND o.failed_at IS NOT NULL))
              AND ($2::text IS NULL OR o.destination = $2)
              AND ($3::text IS NULL OR o.id < $3)
            ORDER BY o.id DESC LIMIT $4""",
        state,
        destination,
        before,
        limit,
    )
    return records


async def list_destinations(
    conn: asyncpg.Connection, *, parked: bool | None
) -> list[asyncpg.Record]:
    """Destinations with a health row or pending deliveries, by name: ``destination``,
    ``failures``, ``failing_since``, ``last_error``, ``parked_at``, ``pending`` (undelivered
    rows) and ``oldest_pending_at``. ``parked`` True / False keeps only parked / unparked ones."""
    records: list[asyncpg.Record] = await conn.fetch(
        """WITH pending AS (
             SELECT destination, count(*) AS pending, min(created_at) AS oldest_pending_at
             FROM federation_outbox WHERE delivered_at IS NULL AND failed_at IS NULL
             GROUP BY destination)
           SELECT COALESCE(d.destination, p.destination) AS destination,
                  COALESCE(d.failures, 0) AS failures, d.failing_since, d.last_error,
                  d.parked_at, COALESCE(p.pending, 0) AS pending, p.oldest_pending_at
           FROM federation_destinations d FULL JOIN pending p ON p.destination = d.destination
           WHERE $1::boolean IS NULL OR ((d.parked_at IS NOT NULL) = $1)
           ORDER BY 1 LIMIT 1000""",
        parked,
    )
    return records


async def retry_destination_now(
    conn: asyncpg.Connection, *, destination: str, now: datetime
) -> int | None:
    """Unpark ``destination`` and make its pending deliveries due at ``now`` (waking the
    workers); returns how many are pending, or None when the destination is unknown (no
    health row and nothing pending). The failure count restarts, so parking needs a fresh run
    of failures."""
    known = await conn.fetchval(
        """UPDATE federation_destinations
           SET failures = 0, failing_since = NULL, parked_at = NULL, updated_at = $2
           WHERE destination = $1 RETURNING 1""",
        destination,
        now,
    )
    status = await conn.execute(
        """UPDATE federation_outbox SET next_attempt_at = LEAST(next_attempt_at, $2)
           WHERE destination = $1 AND delivered_at IS NULL AND failed_at IS NULL""",
        destination,
        now,
    )
    pending = int(status.split()[-1])
    if known is None and pending == 0:
        return None
    await conn.execute("SELECT pg_notify('confer_outbox', $1)", destination)
    return pending
