"""The instance's recorded identity (migration 0014): one row, its DID and public URL."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg


@dataclass(frozen=True)
class InstanceRow:
    """The DID and public URL the instance is served under."""

    did: str
    public_url: str


async def get_instance(conn: asyncpg.Connection) -> InstanceRow | None:
    """The recorded identity, or None before the first start that recorded it."""
    row = await conn.fetchrow("SELECT did, public_url FROM instance_identity")
    return InstanceRow(row["did"], row["public_url"]) if row else None


async def upsert_instance(conn: asyncpg.Connection, *, did: str, public_url: str) -> None:
    """Record ``did`` and ``public_url`` (replacing what was recorded)."""
    await conn.execute(
        """INSERT INTO instance_identity (did, public_url) VALUES ($1, $2)
           ON CONFLICT (singleton) DO UPDATE
             SET did = EXCLUDED.did, public_url = EXCLUDED.public_url, updated_at = NOW()
           WHERE instance_identity.did IS DISTINCT FROM EXCLUDED.did
              OR instance_identity.public_url IS DISTINCT FROM EXCLUDED.public_url""",
        did,
        public_url,
    )
