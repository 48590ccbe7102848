"""``notification_outbox``: local users who may need to hear of a message (migration 0017).

A row is written in the message's transaction (:func:`queue_message`, called by the event
hub), so a committed message never lacks its notification; the notification worker claims a
user's rows once the burst is over (:func:`claim_due`), sends one notification for them and
deletes them (:func:`delete_rows`), or schedules a retry (:func:`retry_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

NOTIFY_CHANNEL = "confer_notifications"


_NOTIFIABLE = """u.deleted_at IS NULL
     AND COALESCE(p.notification, 'all') <> 'none'
     AND ((COALESCE((u.preferences_json -> 'notification' ->> 'push')::boolean, false)
           AND EXISTS (SELECT 1 FROM push_subscriptions s WHERE s.user_id = u.id))
       OR (COALESCE((u.preferences_json -> 'notification' ->> 'email')::boolean, false)
           AND u.email IS NOT NULL))"""
"""Who of the users ``u`` (participants ``p`` of the message's conversation) may be told of a
message: a live account with a channel, its participation not ``none``."""

QUEUE_MESSAGE = f"""INSERT INTO notification_outbox (user_id, message_id, conversation_id)
   SELECT u.id, {{message}}, {{conversation}} FROM users u
   LEFT JOIN conversation_participants p
     ON p.conversation_id = {{conversation}} AND p.user_id = u.id
   WHERE u.id = ANY({{users}}::char(26)[]) AND {_NOTIFIABLE}"""
"""The statement of :func:`queue_message`, its parameters named by placeholders (``users``,
``message``, ``conversation``): also a part of the event hub's one-statement append
(:func:`gateway.store.events.append_events`)."""

QUEUE_MESSAGES = f"""INSERT INTO notification_outbox (user_id, message_id, conversation_id)
   SELECT u.id, n.message_id, n.conversation_id
   FROM unnest({{users}}::char(26)[], {{messages}}::char(26)[], {{conversations}}::char(26)[])
        AS n(user_id, message_id, conversation_id)
   JOIN users u ON u.id = n.user_id
   LEFT JOIN conversation_participants p
     ON p.conversation_id = n.conversation_id AND p.user_id = u.id
   WHERE {_NOTIFIABLE}"""
""":data:`QUEUE_MESSAGE` for several messages at once, given as three arrays of one row per
(user, message, conversation): part of the hub's one-statement append of several events
(:func:`gateway.store.events.append_event_batch`)."""


async def queue_message(
    conn: asyncpg.Connection, *, user_ids: Sequence[str], message_id: str, conversation_id: str
) -> int:
    """Queue ``message_id`` for those of ``user_ids`` who could be notified of it at all: a
    live account with a channel — push on and a push subscription, or e-mail on and an
    address — whose participation in the conversation is not ``none`` (so most messages to
    users of no such channel cost no row). Wakes the worker (``NOTIFY``, delivered on commit).
    Returns the rows written."""
    status = await conn.execute(
        QUEUE_MESSAGE.format(users="$1", message="$2", conversation="$3"),
        list(user_ids),
        message_id,
        conversation_id,
    )
    count = int(status.split()[-1])
    if count:
        await conn.execute("SELECT pg_notify($1, '')", NOTIFY_CHANNEL)
    return count


@dataclass(frozen=True)
class ClaimedRow:
    """One claimed outbox row: who, which message, how often it was tried."""

    id: int
    user_id: str
    message_id: str
    attempts: int


async def claim_due(
    conn: asyncpg.Connection,
    *,
    now: datetime,
    quiet: timedelta,
    max_delay: timedelta,
    lease: timedelta,
    users: int,
) -> list[ClaimedRow]:
    """Lease the rows of at most ``users`` users whose burst is over: no new row for
    ``quiet``, or a first row older than ``max_delay``; and no retry pending. Rows leased by
    another process (until their lease ends) are left alone."""
    records = await conn.fetch(
        """WITH due AS (
             SELECT user_id FROM notification_outbox
             WHERE leased_until IS NULL OR leased_until < $1
             GROUP BY user_id
             HAVING (max(created_at) <= $1 - $2::interval OR min(created_at) <= $1 - $3::interval)
                AND COALESCE(max(next_at), '-infinity') <= $1
             ORDER BY min(created_at) LIMIT $5
           )
           UPDATE notification_outbox o SET leased_until = $1 + $4::interval
           FROM due WHERE o.user_id = due.user_id
             AND (o.leased_until IS NULL OR o.leased_until < $1)
           RETURNING o.id, o.user_id, o.message_id, o.attempts""",
        now,
        quiet,
        max_delay,
        lease,
        users,
    )
    return [ClaimedRow(**dict(r)) for r in records]


async def next_due_at(
    conn: asyncpg.Connection, *, quiet: timedelta, max_delay: timedelta
) -> datetime | None:
    """When the earliest pending user's burst will be over and its rows free (not waiting for
    a retry, not leased by another process); None when nothing is pending."""
    value = await conn.fetchval(
        """SELECT min(GREATEST(LEAST(last + $1::interval, first + $2::interval),
                               COALESCE(retry, '-infinity'), COALESCE(leased, '-infinity')))
           FROM (SELECT max(created_at) AS last, min(created_at) AS first,
                        max(next_at) AS retry, max(leased_until) AS leased
                 FROM notification_outbox GROUP BY user_id) AS pending""",
        quiet,
        max_delay,
    )
    return value if isinstance(value, datetime) else None


@dataclass(frozen=True)
class PendingMessage:
    """A queued message as the notification needs it, with the recipient's settings."""

    message_id: str
    conversation_id: str
    conversation_type: str
    conversation_name: str | None
    sender_type: str
    sender_id: str
    sender_name: str | None
    content_type: str
    content: str | None
    replied_to_sender: str | None
    notification: str
    muted: bool
    created_at: datetime


async def list_pending(
    conn: asyncpg.Connection, *, user_id: str, row_ids: Sequence[int]
) -> list[PendingMessage]:
    """The claimed rows' messages that still exist (deleted ones drop out), oldest first,
    with the user's participation setting and whether the sender is a muted contact."""
    records = await conn.fetch(
        """SELECT DISTINCT ON (m.created_at, m.id)
                  m.id AS message_id, m.conversation_id, c.type AS conversation_type,
                  c.name AS conversation_name, m.sender_type, m.sender_id,
                  COALESCE(su.display_name, su.username, sa.name, sp.name, m.sender_did)
                    AS sender_name,
                  m.content_type, m.content, r.sender_id AS replied_to_sender,
                  COALESCE(p.notification, 'all') AS notification,
                  EXISTS (SELECT 1 FROM peer_contacts pc JOIN peer_agents pd ON pd.id = pc.peer_id
                          WHERE pc.user_id = $1 AND pc.muted AND pd.did = m.sender_did) AS muted,
                  m.created_at
           FROM notification_outbox o
           JOIN messages m ON m.id = o.message_id AND m.deleted_at IS NULL
           JOIN conversations c ON c.id = m.conversation_id
           LEFT JOIN conversation_participants p
             ON p.conversation_id = m.conversation_id AND p.user_id = $1
           LEFT JOIN users su ON m.sender_type = 'user' AND su.id = m.sender_id
           LEFT JOIN agents sa ON m.sender_type = 'own_agent' AND sa.id = m.sender_id
           LEFT JOIN peer_agents sp ON m.sender_type = 'peer_agent' AND sp.id = m.sender_id
           LEFT JOIN messages r ON r.id = m.in_reply_to
           WHERE o.id = ANY($2::bigint[]) AND o.user_id = $1
           ORDER BY m.created_at, m.id""",
        user_id,
        list(row_ids),
    )
    return [PendingMessage(**dict(r)) for r in records]


async def delete_rows(conn: asyncpg.Connection, *, row_ids: Sequence[int]) -> None:
    """Forget rows whose notification was sent, dropped or given up on."""
    await conn.execute("DELETE FROM notification_outbox WHERE id = ANY($1::bigint[])", row_ids)


async def retry_rows(
    conn: asyncpg.Connection, *, row_ids: Sequence[int], next_at: datetime
) -> None:
    """Release rows for another attempt at ``next_at``."""
    await conn.execute(
        """UPDATE notification_outbox SET attempts = attempts + 1, next_at = $2,
             leased_until = NULL WHERE id = ANY($1::bigint[])""",
        row_ids,
        next_at,
    )


async def count_pending(conn: asyncpg.Connection, *, user_id: str) -> int:
    """How many rows wait for ``user_id`` (tests, diagnostics)."""
    return int(
        await conn.fetchval("SELECT count(*) FROM notification_outbox WHERE user_id = $1", user_id)
    )
