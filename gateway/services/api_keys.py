"""API keys: bearer credentials a user issues for stock A2A clients (A2A §4.3, §7).

A key is ``cfk_`` + 43 URL-safe characters (256 random bits). Only its SHA-256 is stored, so a
leaked database does not leak usable keys; the secret is shown once, at creation.
"""

from __future__ import annotations

import hashlib
import secrets

import asyncpg

from gateway.clock import Clock
from gateway.errors import ApiKeyInvalidError, ApiKeyNotFoundError
from gateway.ids import new_id
from gateway.store import api_keys as store
from gateway.store import audit as audit_store
from gateway.store.api_keys import ApiKeyRow
from models import User
from models.federation_api import ApiKeyIssued, ApiKeyPublic

KEY_PREFIX = "cfk_"


def hash_key(secret: str) -> str:
    """SHA-256 hex digest of a key as stored in ``api_keys.key_hash``."""
    return hashlib.sha256(secret.encode()).hexdigest()


def public(row: ApiKeyRow) -> ApiKeyPublic:
    """The listing view of a key."""
    return ApiKeyPublic(
        id=row.id,
        name=row.name,
        prefix=row.prefix,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
    )


async def issue(pool: asyncpg.Pool, user: User, name: str) -> ApiKeyIssued:
    """Create a key for ``user``; the returned ``key`` is the only copy of the secret."""
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    async with pool.acquire() as conn, conn.transaction():
        row = await store.insert_api_key(
            conn,
            id=new_id(),
            user_id=user.id,
            name=name,
            prefix=secret[:12],
            key_hash=hash_key(secret),
        )
        await audit_store.insert_audit(
            conn, action="api_key.created", user_id=user.id, details={"api_key_id": row.id}
        )
    return ApiKeyIssued(**public(row).model_dump(), key=secret)


async def list_keys(pool: asyncpg.Pool, user: User) -> list[ApiKeyPublic]:
    """The user's keys, revoked ones included, oldest first."""
    async with pool.acquire() as conn:
        return [public(r) for r in await store.list_api_keys(conn, user_id=user.id)]


async def revoke(pool: asyncpg.Pool, clock: Clock, user: User, key_id: str) -> ApiKeyPublic:
    """Revoke one of the user's keys (idempotent). Raises ApiKeyNotFoundError."""
    async with pool.acquire() as conn, conn.transaction():
        row = await store.revoke_api_key(conn, id=key_id, user_id=user.id, now=clock.now())
        if row is None:
            raise ApiKeyNotFoundError(f"no API key {key_id}")
        await audit_store.insert_audit(
            conn, action="api_key.revoked", user_id=user.id, details={"api_key_id": key_id}
        )
    return public(row)


async def authenticate(pool: asyncpg.Pool, clock: Clock, secret: str) -> ApiKeyRow:
    """The live key behind ``secret``. Raises ApiKeyInvalidError (unknown or revoked)."""
    if not secret.startswith(KEY_PREFIX) or len(secret) > 256:
        raise ApiKeyInvalidError("not a Confer API key")
    async with pool.acquire() as conn:
        row = await store.use_api_key(conn, key_hash=hash_key(secret), now=clock.now())
    if row is None:
        raise ApiKeyInvalidError("unknown or revoked API key")
    return row
