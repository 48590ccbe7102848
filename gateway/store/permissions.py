"""``permissions``: consent requests and the owner's decisions (data model: permissions)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from models import PermissionRow


def _row(record: asyncpg.Record) -> PermissionRow:
    return PermissionRow.model_validate(dict(record))


async def insert_permission(
    conn: asyncpg.Connection,
    *,
    id: str,
    user_id: str,
    peer_id: str | None,
    action: str,
    scope: dict[str, Any],
    level: str,
    requested_by: str,
    expires_at: datetime,
) -> PermissionRow:
    """A pending request (``peer_id`` None: a local user asking through an API key)."""
    record = await conn.fetchrow(
        """INSERT INTO permissions (id, user_id, peer_id, action, scope_json, level, decision,
                                    requested_by, expires_at)
           VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8) RETURNING *""",
        id,
        user_id,
        peer_id,
        action,
        scope,
        level,
        requested_by,
        expires_at,
    )
    assert record is not None
    return _row(record)


async def get_permission(
    conn: asyncpg.Connection, *, id: str, user_id: str
) -> PermissionRow | None:
    """The user's permission ``id``, locked for update, or None."""
    record = await conn.fetchrow(
        "SELECT * FROM permissions WHERE id = $1 AND user_id = $2 FOR UPDATE", id, user_id
    )
    return _row(record) if record else None


async def decide_permission(
    conn: asyncpg.Connection,
    *,
    id: str,
    decision: str,
    decision_scope: str | None,
    decided_by: str | None,
    now: datetime,
) -> PermissionRow | None:
    """Record the decision of a still-pending request; None when it is no longer pending."""
    record = await conn.fetchrow(
        """UPDATE permissions SET decision = $2, decision_scope = $3, decided_by = $4,
                  decided_at = $5
           WHERE id = $1 AND decision = 'pending' RETURNING *""",
        id,
        decision,
        decision_scope,
        decided_by,
        now,
    )
    return _row(record) if record else None


async def find_grant(
    conn: asyncpg.Connection, *, user_id: str, peer_id: str, action: str
) -> PermissionRow | None:
    """An ``allow_always`` decision of the user covering (peer, action), newest first.

    Scope ``peer`` covers every action of that peer, ``peer_action`` that peer and action,
    ``global`` that action from any peer.
    """
    record = await conn.fetchrow(
        """SELECT * FROM permissions
           WHERE user_id = $1 AND decision = 'allow_always' AND (
                 (decision_scope = 'peer' AND peer_id = $2)
              OR (decision_scope = 'peer_action' AND peer_id = $2 AND action = $3)
              OR (decision_scope = 'global' AND action = $3))
           ORDER BY decided_at DESC LIMIT 1""",
        user_id,
        peer_id,
        action,
    )
    return _row(record) if record else None


async def find_local_grant(
    conn: asyncpg.Connection, *, user_id: str, requester_id: str, action: str
) -> PermissionRow | None:
    """An ``allow_always`` decision of the user covering a local requester's ``action``.

    Like :func:`find_grant` for requests without a peer (API-key callers): scopes ``peer`` and
    ``peer_action`` match ``requested_by``; ``global`` matches the action from anyone.
    """
    record = await conn.fetchrow(
        """SELECT * FROM permissions
           WHERE user_id = $1 AND decision = 'allow_always' AND (
                 (decision_scope = 'peer' AND peer_id IS NULL AND requested_by = $2)
              OR (decision_scope = 'peer_action' AND peer_id IS NULL AND requested_by = $2
                  AND action = $3)
              OR (decision_scope = 'global' AND action = $3))
           ORDER BY decided_at DESC LIMIT 1""",
        user_id,
        requester_id,
        action,
    )
    return _row(record) if record else None


async def list_permissions(
    conn: asyncpg.Connection, *, user_id: str, pending_only: bool, limit: int
) -> list[PermissionRow]:
    """The user's permissions, newest first."""
    records = await conn.fetch(
        """SELECT * FROM permissions WHERE user_id = $1 AND (NOT $2 OR decision = 'pending')
           ORDER BY id DESC LIMIT $3""",
        user_id,
        pending_only,
        limit,
    )
    return [_row(r) for r in records]


async def list_expired(conn: asyncpg.Connection, *, now: datetime, limit: int) -> list[str]:
    """Ids of pending requests whose ``expires_at`` has passed."""
    records = await conn.fetch(
        """SELECT id FROM permissions WHERE decision = 'pending' AND expires_at <= $1
           ORDER BY expires_at LIMIT $2""",
        now,
        limit,
    )
    return [r["id"] for r in records]


async def get_permission_by_id(conn: asyncpg.Connection, *, id: str) -> PermissionRow | None:
    """The permission ``id`` (any user), locked for update, or None."""
    record = await conn.fetchrow("SELECT * FROM permissions WHERE id = $1 FOR UPDATE", id)
    return _row(record) if record else None


async def list_pending_with_peer(
    conn: asyncpg.Connection, *, user_id: str, limit: int
) -> list[asyncpg.Record]:
    """The user's pending permission requests, newest first, with the requesting peer's DID:
    ``id``, ``action``, ``scope``, ``level``, ``requested_by``, ``expires_at``, ``created_at``,
    ``peer_did`` (None for a local request)."""
    records: list[asyncpg.Record] = await conn.fetch(
        """SELECT p.id, p.action, p.scope_json AS scope, p.level, p.requested_by,
                  p.expires_at, p.created_at, pa.did AS peer_did
           FROM permissions p LEFT JOIN peer_agents pa ON pa.id = p.peer_id
           WHERE p.user_id = $1 AND p.decision = 'pending'
           ORDER BY p.id DESC LIMIT $2""",
        user_id,
        limit,
    )
    return records
