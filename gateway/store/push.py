"""``push_subscriptions``: one browser push subscription per device session (migration 0017)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg


@dataclass(frozen=True)
class PushSubscriptionRow:
    """A push resource URL (RFC 8030 §5) and the keys its payloads are encrypted for
    (RFC 8291 §3: the user agent's P-256 public key ``p256dh``, 65 bytes, and the 16-byte
    authentication secret ``auth``)."""

    id: str
    user_id: str
    session_id: str
    endpoint: str
    p256dh: bytes
    auth: bytes
    created_at: datetime
    last_sent_at: datetime | None


async def upsert_subscription(
    conn: asyncpg.Connection,
    *,
    id: str,
    user_id: str,
    session_id: str,
    endpoint: str,
    p256dh: bytes,
    auth: bytes,
) -> PushSubscriptionRow:
    """Store the session's subscription, replacing the one it had; an endpoint held by
    another session (the same browser, logged in again) moves to this one. Runs inside the
    caller's transaction: requests naming one endpoint at once are serialised on it (two
    sessions racing past the delete would otherwise both insert it)."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 8291))", endpoint)
    await conn.execute(
        "DELETE FROM push_subscriptions WHERE endpoint = $1 AND session_id <> $2",
        endpoint,
        session_id,
    )
    record = await conn.fetchrow(
        """INSERT INTO push_subscriptions (id, user_id, session_id, endpoint, p256dh, auth)
           VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (session_id) DO UPDATE SET endpoint = EXCLUDED.endpoint,
             p256dh = EXCLUDED.p256dh, auth = EXCLUDED.auth, created_at = NOW(),
             last_sent_at = NULL
           RETURNING *""",
        id,
        user_id,
        session_id,
        endpoint,
        p256dh,
        auth,
    )
    assert record is not None
    return PushSubscriptionRow(**dict(record))


async def get_session_subscription(
    conn: asyncpg.Connection, *, session_id: str
) -> PushSubscriptionRow | None:
    """The session's subscription, or None."""
    record = await conn.fetchrow(
        "SELECT * FROM push_subscriptions WHERE session_id = $1", session_id
    )
    return PushSubscriptionRow(**dict(record)) if record else None


async def delete_session_subscription(conn: asyncpg.Connection, *, session_id: str) -> bool:
    """Remove the session's subscription; True when there was one."""
    status = await conn.execute("DELETE FROM push_subscriptions WHERE session_id = $1", session_id)
    return bool(status.endswith(" 1"))


async def list_user_subscriptions(
    conn: asyncpg.Connection, *, user_id: str, now: datetime
) -> list[PushSubscriptionRow]:
    """The subscriptions of the user's unexpired sessions, oldest first."""
    records = await conn.fetch(
        """SELECT p.* FROM push_subscriptions p JOIN sessions s ON s.id = p.session_id
           WHERE p.user_id = $1 AND s.expires_at > $2 ORDER BY p.created_at, p.id""",
        user_id,
        now,
    )
    return [PushSubscriptionRow(**dict(r)) for r in records]


async def delete_subscription(conn: asyncpg.Connection, *, id: str) -> bool:
    """Remove a subscription the push service called gone (RFC 8030 §7.3: 404/410)."""
    status = await conn.execute("DELETE FROM push_subscriptions WHERE id = $1", id)
    return bool(status.endswith(" 1"))


async def mark_sent(conn: asyncpg.Connection, *, id: str, now: datetime) -> None:
    """Record that the push service accepted a message for this subscription."""
    await conn.execute("UPDATE push_subscriptions SET last_sent_at = $2 WHERE id = $1", id, now)
