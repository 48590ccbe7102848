"""``audit_log`` rows: A2A traffic and security-relevant operations (data model: audit_log)."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from gateway.ids import new_id


def storable(value: Any) -> Any:
    """``value`` with NUL characters removed from every string (PostgreSQL text cannot hold
    them), so that an audit row of a hostile request can always be written."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


async def insert_audit(
    conn: asyncpg.Connection,
    *,
    action: str,
    user_id: str | None = None,
    details: dict[str, Any] | None = None,
    ip_address: str | None = None,
) -> str:
    """Append one audit row; returns its id. ``ip_address`` must be a valid INET or None."""
    audit_id = new_id()
    await conn.execute(
        """INSERT INTO audit_log (id, user_id, action, details_json, ip_address)
           VALUES ($1, $2, $3, $4, $5::inet)""",
        audit_id,
        user_id,
        action,
        storable(details),
        ip_address,
    )
    return audit_id


async def insert_audits(
    conn: asyncpg.Connection,
    *,
    action: str,
    details: list[dict[str, Any]],
    user_id: str | None = None,
    ip_address: str | None = None,
) -> list[str]:
    """Append one audit row of ``action`` per ``details`` entry, all of ``user_id`` from
    ``ip_address`` (a valid INET or None), in one statement (as many :func:`insert_audit`
    calls would, in order); returns their ids."""
    ids = [new_id() for _ in details]
    if ids:
        await conn.execute(
            """INSERT INTO audit_log (id, user_id, action, details_json, ip_address)
               SELECT t.id, $4, $2, t.details::jsonb, $5::inet
               FROM unnest($1::text[], $3::text[]) WITH ORDINALITY AS t(id, details, n)
               ORDER BY t.n""",
            ids,
            action,
            [json.dumps(storable(d)) for d in details],
            user_id,
            ip_address,
        )
    return ids


async def list_audit(
    conn: asyncpg.Connection, *, action_prefix: str = "", limit: int = 100
) -> list[dict[str, Any]]:
    """Newest audit rows whose action starts with ``action_prefix``."""
    records = await conn.fetch(
        """SELECT id, user_id, action, details_json, host(ip_address) AS ip_address, created_at
           FROM audit_log WHERE action LIKE $1 || '%' ORDER BY id DESC LIMIT $2""",
        action_prefix,
        limit,
    )
    return [dict(r) for r in records]
