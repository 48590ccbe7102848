"""``conversations`` and ``conversation_participants`` rows."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import asyncpg

from gateway.ids import new_id
from gateway.store.messages import after_read
from models import ConversationRow, ParticipantRow

ParticipantRef = tuple[Literal["user", "own_agent", "peer_agent"], str]
_COLUMN = {"user": "user_id", "own_agent": "agent_id", "peer_agent": "peer_id"}


async def lock_direct_pair(conn: asyncpg.Connection, key: str) -> None:
    """Serialise creation of one direct conversation (transaction-scoped advisory lock)."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", key)


def direct_pair_key(a: ParticipantRef, b: ParticipantRef) -> str:
    """The advisory-lock key of the direct conversations between ``a`` and ``b``.

    The same whichever side asks (the two are sorted), and the same for every direct type: A
    opening a conversation with B while B opens one with A, or a user opening one with a peer
    while the peer's first message creates one, must wait for each other and find one row.
    """
    first, second = sorted((a, b))
    return f"direct:{first[0]}:{first[1]}:{second[0]}:{second[1]}"


async def insert_conversation(
    conn: asyncpg.Connection, *, type: str, name: str | None, created_by: str
) -> ConversationRow:
    """Insert a conversation of ``type`` created by user ``created_by``."""
    record = await conn.fetchrow(
        """INSERT INTO conversations (id, type, name, created_by)
           VALUES ($1, $2, $3, $4) RETURNING *""",
        new_id(),
        type,
        name,
        created_by,
    )
    assert record is not None
    return ConversationRow.model_validate(dict(record))


async def insert_participant(
    conn: asyncpg.Connection, *, conversation_id: str, who: ParticipantRef, role: str = "member"
) -> ParticipantRow:
    """Add a user, own agent or peer agent to a conversation."""
    kind, ref_id = who
    ids: dict[str, str | None] = {"user_id": None, "agent_id": None, "peer_id": None}
    ids[_COLUMN[kind]] = ref_id
    record = await conn.fetchrow(
        """INSERT INTO conversation_participants
             (id, conversation_id, participant_type, user_id, agent_id, peer_id, role)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *""",
        new_id(),
        conversation_id,
        kind,
        ids["user_id"],
        ids["agent_id"],
        ids["peer_id"],
        role,
    )
    assert record is not None
    return ParticipantRow.model_validate(dict(record))


async def find_direct_conversation(
    conn: asyncpg.Connection, *, type: str, user_id: str, other: ParticipantRef
) -> ConversationRow | None:
    """The oldest conversation of ``type`` in which both ``user_id`` and ``other`` take part."""
    column = _COLUMN[other[0]]
    record = await conn.fetchrow(
        f"""SELECT c.* FROM conversations c
            JOIN conversation_participants a
              ON a.conversation_id = c.id AND a.participant_type = 'user' AND a.user_id = $2
            JOIN conversation_participants b
              ON b.conversation_id = c.id AND b.participant_type = $3 AND b.{column} = $4
            WHERE c.type = $1 ORDER BY c.id LIMIT 1""",
        type,
        user_id,
        other[0],
        other[1],
    )
    return ConversationRow.model_validate(dict(record)) if record else None


async def both_take_part(
    conn: asyncpg.Connection, *, conversation_id: str, member: ParticipantRef, peer_id: str
) -> bool:
    """True when ``member`` (a local user or agent) and the peer both take part in the
    conversation."""
    column = _COLUMN[member[0]]
    return bool(
        await conn.fetchval(
            f"""SELECT EXISTS (SELECT 1 FROM conversation_participants a
                  JOIN conversation_participants b ON b.conversation_id = a.conversation_id
                  WHERE a.conversation_id = $1 AND a.participant_type = $2 AND a.{column} = $3
                    AND b.participant_type = 'peer_agent' AND b.peer_id = $4)""",
            conversation_id,
            member[0],
            member[1],
            peer_id,
        )
    )


async def get_conversation_for_user(
    conn: asyncpg.Connection, *, conversation_id: str, user_id: str
) -> ConversationRow | None:
    """The conversation if ``user_id`` takes part in it; None otherwise (not found or hidden)."""
    record = await conn.fetchrow(
        """SELECT c.* FROM conversations c
           WHERE c.id = $1 AND EXISTS (
             SELECT 1 FROM conversation_participants p
             WHERE p.conversation_id = c.id AND p.user_id = $2)""",
        conversation_id,
        user_id,
    )
    return ConversationRow.model_validate(dict(record)) if record else None


async def list_conversations_for_user(
    conn: asyncpg.Connection, *, user_id: str, limit: int
) -> list[ConversationRow]:
    """The user's conversations, most recently updated first."""
    records = await conn.fetch(
        """SELECT c.* FROM conversations c
           JOIN conversation_participants p ON p.conversation_id = c.id AND p.user_id = $1
           ORDER BY c.updated_at DESC, c.id DESC LIMIT $2""",
        user_id,
        limit,
    )
    return [ConversationRow.model_validate(dict(r)) for r in records]


async def list_participants(
    conn: asyncpg.Connection, *, conversation_id: str, with_requests: bool = False
) -> list[dict[str, Any]]:
    """Participants with their DID, display name and avatar URL (for peers: their published
    profile's, else the signed ``senderName``), (for peers) A2A endpoint and whether the
    account behind them was deleted, by join order.

    With ``with_requests``, a local user's row also has its message request in the
    conversation (``request_sender_did``, ``request_state``, ``request_created_at``,
    ``request_decided_at``; None without one) and its ``privacy.message_requests``
    preference (``requests_pref``, None when unset), read by
    :func:`gateway.store.message_requests.of_participant`."""
    requests = (
        """,
                  (u.preferences_json -> 'privacy' ->> 'message_requests')::boolean
                    AS requests_pref,
                  mr.sender_did AS request_sender_did, mr.state AS request_state,
                  mr.created_at AS request_created_at, mr.decided_at AS request_decided_at"""
        if with_requests
        else ""
    )
    joined = (
        """
           LEFT JOIN message_requests mr
             ON mr.conversation_id = p.conversation_id AND mr.user_id = p.user_id"""
        if with_requests
        else ""
    )
    records = await conn.fetch(
        f"""SELECT p.id, p.participant_type, p.user_id, p.agent_id, p.peer_id, p.role,
                  p.joined_at,
                  COALESCE(u.did, a.did, pa.did) AS did,
                  COALESCE(u.display_name, u.username, a.name, pp.display_name, pa.name)
                    AS name,
                  COALESCE(u.avatar_url, a.avatar_url, pp.avatar_url) AS avatar_url,
                  pa.endpoint AS endpoint,
                  COALESCE(u.deleted_at, au.deleted_at) IS NOT NULL AS deleted{requests}
           FROM conversation_participants p
           LEFT JOIN users u ON u.id = p.user_id
           LEFT JOIN agents a ON a.id = p.agent_id
           LEFT JOIN users au ON au.id = a.user_id
           LEFT JOIN peer_agents pa ON pa.id = p.peer_id
           LEFT JOIN peer_profiles pp ON pp.peer_id = p.peer_id{joined}
           WHERE p.conversation_id = $1 ORDER BY p.id""",
        conversation_id,
    )
    return [dict(r) for r in records]


async def list_read_states(
    conn: asyncpg.Connection, *, conversation_id: str, cap: int
) -> list[dict[str, Any]]:
    """Every participant's read state (``participant_id``, ``did``, ``last_read_message_id``,
    ``last_read_at``, ``unread``), in join order: ``unread`` counts the visible messages not
    sent by the participant after its read position (all before a first read; in the
    conversation's order, :func:`gateway.store.messages.after_read`), at most
    ``cap`` (each count stops there, so a large history costs at most ``cap`` rows per
    participant)."""
    records = await conn.fetch(
        f"""SELECT p.id AS participant_id, COALESCE(u.did, a.did, pa.did) AS did,
                  r.message_id AS last_read_message_id, p.last_read_at,
                  (SELECT count(*) FROM (
                     SELECT 1 FROM messages m
                     WHERE m.conversation_id = p.conversation_id AND m.deleted_at IS NULL
                       AND m.sender_id <> COALESCE(p.user_id, p.agent_id, p.peer_id)
                       AND {after_read("m.id", "r.message_id", "p.conversation_id")}
                     LIMIT $2) unread) AS unread
           FROM conversation_participants p
           LEFT JOIN conversation_reads r ON r.participant_id = p.id
           LEFT JOIN users u ON u.id = p.user_id
           LEFT JOIN agents a ON a.id = p.agent_id
           LEFT JOIN peer_agents pa ON pa.id = p.peer_id
           WHERE p.conversation_id = $1 ORDER BY p.id""",
        conversation_id,
        cap,
    )
    return [dict(r) for r in records]


async def touch_conversation(conn: asyncpg.Connection, *, conversation_id: str) -> None:
    """Bump ``updated_at`` so the conversation sorts first in its members' lists.

    Strictly increasing per conversation (never equal to an earlier value), so it also versions
    the conversation's message set (the unread cache keys on it, ``gateway.services.unread``).
    """
    await conn.execute(
        """UPDATE conversations
           SET updated_at = GREATEST(clock_timestamp(), updated_at + interval '1 microsecond')
           WHERE id = $1""",
        conversation_id,
    )


async def list_co_participant_user_ids(conn: asyncpg.Connection, *, user_id: str) -> list[str]:
    """Ids of the local users who share a direct conversation with ``user_id`` (presence is
    kept coarse: group members are not told, which would cost O(members) per connect)."""
    records = await conn.fetch(
        """SELECT DISTINCT other.user_id FROM conversation_participants mine
           JOIN conversations c ON c.id = mine.conversation_id AND c.type LIKE 'direct%'
           JOIN conversation_participants other ON other.conversation_id = mine.conversation_id
           WHERE mine.user_id = $1 AND other.user_id IS NOT NULL AND other.user_id <> $1""",
        user_id,
    )
    return [r["user_id"] for r in records]


async def get_membership(
    conn: asyncpg.Connection, *, conversation_id: str, user_id: str, lock: bool = False
) -> ParticipantRow | None:
    """The user's own participant row in the conversation (``FOR UPDATE`` when ``lock``)."""
    record = await conn.fetchrow(
        f"""SELECT * FROM conversation_participants
            WHERE conversation_id = $1 AND user_id = $2 ORDER BY id LIMIT 1
            {"FOR UPDATE" if lock else ""}""",
        conversation_id,
        user_id,
    )
    return ParticipantRow.model_validate(dict(record)) if record else None


async def find_participant(
    conn: asyncpg.Connection, *, conversation_id: str, who: ParticipantRef
) -> ParticipantRow | None:
    """The participant row of a user, agent or peer in the conversation, if any."""
    record = await conn.fetchrow(
        f"""SELECT * FROM conversation_participants
            WHERE conversation_id = $1 AND participant_type = $2 AND {_COLUMN[who[0]]} = $3""",
        conversation_id,
        who[0],
        who[1],
    )
    return ParticipantRow.model_validate(dict(record)) if record else None


async def get_participant(
    conn: asyncpg.Connection, *, conversation_id: str, participant_id: str
) -> ParticipantRow | None:
    """A participant row by id within one conversation."""
    record = await conn.fetchrow(
        "SELECT * FROM conversation_participants WHERE id = $1 AND conversation_id = $2",
        participant_id,
        conversation_id,
    )
    return ParticipantRow.model_validate(dict(record)) if record else None


async def delete_participant(conn: asyncpg.Connection, *, participant_id: str) -> None:
    """Remove a participant row (removal or leaving)."""
    await conn.execute("DELETE FROM conversation_participants WHERE id = $1", participant_id)


async def update_participant(
    conn: asyncpg.Connection,
    *,
    participant_id: str,
    role: str | None = None,
    notification: str | None = None,
) -> ParticipantRow:
    """Change a participant's role and/or notification setting (None = unchanged)."""
    record = await conn.fetchrow(
        """UPDATE conversation_participants
           SET role = COALESCE($2, role), notification = COALESCE($3, notification)
           WHERE id = $1 RETURNING *""",
        participant_id,
        role,
        notification,
    )
    assert record is not None
    return ParticipantRow.model_validate(dict(record))


async def promote_oldest_member(conn: asyncpg.Connection, *, conversation_id: str) -> None:
    """Make the earliest-joined local user an admin when the conversation has no admin left."""
    await conn.execute(
        """UPDATE conversation_participants SET role = 'admin'
           WHERE id = (
             SELECT id FROM conversation_participants
             WHERE conversation_id = $1 AND participant_type = 'user'
               AND NOT EXISTS (SELECT 1 FROM conversation_participants
                               WHERE conversation_id = $1 AND role = 'admin')
             ORDER BY joined_at, id LIMIT 1)""",
        conversation_id,
    )


async def update_conversation(
    conn: asyncpg.Connection, *, conversation_id: str, name: str | None, archived: bool | None
) -> ConversationRow:
    """Rename and/or (un)archive a conversation; None leaves a field as it is."""
    record = await conn.fetchrow(
        """UPDATE conversations SET
             name = COALESCE($2, name),
             archived_at = CASE WHEN $3::boolean IS NULL THEN archived_at
                                WHEN $3 THEN COALESCE(archived_at, NOW()) ELSE NULL END,
             updated_at = GREATEST(clock_timestamp(), updated_at + interval '1 microsecond')
           WHERE id = $1 RETURNING *""",
        conversation_id,
        name,
        archived,
    )
    assert record is not None
    return ConversationRow.model_validate(dict(record))


async def lock_conversation(conn: asyncpg.Connection, *, conversation_id: str) -> None:
    """Serialise membership changes of one conversation (row lock until commit)."""
    await conn.execute("SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE", conversation_id)


async def lock_conversation_archived_at(
    conn: asyncpg.Connection, *, conversation_id: str
) -> datetime | None:
    """Lock the conversation's row until commit and return its ``archived_at`` (None while
    open, and for an unknown id)."""
    archived: datetime | None = await conn.fetchval(
        "SELECT archived_at FROM conversations WHERE id = $1 FOR UPDATE", conversation_id
    )
    return archived
