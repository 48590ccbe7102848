"""``mcp_audit_log`` rows: the append-only audit of MCP write tools (MCP server spec)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from gateway.ids import new_id
from gateway.store.audit import storable
from models.context import McpAuditRow


async def insert_mcp_audit(
    conn: asyncpg.Connection,
    *,
    user_id: str,
    agent: str,
    tool_name: str,
    payload: Any,
    target_id: str | None,
    target_table: str | None,
    success: bool,
    error_message: str | None = None,
) -> str:
    """Append one audit row; returns its id. The table refuses UPDATE and DELETE."""
    audit_id = new_id()
    await conn.execute(
        """INSERT INTO mcp_audit_log (id, user_id, agent, tool_name, payload_json, target_id,
                                      target_table, success, error_message)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)""",
        audit_id,
        user_id,
        storable(agent[:128]),
        tool_name,
        storable(payload),  # a hostile payload must still leave its audit row
        target_id,
        target_table,
        success,
        storable(error_message),
    )
    return audit_id


async def list_mcp_audit(
    conn: asyncpg.Connection,
    *,
    user_id: str,
    agent: str | None = None,
    tool_name: str | None = None,
    target_id: str | None = None,
    success: bool | None = None,
    since: datetime | None = None,
    limit: int = 50,
) -> list[McpAuditRow]:
    """The user's audit rows matching every given filter, newest first."""
    records = await conn.fetch(
        """SELECT id, created_at, user_id, agent, tool_name, payload_json AS payload, target_id,
                  target_table, success, error_message
           FROM mcp_audit_log
           WHERE user_id = $1 AND ($2::text IS NULL OR agent = $2)
             AND ($3::text IS NULL OR tool_name = $3) AND ($4::text IS NULL OR target_id = $4)
             AND ($5::boolean IS NULL OR success = $5)
             AND ($6::timestamptz IS NULL OR created_at > $6)
           ORDER BY id DESC LIMIT $7""",
        user_id,
        agent,
        tool_name,
        target_id,
        success,
        since,
        limit,
    )
    return [McpAuditRow.model_validate(dict(r)) for r in records]
