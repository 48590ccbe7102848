"""``peer_agents`` (the resolved-DID cache) and ``peer_contacts`` (a user's contacts)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from gateway.ids import new_id
from models import PeerAgentRow, PeerContactRow


def _peer(record: asyncpg.Record) -> PeerAgentRow:
    return PeerAgentRow.model_validate(dict(record))


async def get_peer_by_did(conn: asyncpg.Connection, *, did: str) -> PeerAgentRow | None:
    """The cached peer for ``did``, or None."""
    record = await conn.fetchrow("SELECT * FROM peer_agents WHERE did = $1", did)
    return _peer(record) if record else None


async def get_peer(conn: asyncpg.Connection, *, id: str) -> PeerAgentRow | None:
    """The cached peer with this id, or None."""
    record = await conn.fetchrow("SELECT * FROM peer_agents WHERE id = $1", id)
    return _peer(record) if record else None


async def set_peer_name(conn: asyncpg.Connection, *, id: str, name: str) -> None:
    """Remember the display name a peer gave itself (no write when it is unchanged); the
    newest signed claim also stands for its published profile's name until that is fetched
    again (``peer_profiles``)."""
    await conn.execute(
        "UPDATE peer_agents SET name = $2, updated_at = NOW() "
        "WHERE id = $1 AND name IS DISTINCT FROM $2",
        id,
        name,
    )
    await conn.execute(
        "UPDATE peer_profiles SET display_name = $2 "
        "WHERE peer_id = $1 AND display_name IS DISTINCT FROM $2",
        id,
        name,
    )


async def save_profile(
    conn: asyncpg.Connection,
    *,
    peer_id: str,
    display_name: str | None,
    avatar_url: str | None,
    fetched_at: datetime,
) -> None:
    """Cache the public profile a peer publishes (migration 0026, ``peer_profiles``)."""
    await conn.execute(
        """INSERT INTO peer_profiles (peer_id, display_name, avatar_url, fetched_at)
           VALUES ($1, $2, $3, $4)
           ON CONFLICT (peer_id) DO UPDATE SET display_name = EXCLUDED.display_name,
             avatar_url = EXCLUDED.avatar_url, fetched_at = EXCLUDED.fetched_at""",
        peer_id,
        display_name,
        avatar_url,
        fetched_at,
    )


async def delete_profile(conn: asyncpg.Connection, *, peer_id: str) -> None:
    """Forget a peer's public profile (its document no longer lists one)."""
    await conn.execute("DELETE FROM peer_profiles WHERE peer_id = $1", peer_id)


async def get_profile(conn: asyncpg.Connection, *, peer_id: str) -> dict[str, Any] | None:
    """The cached profile of ``peer_id`` (``display_name``, ``avatar_url``, ``fetched_at``)."""
    record = await conn.fetchrow(
        "SELECT display_name, avatar_url, fetched_at FROM peer_profiles WHERE peer_id = $1",
        peer_id,
    )
    return dict(record) if record else None


async def upsert_peer(
    conn: asyncpg.Connection,
    *,
    did: str,
    name: str | None,
    endpoint: str,
    public_key_json: dict[str, Any],
    agent_facts_json: dict[str, Any],
    etag: str | None,
    fetched_at: datetime,
) -> PeerAgentRow:
    """Insert or refresh the cache row for ``did`` (keys, endpoint, ETag, fetched_at)."""
    record = await conn.fetchrow(
        """INSERT INTO peer_agents
             (id, did, name, endpoint, public_key_json, agent_facts_json, etag, fetched_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           ON CONFLICT (did) DO UPDATE SET
             name = COALESCE(EXCLUDED.name, peer_agents.name),
             endpoint = EXCLUDED.endpoint,
             public_key_json = EXCLUDED.public_key_json,
             agent_facts_json = EXCLUDED.agent_facts_json,
             etag = EXCLUDED.etag,
             fetched_at = EXCLUDED.fetched_at,
             updated_at = NOW()
           RETURNING *""",
        new_id(),
        did,
        name,
        endpoint,
        public_key_json,
        agent_facts_json,
        etag,
        fetched_at,
    )
    assert record is not None
    return _peer(record)


async def touch_peer(conn: asyncpg.Connection, *, did: str, fetched_at: datetime) -> None:
    """Mark a cached peer as revalidated (an HTTP 304) at ``fetched_at``."""
    await conn.execute("UPDATE peer_agents SET fetched_at = $2 WHERE did = $1", did, fetched_at)


async def upsert_contact(
    conn: asyncpg.Connection,
    *,
    user_id: str,
    peer_id: str,
    alias: str | None,
    added_via: str,
) -> PeerContactRow:
    """Add ``peer_id`` to the user's contacts, or update the alias of an existing contact."""
    record = await conn.fetchrow(
        """INSERT INTO peer_contacts (id, user_id, peer_id, alias, added_via)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (user_id, peer_id) DO UPDATE
             SET alias = COALESCE(EXCLUDED.alias, peer_contacts.alias)
           RETURNING *""",
        new_id(),
        user_id,
        peer_id,
        alias,
        added_via,
    )
    assert record is not None
    return PeerContactRow.model_validate(dict(record))


async def list_contacts(
    conn: asyncpg.Connection, *, user_id: str
) -> list[tuple[PeerContactRow, PeerAgentRow]]:
    """The user's contacts with their peers, oldest first."""
    records = await conn.fetch(
        """SELECT to_jsonb(c) AS contact, to_jsonb(p) AS peer FROM peer_contacts c
           JOIN peer_agents p ON p.id = c.peer_id WHERE c.user_id = $1 ORDER BY c.id""",
        user_id,
    )
    return [
        (PeerContactRow.model_validate(r["contact"]), PeerAgentRow.model_validate(r["peer"]))
        for r in records
    ]
