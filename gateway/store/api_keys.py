"""``api_keys``: bearer keys users issue for stock A2A clients (migration 0005)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from gateway.store.users import ACTIVE_OWNER


@dataclass(frozen=True)
class ApiKeyRow:
    """One key; only ``key_hash`` (SHA-256 hex) of the secret is stored."""

    id: str
    user_id: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


_COLUMNS = "id, user_id, name, prefix, created_at, last_used_at, revoked_at"


async def insert_api_key(
    conn: asyncpg.Connection, *, id: str, user_id: str, name: str, prefix: str, key_hash: str
) -> ApiKeyRow:
    """Store a new key."""
    record = await conn.fetchrow(
        f"""INSERT INTO api_keys (id, user_id, name, prefix, key_hash)
            VALUES ($1, $2, $3, $4, $5) RETURNING {_COLUMNS}""",
        id,
        user_id,
        name,
        prefix,
        key_hash,
    )
    assert record is not None
    return ApiKeyRow(**dict(record))


async def list_api_keys(conn: asyncpg.Connection, *, user_id: str) -> list[ApiKeyRow]:
    """The user's keys, revoked ones included, oldest first."""
    records = await conn.fetch(
        f"SELECT {_COLUMNS} FROM api_keys WHERE user_id = $1 ORDER BY id", user_id
    )
    return [ApiKeyRow(**dict(r)) for r in records]


async def revoke_api_key(
    conn: asyncpg.Connection, *, id: str, user_id: str, now: datetime
) -> ApiKeyRow | None:
    """Revoke the user's key ``id`` (idempotent); None when the user has no such key."""
    record = await conn.fetchrow(
        f"""UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $3)
            WHERE id = $1 AND user_id = $2 RETURNING {_COLUMNS}""",
        id,
        user_id,
        now,
    )
    return ApiKeyRow(**dict(record)) if record else None


async def use_api_key(
    conn: asyncpg.Connection, *, key_hash: str, now: datetime
) -> ApiKeyRow | None:
    """The live key with this hash, marking it used; None when it is unknown, revoked, or its
    owner's account is deleted or disabled."""
    record = await conn.fetchrow(
        f"""UPDATE api_keys SET last_used_at = $2
            WHERE key_hash = $1 AND revoked_at IS NULL
              AND {ACTIVE_OWNER.format(user_id="api_keys.user_id")}
            RETURNING {_COLUMNS}""",
        key_hash,
        now,
    )
    return ApiKeyRow(**dict(record)) if record else None
