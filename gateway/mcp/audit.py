"""Audited writes for MCP tools: the write and its audit row commit together (MCP server spec).

A write that fails leaves no data but does leave an audit row with ``success = false`` and the
error, written in a transaction of its own after the failed one rolled back.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
from pydantic import ValidationError

from gateway.db import Transaction, transaction
from gateway.errors import ConferError
from gateway.store.mcp_audit import insert_mcp_audit

log = logging.getLogger(__name__)

WriteAction = Callable[[Transaction], Awaitable[tuple[dict[str, Any], str | None]]]


_TEXT_ERRORS = (
    asyncpg.exceptions.CharacterNotInRepertoireError,
    asyncpg.exceptions.UntranslatableCharacterError,
)


def describe_error(exc: Exception) -> tuple[str, str]:
    """``(code, detail)`` of a tool failure, with the REST API's codes (``gateway.errors``): the
    ConferError's wire code, ``validation_failed`` for bad arguments, ``invalid_text`` for text
    PostgreSQL cannot hold (U+0000), ``invalid_input`` for other values it cannot store."""
    if isinstance(exc, _TEXT_ERRORS):
        return "invalid_text", "text must not contain the NUL character (U+0000)"
    if isinstance(exc, asyncpg.DataError):
        return "invalid_input", "a value cannot be stored (too long or out of range)"
    if isinstance(exc, ConferError):
        return getattr(exc, "wire_code", None) or exc.code, exc.detail
    if isinstance(exc, ValidationError):
        fields = ", ".join(".".join(str(p) for p in e["loc"]) or "input" for e in exc.errors())
        return "validation_failed", f"invalid fields: {fields}"
    return "internal_error", "unexpected error"


async def audited_write(
    pool: asyncpg.Pool,
    *,
    user_id: str,
    agent: str,
    tool_name: str,
    payload: dict[str, Any],
    target_table: str,
    action: WriteAction,
) -> dict[str, Any]:
    """Run ``action(tx)`` and the audit insert in one unit of work.

    ``action`` returns ``(result fields, target id)``; what it registers with
    ``tx.call_after`` (stream publishes, agent dispatches) runs once both have committed.
    Returns ``{"ok": True, …result, "audit_id"}`` or, on failure, ``{"ok": False, "code",
    "error", "audit_id"}``.
    """
    try:
        async with transaction(pool) as tx:
            result, target_id = await action(tx)
            audit_id = await insert_mcp_audit(
                tx.conn,
                user_id=user_id,
                agent=agent,
                tool_name=tool_name,
                payload=payload,
                target_id=target_id,
                target_table=target_table,
                success=True,
            )
    except Exception as exc:
        code, detail = describe_error(exc)
        if code == "internal_error":
            log.exception("MCP tool %s failed", tool_name)
        return await audited_failure(
            pool,
            user_id=user_id,
            agent=agent,
            tool_name=tool_name,
            payload=payload,
            target_table=target_table,
            code=code,
            detail=detail,
        )
    return {"ok": True, **result, "audit_id": audit_id}


async def audited_failure(
    pool: asyncpg.Pool,
    *,
    user_id: str,
    agent: str,
    tool_name: str,
    payload: dict[str, Any],
    target_table: str | None,
    code: str,
    detail: str,
) -> dict[str, Any]:
    """Record a failed write-tool call (``success = false``, ``error_message`` ``"<code>:
    <detail>"``) in a transaction of its own; returns ``{"ok": False, "code", "error",
    "audit_id"}``, the shape of every refused write."""
    async with pool.acquire() as conn:
        audit_id = await insert_mcp_audit(
            conn,
            user_id=user_id,
            agent=agent,
            tool_name=tool_name,
            payload=payload,
            target_id=None,
            target_table=target_table,
            success=False,
            error_message=f"{code}: {detail}",
        )
    return {"ok": False, "code": code, "error": detail, "audit_id": audit_id}


def guarded(
    tool: Callable[..., Awaitable[dict[str, Any]]],
) -> Callable[..., Awaitable[dict[str, Any]]]:
    """Wrap a read tool so that a caller's mistake (unknown id, bad value, expired token)
    comes back as ``{"ok": False, "code", "error"}`` instead of an opaque tool exception."""

    @functools.wraps(tool)
    async def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return await tool(*args, **kwargs)
        except (ConferError, ValidationError, asyncpg.DataError) as exc:
            code, detail = describe_error(exc)
            return {"ok": False, "code": code, "error": detail}

    return wrapper
