"""``instance_keys``: the instance's Ed25519 private keys (migration 0002)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg


@dataclass(frozen=True)
class InstanceKeyRow:
    """One key: ``fragment`` names its verification method (``did#fragment``)."""

    id: str
    purpose: str
    fragment: str
    private_key: bytes
    created_at: datetime
    retired_at: datetime | None


async def list_keys(conn: asyncpg.Connection, *, purpose: str) -> list[InstanceKeyRow]:
    """Keys of ``purpose`` not yet removed, oldest first (retired ones included)."""
    records = await conn.fetch(
        """SELECT id, purpose, fragment, private_key, created_at, retired_at
           FROM instance_keys WHERE purpose = $1 AND removed_at IS NULL ORDER BY id""",
        purpose,
    )
    return [InstanceKeyRow(**dict(r)) for r in records]


async def insert_key_if_none(
    conn: asyncpg.Connection, *, id: str, purpose: str, fragment: str, private_key: bytes
) -> None:
    """Insert an active key unless one is already active for ``purpose`` (safe under races)."""
    await conn.execute(
        """INSERT INTO instance_keys (id, purpose, fragment, private_key)
           VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING""",
        id,
        purpose,
        fragment,
        private_key,
    )


async def retire_active_key(conn: asyncpg.Connection, *, purpose: str, now: datetime) -> None:
    """Stop signing with the active key of ``purpose`` (it stays listed until removed)."""
    await conn.execute(
        "UPDATE instance_keys SET retired_at = $2 WHERE purpose = $1 AND retired_at IS NULL",
        purpose,
        now,
    )


async def insert_key(
    conn: asyncpg.Connection, *, id: str, purpose: str, fragment: str, private_key: bytes
) -> None:
    """Insert a new active key (the previous one must be retired first)."""
    await conn.execute(
        """INSERT INTO instance_keys (id, purpose, fragment, private_key)
           VALUES ($1, $2, $3, $4)""",
        id,
        purpose,
        fragment,
        private_key,
    )


async def remove_key(
    conn: asyncpg.Connection, *, purpose: str, fragment: str, now: datetime
) -> bool:
    """Unlist a retired key from DID documents (it stops verifying); False if none matched."""
    status: str = await conn.execute(
        """UPDATE instance_keys SET removed_at = $3
           WHERE purpose = $1 AND fragment = $2 AND retired_at IS NOT NULL
             AND removed_at IS NULL""",
        purpose,
        fragment,
        now,
    )
    return status.endswith(" 1")


async def count_fragments(conn: asyncpg.Connection, *, purpose: str) -> int:
    """How many keys ``purpose`` ever had (removed ones included), to name the next one."""
    return int(
        await conn.fetchval("SELECT count(*) FROM instance_keys WHERE purpose = $1", purpose)
    )


async def lock_keys(conn: asyncpg.Connection) -> None:
    """Lock ``instance_keys`` against concurrent writers until the transaction ends (readers
    still read): two rotations cannot pick the same fragment."""
    await conn.execute("LOCK TABLE instance_keys IN SHARE ROW EXCLUSIVE MODE")
