"""``group_replicas`` rows, and the lookups that tell a group's messages from direct ones."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import asyncpg

from models import ConversationRow, ParticipantRole

_WITH_DIDS = """conversation_participants p
       LEFT JOIN users u ON u.id = p.user_id
       LEFT JOIN agents a ON a.id = p.agent_id
       LEFT JOIN peer_agents pa ON pa.id = p.peer_id"""
_DID = "COALESCE(u.did, a.did, pa.did)"
"""A participant's DID (user, own agent or peer) over :data:`_WITH_DIDS`."""


@dataclass(frozen=True)
class ReplicaRow:
    """Table ``group_replicas``: the local conversation mirroring group ``remote_id`` of the
    home instance ``home`` (an instance DID), with the member DIDs the home last announced
    and the roles it gave them (DID → ``admin`` / ``observer``; migration 0029)."""

    conversation_id: str
    home: str
    remote_id: str
    members: list[str]
    roles: dict[str, ParticipantRole] = field(default_factory=dict)


_ROLES: frozenset[str] = frozenset(("admin", "member", "observer"))


def _replica(record: asyncpg.Record) -> ReplicaRow:
    members, roles = record["members"], record["roles"]
    return ReplicaRow(
        record["conversation_id"],
        record["home"],
        record["remote_id"],
        [m for m in members if isinstance(m, str)] if isinstance(members, list) else [],
        {k: v for k, v in roles.items() if v in _ROLES} if isinstance(roles, dict) else {},
    )


async def get_replica(conn: asyncpg.Connection, *, conversation_id: str) -> ReplicaRow | None:
    """The replica row of a local conversation, or None (a home group or not a group)."""
    record = await conn.fetchrow(
        "SELECT * FROM group_replicas WHERE conversation_id = $1", conversation_id
    )
    return _replica(record) if record else None


async def find_replica(conn: asyncpg.Connection, *, home: str, remote_id: str) -> ReplicaRow | None:
    """The replica of the home's group ``remote_id``, or None."""
    record = await conn.fetchrow(
        "SELECT * FROM group_replicas WHERE home = $1 AND remote_id = $2", home, remote_id
    )
    return _replica(record) if record else None


async def insert_replica(
    conn: asyncpg.Connection,
    *,
    conversation_id: str,
    home: str,
    remote_id: str,
    members: list[str],
    roles: Mapping[str, str] | None = None,
) -> ReplicaRow:
    """Record that ``conversation_id`` mirrors the home's group ``remote_id``."""
    record = await conn.fetchrow(
        """INSERT INTO group_replicas (conversation_id, home, remote_id, members, roles)
           VALUES ($1, $2, $3, $4, $5) RETURNING *""",
        conversation_id,
        home,
        remote_id,
        members,
        dict(roles or {}),
    )
    assert record is not None
    return _replica(record)


async def update_replica_members(
    conn: asyncpg.Connection,
    *,
    conversation_id: str,
    members: list[str],
    roles: Mapping[str, str] | None = None,
) -> None:
    """Replace the member list the home announced, and its roles when given (a message's
    claim carries none: they stay as the last event set them)."""
    await conn.execute(
        """UPDATE group_replicas SET members = $2, roles = COALESCE($3, roles),
             updated_at = NOW()
           WHERE conversation_id = $1""",
        conversation_id,
        members,
        dict(roles) if roles is not None else None,
    )


async def get_conversation_kind(
    conn: asyncpg.Connection, *, conversation_id: str
) -> tuple[str, str | None] | None:
    """``(type, name)`` of a conversation (``group``, ``direct_…``), None for an unknown id."""
    record = await conn.fetchrow(
        "SELECT type, name FROM conversations WHERE id = $1", conversation_id
    )
    return (str(record["type"]), record["name"]) if record else None


async def list_known_peer_dids(conn: asyncpg.Connection, *, dids: list[str]) -> set[str]:
    """Those of ``dids`` that have a ``peer_agents`` row."""
    records = await conn.fetch("SELECT did FROM peer_agents WHERE did = ANY($1::text[])", dids)
    return {r["did"] for r in records}


async def list_member_dids(conn: asyncpg.Connection, *, conversation_id: str) -> list[str]:
    """The DIDs of every participant (users, own agents, peers), by join order."""
    return [did for did, _ in await list_member_roles(conn, conversation_id=conversation_id)]


async def find_group_copy(
    conn: asyncpg.Connection, *, origin_did: str, remote_message_id: str, conversation_id: str
) -> str | None:
    """Our id of the origin's message ``remote_message_id`` when it is already stored in the
    group ``conversation_id`` (delivered earlier for another local member), else None."""
    value = await conn.fetchval(
        """SELECT i.message_id FROM federation_inbox i
           JOIN messages m ON m.id = i.message_id
           WHERE i.origin_did = $1 AND i.remote_message_id = $2 AND m.conversation_id = $3
           LIMIT 1""",
        origin_did,
        remote_message_id,
        conversation_id,
    )
    return str(value) if value is not None else None


async def list_member_roles(
    conn: asyncpg.Connection, *, conversation_id: str
) -> list[tuple[str, str]]:
    """``(did, role)`` of every participant with a DID, by join order."""
    records = await conn.fetch(
        f"""SELECT {_DID} AS did, p.role FROM {_WITH_DIDS}
            WHERE p.conversation_id = $1 ORDER BY p.id""",
        conversation_id,
    )
    return [(str(r["did"]), str(r["role"])) for r in records if r["did"]]


async def get_archived(conn: asyncpg.Connection, *, conversation_id: str) -> bool:
    """True when the conversation is archived."""
    return bool(
        await conn.fetchval(
            "SELECT archived_at IS NOT NULL FROM conversations WHERE id = $1", conversation_id
        )
    )


async def find_participant_by_did(
    conn: asyncpg.Connection, *, conversation_id: str, did: str
) -> str | None:
    """The participant id of the user, agent or peer with DID ``did`` in the conversation."""
    value = await conn.fetchval(
        f"""SELECT p.id FROM {_WITH_DIDS}
            WHERE p.conversation_id = $1 AND {_DID} = $2 ORDER BY p.id LIMIT 1""",
        conversation_id,
        did,
    )
    return str(value) if value is not None else None


async def get_participant_did(conn: asyncpg.Connection, *, participant_id: str) -> str | None:
    """The DID of a participant (user, agent or peer), or None."""
    value = await conn.fetchval(
        f"SELECT {_DID} FROM {_WITH_DIDS} WHERE p.id = $1",
        participant_id,
    )
    return str(value) if value is not None else None


async def get_conversation(
    conn: asyncpg.Connection, *, conversation_id: str
) -> ConversationRow | None:
    """A conversation by id, whoever takes part (a home group acted on by a remote member)."""
    record = await conn.fetchrow("SELECT * FROM conversations WHERE id = $1", conversation_id)
    return ConversationRow.model_validate(dict(record)) if record else None


async def next_version(conn: asyncpg.Connection, *, conversation_id: str) -> int:
    """Count one more change of our group's state; returns the new version (1 for the first).
    Table ``group_versions`` (migration 0023)."""
    version = await conn.fetchval(
        """INSERT INTO group_versions (conversation_id, version) VALUES ($1, 1)
           ON CONFLICT (conversation_id) DO UPDATE
           SET version = group_versions.version + 1, updated_at = NOW()
           RETURNING version""",
        conversation_id,
    )
    return int(version)


async def get_version(conn: asyncpg.Connection, *, conversation_id: str) -> int:
    """The version of a group's state held here (issued at the home, taken at a replica);
    0 when none was recorded."""
    version = await conn.fetchval(
        "SELECT version FROM group_versions WHERE conversation_id = $1", conversation_id
    )
    return int(version) if version is not None else 0


async def set_version(conn: asyncpg.Connection, *, conversation_id: str, version: int) -> None:
    """Record that a replica now holds the home's state ``version`` (never moves back)."""
    await conn.execute(
        """INSERT INTO group_versions (conversation_id, version) VALUES ($1, $2)
           ON CONFLICT (conversation_id) DO UPDATE
           SET version = EXCLUDED.version, updated_at = NOW()
           WHERE group_versions.version < EXCLUDED.version""",
        conversation_id,
        version,
    )


async def get_remote_term(
    conn: asyncpg.Connection, *, message_id: str, origin_instance: str | None
) -> str | None:
    """The id another instance gave our message ``message_id`` when it sent it to us (from
    ``federation_inbox``): from a member of ``origin_instance`` (an instance DID), or with
    None from anyone; None when no such row (the message is ours, or came from elsewhere)."""
    value = await conn.fetchval(
        """SELECT remote_message_id FROM federation_inbox
           WHERE message_id = $1
             AND ($2::text IS NULL OR origin_did = $2 OR starts_with(origin_did, $2 || ':'))
           ORDER BY created_at LIMIT 1""",
        message_id,
        origin_instance,
    )
    return value  # type: ignore[no-any-return]


async def find_named_message(
    conn: asyncpg.Connection, *, conversation_id: str, named: str
) -> str | None:
    """Our visible message of ``conversation_id`` that a peer names ``named``: our own id of
    it, or the id an instance gave it when it sent it to us; None when there is none."""
    value = await conn.fetchval(
        """SELECT id FROM messages
           WHERE conversation_id = $1 AND deleted_at IS NULL
             AND (id = $2 OR id IN (SELECT message_id FROM federation_inbox
                                    WHERE remote_message_id = $2))
           ORDER BY id = $2 DESC LIMIT 1""",
        conversation_id,
        named,
    )
    return value  # type: ignore[no-any-return]


async def list_blocking_users(
    conn: asyncpg.Connection, *, peer_id: str, user_ids: list[str]
) -> set[str]:
    """Those of ``user_ids`` whose contact of ``peer_id`` is ``blocked`` (the trust level
    lives in ``peer_contacts.policy_overrides_json``, see :mod:`gateway.services.contacts`)."""
    records = await conn.fetch(
        """SELECT user_id FROM peer_contacts
           WHERE peer_id = $1 AND user_id = ANY($2::text[])
             AND policy_overrides_json ->> 'trust_level' = 'blocked'""",
        peer_id,
        user_ids,
    )
    return {r["user_id"] for r in records}
