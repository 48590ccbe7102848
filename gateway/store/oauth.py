"""OAuth rows: dynamically registered clients, authorization requests, grants (migration 0018)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg


async def insert_client(
    conn: asyncpg.Connection,
    *,
    client_id: str,
    client_name: str | None,
    redirect_uris: list[str],
    metadata: dict[str, Any],
) -> None:
    """Record a client registered per RFC 7591."""
    await conn.execute(
        """INSERT INTO oauth_clients (client_id, client_name, redirect_uris, metadata)
           VALUES ($1, $2, $3, $4)""",
        client_id,
        client_name,
        redirect_uris,
        metadata,
    )


async def get_client(conn: asyncpg.Connection, *, client_id: str) -> dict[str, Any] | None:
    """A registered client (``client_id``, ``client_name``, ``redirect_uris``, ``metadata``)."""
    record = await conn.fetchrow("SELECT * FROM oauth_clients WHERE client_id = $1", client_id)
    return dict(record) if record else None


async def insert_authorization(
    conn: asyncpg.Connection,
    *,
    id: str,
    client_id: str,
    client_name: str | None,
    redirect_uri: str,
    code_challenge: str,
    state: str | None,
    resource: str,
    scope: str,
    expires_at: datetime,
    now: datetime,
) -> None:
    """Record an authorization request awaiting consent; also drops up to 100 requests that
    expired over an hour before ``now`` (so the table stays bounded without a worker)."""
    await conn.execute(
        """DELETE FROM oauth_authorizations WHERE id IN (
             SELECT id FROM oauth_authorizations
             WHERE expires_at < $1::timestamptz - interval '1 hour' LIMIT 100)""",
        now,
    )
    await conn.execute(
        """INSERT INTO oauth_authorizations (id, client_id, client_name, redirect_uri,
             code_challenge, state, resource, scope, expires_at, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)""",
        id,
        client_id,
        client_name,
        redirect_uri,
        code_challenge,
        state,
        resource,
        scope,
        expires_at,
        now,
    )


async def get_pending_authorization(
    conn: asyncpg.Connection, *, id: str, now: datetime
) -> dict[str, Any] | None:
    """The authorization request ``id`` while it still awaits consent (not expired)."""
    record = await conn.fetchrow(
        """SELECT * FROM oauth_authorizations
           WHERE id = $1 AND user_id IS NULL AND expires_at > $2""",
        id,
        now,
    )
    return dict(record) if record else None


async def approve_authorization(
    conn: asyncpg.Connection,
    *,
    id: str,
    user_id: str,
    code_hash: str,
    expires_at: datetime,
    now: datetime,
) -> dict[str, Any] | None:
    """Bind a pending request to the approving user and its code; None if no longer pending."""
    record = await conn.fetchrow(
        """UPDATE oauth_authorizations
           SET user_id = $2, code_hash = $3, expires_at = $4
           WHERE id = $1 AND user_id IS NULL AND expires_at > $5
           RETURNING *""",
        id,
        user_id,
        code_hash,
        expires_at,
        now,
    )
    return dict(record) if record else None


async def delete_authorization(conn: asyncpg.Connection, *, id: str) -> dict[str, Any] | None:
    """Delete a request (consent denied); the deleted row, or None."""
    record = await conn.fetchrow(
        "DELETE FROM oauth_authorizations WHERE id = $1 AND user_id IS NULL RETURNING *", id
    )
    return dict(record) if record else None


async def use_code(
    conn: asyncpg.Connection, *, code_hash: str, now: datetime
) -> dict[str, Any] | None:
    """Mark the code's authorization used and return it as it was before (``used_at`` set means
    it had been used already); None for an unknown code. Locks the row."""
    record = await conn.fetchrow(
        """WITH old AS (
             SELECT * FROM oauth_authorizations WHERE code_hash = $1 FOR UPDATE)
           UPDATE oauth_authorizations a SET used_at = COALESCE(a.used_at, $2)
           FROM old WHERE a.id = old.id
           RETURNING old.*""",
        code_hash,
        now,
    )
    return dict(record) if record else None


async def set_authorization_session(conn: asyncpg.Connection, *, id: str, session_id: str) -> None:
    """Remember the session a code was exchanged for."""
    await conn.execute(
        "UPDATE oauth_authorizations SET session_id = $2 WHERE id = $1", id, session_id
    )


async def insert_grant(
    conn: asyncpg.Connection,
    *,
    session_id: str,
    user_id: str,
    client_id: str,
    client_name: str | None,
    resource: str,
    scope: str,
) -> None:
    """Mark session ``session_id`` as an OAuth grant to ``client_id`` for ``resource``."""
    await conn.execute(
        """INSERT INTO oauth_grants (session_id, user_id, client_id, client_name, resource, scope)
           VALUES ($1, $2, $3, $4, $5, $6)""",
        session_id,
        user_id,
        client_id,
        client_name,
        resource,
        scope,
    )


async def get_grant(conn: asyncpg.Connection, *, session_id: str) -> dict[str, Any] | None:
    """The grant of a session, or None (a device session, or revoked)."""
    record = await conn.fetchrow("SELECT * FROM oauth_grants WHERE session_id = $1", session_id)
    return dict(record) if record else None


async def list_grants(
    conn: asyncpg.Connection, *, user_id: str, now: datetime
) -> list[dict[str, Any]]:
    """The user's grants whose session is live, newest first, with the session's times."""
    records = await conn.fetch(
        """SELECT g.*, s.last_active_at, s.expires_at FROM oauth_grants g
           JOIN sessions s ON s.id = g.session_id
           WHERE g.user_id = $1 AND s.expires_at > $2
           ORDER BY g.created_at DESC, g.session_id DESC""",
        user_id,
        now,
    )
    return [dict(r) for r in records]
