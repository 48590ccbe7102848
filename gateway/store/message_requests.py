"""``message_requests`` rows: a stranger's first message held apart (migration 0019), and an
invitation into a group homed on an instance the user does not know (in its replica)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from gateway.ids import new_id


@dataclass(frozen=True)
class MessageRequestRow:
    """The request of ``sender_did`` to ``user_id`` in ``conversation_id``: ``pending``,
    ``accepted`` or ``declined``."""

    conversation_id: str
    user_id: str
    sender_did: str
    state: str
    created_at: datetime
    decided_at: datetime | None


_COLUMNS = "conversation_id, user_id, sender_did, state, created_at, decided_at"


async def get_request_and_preference(
    conn: asyncpg.Connection, *, conversation_id: str, user_id: str, default: bool
) -> tuple[MessageRequestRow | None, bool]:
    """The request in the conversation for the user (None when there is none) and the user's
    ``preferences.privacy.message_requests`` (``default`` when unset), in one round trip."""
    row = await conn.fetchrow(
        """SELECT (u.preferences_json -> 'privacy' ->> 'message_requests')::boolean AS pref,
                  r.conversation_id, r.user_id, r.sender_did, r.state, r.created_at,
                  r.decided_at
           FROM users u
           LEFT JOIN message_requests r ON r.conversation_id = $1 AND r.user_id = u.id
           WHERE u.id = $2""",
        conversation_id,
        user_id,
    )
    if row is None:
        return None, default
    values = dict(row)
    preference = values.pop("pref")
    request = MessageRequestRow(**values) if values["conversation_id"] is not None else None
    return request, default if preference is None else bool(preference)


async def wants_requests(conn: asyncpg.Connection, *, user_id: str, default: bool) -> bool:
    """The user's ``preferences.privacy.message_requests`` (``default`` when unset)."""
    preference = await conn.fetchval(
        """SELECT (preferences_json -> 'privacy' ->> 'message_requests')::boolean
           FROM users WHERE id = $1""",
        user_id,
    )
    return default if preference is None else bool(preference)


def of_participant(
    row: Mapping[str, Any], *, conversation_id: str, default: bool
) -> tuple[MessageRequestRow | None, bool]:
    """What :func:`get_request_and_preference` gives, from a participant row read with
    ``list_participants(…, with_requests=True)`` (:mod:`gateway.store.conversations`)."""
    request = None
    if row["request_state"] is not None:
        request = MessageRequestRow(
            conversation_id=conversation_id,
            user_id=row["user_id"],
            sender_did=row["request_sender_did"],
            state=row["request_state"],
            created_at=row["request_created_at"],
            decided_at=row["request_decided_at"],
        )
    preference = row["requests_pref"]
    return request, default if preference is None else bool(preference)


async def insert_request(
    conn: asyncpg.Connection, *, conversation_id: str, user_id: str, sender_did: str
) -> bool:
    """Open a pending request; False when the conversation already had one for the user."""
    status: str = await conn.execute(
        """INSERT INTO message_requests (conversation_id, user_id, sender_did)
           VALUES ($1, $2, $3) ON CONFLICT DO NOTHING""",
        conversation_id,
        user_id,
        sender_did,
    )
    return status.endswith(" 1")


async def decide(
    conn: asyncpg.Connection, *, conversation_id: str, user_id: str, state: str, now: datetime
) -> MessageRequestRow | None:
    """Set a request's state (``accepted`` or ``declined``); the row, or None when none."""
    row = await conn.fetchrow(
        f"""UPDATE message_requests SET state = $3, decided_at = $4
            WHERE conversation_id = $1 AND user_id = $2 RETURNING {_COLUMNS}""",
        conversation_id,
        user_id,
        state,
        now,
    )
    return MessageRequestRow(**dict(row)) if row else None


@dataclass(frozen=True)
class RequestListing:
    """A request as the user's list shows it: the row, and what tells an invitation into a
    group homed elsewhere (``kind`` ``group``: the replica's ``group_name`` and its home's
    instance DID, ``group_home``) from a direct conversation's first message (``direct``);
    ``sender_name`` is the name the sender's instance publishes for it."""

    row: MessageRequestRow
    kind: str
    group_name: str | None = None
    group_home: str | None = None
    sender_name: str | None = None


async def list_requests(
    conn: asyncpg.Connection, *, user_id: str, state: str, limit: int
) -> list[RequestListing]:
    """The user's requests in ``state``, newest first."""
    rows = await conn.fetch(
        """SELECT r.conversation_id, r.user_id, r.sender_did, r.state, r.created_at,
                  r.decided_at, c.name, g.home,
                  COALESCE(pp.display_name, pa.name) AS sender_name
           FROM message_requests r
           JOIN conversations c ON c.id = r.conversation_id
           LEFT JOIN group_replicas g ON g.conversation_id = r.conversation_id
           LEFT JOIN peer_agents pa ON pa.did = r.sender_did
           LEFT JOIN peer_profiles pp ON pp.peer_id = pa.id
           WHERE r.user_id = $1 AND r.state = $2
           ORDER BY r.created_at DESC LIMIT $3""",
        user_id,
        state,
        limit,
    )
    listings = []
    for r in rows:
        values = dict(r)
        name, home, sender_name = values.pop("name"), values.pop("home"), values.pop("sender_name")
        row = MessageRequestRow(**values)
        if home is None:
            listings.append(RequestListing(row, "direct", sender_name=sender_name))
        else:
            listings.append(RequestListing(row, "group", name, home, sender_name))
    return listings


async def list_group_requests(conn: asyncpg.Connection, *, conversation_id: str) -> dict[str, str]:
    """``{user_id: state}`` of every request in the group replica ``conversation_id``: the
    invitations of its local users (:mod:`gateway.services.message_requests`)."""
    rows = await conn.fetch(
        "SELECT user_id, state FROM message_requests WHERE conversation_id = $1",
        conversation_id,
    )
    return {r["user_id"]: r["state"] for r in rows}


async def open_group_request(
    conn: asyncpg.Connection, *, conversation_id: str, user_id: str, sender_did: str
) -> None:
    """Open a pending invitation into a group replica, or open a declined one again (its
    home lists the user anew)."""
    await conn.execute(
        """INSERT INTO message_requests (conversation_id, user_id, sender_did)
           VALUES ($1, $2, $3)
           ON CONFLICT (conversation_id, user_id) DO UPDATE
             SET state = 'pending', sender_did = EXCLUDED.sender_did, created_at = NOW(),
                 decided_at = NULL
             WHERE message_requests.state = 'declined'""",
        conversation_id,
        user_id,
        sender_did,
    )


async def delete_requests(
    conn: asyncpg.Connection, *, conversation_id: str, user_ids: list[str]
) -> None:
    """Forget the requests of ``user_ids`` in ``conversation_id`` (a group's home no longer
    lists them)."""
    await conn.execute(
        "DELETE FROM message_requests WHERE conversation_id = $1 AND user_id = ANY($2::text[])",
        conversation_id,
        user_ids,
    )


async def held_conversations(conn: asyncpg.Connection, *, user_id: str) -> dict[str, str]:
    """``{conversation_id: state}`` of the user's pending and declined requests."""
    rows = await conn.fetch(
        """SELECT conversation_id, state FROM message_requests
           WHERE user_id = $1 AND state IN ('pending', 'declined')""",
        user_id,
    )
    return {r["conversation_id"]: r["state"] for r in rows}


async def knows(
    conn: asyncpg.Connection, *, user_id: str, did: str, instance: bool = False
) -> bool:
    """True when ``did`` is one of the user's contacts by their own doing: added by DID, by
    starting a conversation, or by accepting a request (``peer_contacts.added_via`` other than
    ``inbound``, which only records that the peer wrote), or one the user marked ``known`` or
    ``trusted``; never one they blocked. With ``instance``, ``did`` is an instance DID
    (``did:web:<host>``) and any such contact on that instance counts: the instance itself or
    one of its users or agents (how a group's home is known, :mod:`gateway.services
    .message_requests`)."""
    return bool(
        await conn.fetchval(
            """SELECT 1 FROM peer_contacts c JOIN peer_agents p ON p.id = c.peer_id
               WHERE c.user_id = $1
                 AND (p.did = $2 OR ($3 AND starts_with(p.did, $2 || ':')))
                 AND (c.added_via IS DISTINCT FROM 'inbound'
                      OR c.policy_overrides_json ->> 'trust_level' IN ('known', 'trusted'))
                 AND (c.policy_overrides_json ->> 'trust_level') IS DISTINCT FROM 'blocked'
               LIMIT 1""",
            user_id,
            did,
            instance,
        )
    )


async def shares_group(conn: asyncpg.Connection, *, user_id: str, other_did: str) -> bool:
    """True when the local user with DID ``other_did`` is in a group with ``user_id``."""
    return bool(
        await conn.fetchval(
            """SELECT 1 FROM conversation_participants mine
               JOIN conversations c ON c.id = mine.conversation_id AND c.type = 'group'
               JOIN conversation_participants theirs ON theirs.conversation_id = c.id
               JOIN users u ON u.id = theirs.user_id AND u.did = $2
               WHERE mine.user_id = $1 LIMIT 1""",
            user_id,
            other_did,
        )
    )


async def has_written(conn: asyncpg.Connection, *, conversation_id: str, user_id: str) -> bool:
    """True when the user has sent a message in the conversation."""
    return bool(
        await conn.fetchval(
            """SELECT 1 FROM messages WHERE conversation_id = $1 AND sender_type = 'user'
                 AND sender_id = $2 LIMIT 1""",
            conversation_id,
            user_id,
        )
    )


async def mark_contact(conn: asyncpg.Connection, *, user_id: str, did: str) -> None:
    """Make ``did`` a contact of the user (``added_via = 'message_request'``), keeping an
    existing contact's other settings."""
    await conn.execute(
        """INSERT INTO peer_contacts (id, user_id, peer_id, added_via)
           SELECT $1, $2, p.id, 'message_request' FROM peer_agents p WHERE p.did = $3
           ON CONFLICT (user_id, peer_id) DO UPDATE SET added_via = 'message_request'
             WHERE peer_contacts.added_via IS NOT DISTINCT FROM 'inbound'""",
        new_id(),
        user_id,
        did,
    )


async def block_sender(conn: asyncpg.Connection, *, user_id: str, did: str) -> None:
    """Mark the peer ``did`` blocked in the user's contacts (``trust_level`` in
    ``policy_overrides_json``), adding the contact when needed; the federation door then
    refuses it (``peer_blocked``)."""
    await conn.execute(
        """INSERT INTO peer_contacts (id, user_id, peer_id, added_via, policy_overrides_json)
           SELECT $1, $2, p.id, 'message_request', '{"trust_level": "blocked"}'::jsonb
           FROM peer_agents p WHERE p.did = $3
           ON CONFLICT (user_id, peer_id) DO UPDATE SET policy_overrides_json =
             COALESCE(peer_contacts.policy_overrides_json, '{}'::jsonb)
             || '{"trust_level": "blocked"}'::jsonb""",
        new_id(),
        user_id,
        did,
    )
