"""``peer_contacts`` beyond add-and-list: read, update, remove, settings for the door check.

The data model gives ``peer_contacts`` no trust column, so a contact's trust level travels in
``policy_overrides_json`` next to its policy overrides:
``{"trust_level": "blocked" | "unknown" | "known" | "trusted", "default": …, "rules": […]}``.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.ids import new_id
from models import PeerAgentRow, PeerContactRow

_UPDATABLE = ("alias", "tags", "pinned", "muted", "policy_overrides_json")


def _pair(record: asyncpg.Record) -> tuple[PeerContactRow, PeerAgentRow]:
    return (
        PeerContactRow.model_validate(record["contact"]),
        PeerAgentRow.model_validate(record["peer"]),
    )


async def get_contact(
    conn: asyncpg.Connection, *, id: str, user_id: str, lock: bool = False
) -> tuple[PeerContactRow, PeerAgentRow] | None:
    """The user's contact ``id`` with its peer, or None; ``lock`` holds the contact row
    (``FOR UPDATE``) until the transaction ends."""
    record = await conn.fetchrow(
        """SELECT to_jsonb(c) AS contact, to_jsonb(p) AS peer FROM peer_contacts c
           JOIN peer_agents p ON p.id = c.peer_id WHERE c.id = $1 AND c.user_id = $2"""
        + (" FOR UPDATE OF c" if lock else ""),
        id,
        user_id,
    )
    return _pair(record) if record else None


async def get_contact_for_peer(
    conn: asyncpg.Connection, *, user_id: str, peer_id: str, lock: bool = False
) -> PeerContactRow | None:
    """The user's contact entry for ``peer_id``, or None; ``lock`` holds the row
    (``FOR UPDATE``) until the transaction ends."""
    record = await conn.fetchrow(
        "SELECT * FROM peer_contacts WHERE user_id = $1 AND peer_id = $2"
        + (" FOR UPDATE" if lock else ""),
        user_id,
        peer_id,
    )
    return PeerContactRow.model_validate(dict(record)) if record else None


async def get_contacts_for_peer_and_instance(
    conn: asyncpg.Connection, *, user_id: str, peer_id: str, instance_did: str
) -> tuple[PeerContactRow | None, PeerContactRow | None]:
    """The user's contact entry for ``peer_id`` and the one for the peer with DID
    ``instance_did`` (the instance the peer lives on), each None when missing (the instance
    unknown as a peer, too); one statement."""
    records = await conn.fetch(
        """SELECT * FROM peer_contacts WHERE user_id = $1
             AND (peer_id = $2 OR peer_id = (SELECT id FROM peer_agents WHERE did = $3))""",
        user_id,
        peer_id,
        instance_did,
    )
    rows = [PeerContactRow.model_validate(dict(record)) for record in records]
    own = next((row for row in rows if row.peer_id == peer_id), None)
    instance = next((row for row in rows if row.peer_id != peer_id), None)
    return own, instance


async def ensure_contact(
    conn: asyncpg.Connection, *, user_id: str, peer_id: str, added_via: str
) -> PeerContactRow:
    """The user's contact entry for ``peer_id``, inserted when missing, locked (``FOR UPDATE``)
    until the transaction ends so that a change computed from it is not lost to a concurrent
    one. A concurrent insert of the same pair is waited for (``ON CONFLICT DO NOTHING``) and
    then read."""
    await conn.execute(
        """INSERT INTO peer_contacts (id, user_id, peer_id, added_via) VALUES ($1, $2, $3, $4)
           ON CONFLICT (user_id, peer_id) DO NOTHING""",
        new_id(),
        user_id,
        peer_id,
        added_via,
    )
    existing = await get_contact_for_peer(conn, user_id=user_id, peer_id=peer_id, lock=True)
    assert existing is not None
    return existing


async def update_contact(
    conn: asyncpg.Connection, *, id: str, user_id: str, fields: dict[str, Any]
) -> PeerContactRow | None:
    """Set the given columns (only those of ``_UPDATABLE``); None when there is no such contact."""
    columns = [c for c in fields if c in _UPDATABLE]
    assignments = ", ".join(f"{c} = ${i + 3}" for i, c in enumerate(columns))
    query = (
        f"UPDATE peer_contacts SET {assignments} WHERE id = $1 AND user_id = $2 RETURNING *"
        if columns
        else "SELECT * FROM peer_contacts WHERE id = $1 AND user_id = $2"
    )
    record = await conn.fetchrow(query, id, user_id, *(fields[c] for c in columns))
    return PeerContactRow.model_validate(dict(record)) if record else None


async def delete_contact(conn: asyncpg.Connection, *, id: str, user_id: str) -> bool:
    """Remove the user's contact ``id``; False when there was none."""
    status: str = await conn.execute(
        "DELETE FROM peer_contacts WHERE id = $1 AND user_id = $2", id, user_id
    )
    return status.endswith(" 1")


async def get_contact_peer_id(
    conn: asyncpg.Connection, *, user_id: str, peer_did: str
) -> str | None:
    """The ``peer_agents`` id of ``peer_did`` when it is one of the user's contacts."""
    peer_id = await conn.fetchval(
        """SELECT pa.id FROM peer_agents pa
           JOIN peer_contacts pc ON pc.peer_id = pa.id AND pc.user_id = $1
           WHERE pa.did = $2""",
        user_id,
        peer_did,
    )
    return None if peer_id is None else str(peer_id)
