"""The MCP tools' bodies, one function per tool, each acting for an authenticated ``user``.

Read tools only read. Write tools validate their input with the API's own models *inside* the
audited write, so invalid input also leaves an audit row of the failure (MCP server spec).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import JsonValue

from gateway.db import Transaction
from gateway.errors import ValidationFailedError
from gateway.ids import new_id
from gateway.mcp.audit import audited_write
from gateway.mcp.deps import ToolDeps
from gateway.mcp.session_context import session_context
from gateway.services import conversations as conversations_service
from gateway.services import project_memory as project_memory_service
from gateway.services.memory import index_text
from gateway.services.search import SearchMode
from gateway.store import memories as memories_store
from gateway.store import permissions as permissions_store
from gateway.store import users as users_store
from gateway.store.mcp_audit import list_mcp_audit
from models import User
from models.api import MessageCreate
from models.context import MemoryCreate, ProjectMemoryWrite


async def list_conversations(deps: ToolDeps, user: User, *, limit: int) -> dict[str, Any]:
    """``{"conversations": [ConversationPublic…]}``."""
    items = await conversations_service.list_conversations(deps.pool, user, min(limit, 200))
    return {"conversations": [c.model_dump(mode="json") for c in items]}


async def read_messages(
    deps: ToolDeps, user: User, *, conversation_id: str, limit: int, before: str | None
) -> dict[str, Any]:
    """``{"messages": [Message…], "next_before"}``; 404-style error for foreign conversations."""
    items, next_before = await conversations_service.list_messages(
        deps.pool, user, conversation_id, before=before, limit=min(max(limit, 1), 200)
    )
    return {"messages": [m.model_dump(mode="json") for m in items], "next_before": next_before}


async def search_memory(
    deps: ToolDeps,
    user: User,
    *,
    query: str,
    project: str | None,
    domain: str | None,
    method: SearchMode,
    threshold: float | None,
    limit: int,
) -> dict[str, Any]:
    """``SearchResults`` as JSON (``GET /v1/search``; the tool's schema holds its limits)."""
    results = await deps.search.search(
        user,
        query,
        method=method,
        project=project,
        domain=domain,
        threshold=threshold,
        limit=min(max(limit, 1), 100),
    )
    return results.model_dump(mode="json")


async def get_session_context(
    deps: ToolDeps,
    user: User,
    *,
    topic: str,
    queries: list[str],
    project: str | None,
    domain: str | None,
    token_budget: int,
    limit_per_query: int,
) -> dict[str, Any]:
    """See :func:`gateway.mcp.session_context.session_context`; 1–5 queries."""
    if not 1 <= len(queries) <= 5:
        raise ValidationFailedError("queries: give between 1 and 5")
    return await session_context(
        deps.pool,
        deps.search,
        user,
        topic=topic,
        queries=queries,
        project=project,
        domain=domain,
        token_budget=max(token_budget, 100),
        limit_per_query=min(max(limit_per_query, 1), 20),
    )


async def list_pending_permissions(deps: ToolDeps, user: User, *, limit: int) -> dict[str, Any]:
    """``{"permissions": [...]}``: the user's rows with ``decision = 'pending'``."""
    async with deps.pool.acquire() as conn:
        records = await permissions_store.list_pending_with_peer(
            conn, user_id=user.id, limit=min(max(limit, 1), 200)
        )
    return {"permissions": [_jsonable(dict(r)) for r in records]}


async def get_audit_log(
    deps: ToolDeps,
    user: User,
    *,
    agent: str | None,
    tool_name: str | None,
    target_id: str | None,
    success: bool | None,
    since: datetime | None,
    limit: int,
) -> dict[str, Any]:
    """``{"count", "entries": [McpAuditRow…]}`` newest first (MCP server spec
    ``cs_get_audit_log``)."""
    async with deps.pool.acquire() as conn:
        rows = await list_mcp_audit(
            conn,
            user_id=user.id,
            agent=agent,
            tool_name=tool_name,
            target_id=target_id,
            success=success,
            since=since,
            limit=min(max(limit, 1), 200),
        )
    return {"count": len(rows), "entries": [r.model_dump(mode="json") for r in rows]}


async def send_message(
    deps: ToolDeps,
    user: User,
    *,
    conversation_id: str,
    content: str,
    in_reply_to: str | None,
    agent: str,
) -> dict[str, Any]:
    """Post as the user with ``via: claude-code``; audited with the message in one transaction."""
    payload = {"conversation_id": conversation_id, "content": content, "in_reply_to": in_reply_to}

    async def action(tx: Transaction) -> tuple[dict[str, Any], str | None]:
        data = MessageCreate(content=content, in_reply_to=in_reply_to, via="claude-code")
        message = await conversations_service.store_user_message(
            tx, deps.hub, deps.queue, user, conversation_id, data
        )
        return {"message_id": message.id, "conversation_id": conversation_id}, message.id

    # the message's events and the agent's task reach devices and workers once the audited
    # transaction has committed
    return await audited_write(
        deps.pool,
        user_id=user.id,
        agent=agent,
        tool_name="confer_send_message",
        payload=payload,
        target_table="messages",
        action=action,
    )


async def record_memory(
    deps: ToolDeps,
    user: User,
    *,
    type: str,
    content: str,
    importance: int,
    project: str | None,
    domain: str | None,
    agent: str,
) -> dict[str, Any]:
    """Store a memory of the user's main agent; audited in the same transaction."""
    payload = {
        "type": type,
        "content": content,
        "importance": importance,
        "project": project,
        "domain": domain,
    }

    async def action(tx: Transaction) -> tuple[dict[str, Any], str | None]:
        conn = tx.conn
        data = MemoryCreate.model_validate(
            {
                "type": type,
                "content": content,
                "importance": importance,
                "project_id": project,
                "domain": domain,
            }
        )
        main = await users_store.get_main_agent(conn, user_id=user.id)
        if main is None:
            raise ValidationFailedError("you have no agent to remember this")
        memory = await memories_store.insert_memory(
            conn, id=new_id(), agent_id=main.id, fields=data.model_dump()
        )
        return {"memory_id": memory.id, "agent_id": main.id}, memory.id

    result = await audited_write(
        deps.pool,
        user_id=user.id,
        agent=agent,
        tool_name="confer_record_memory",
        payload=payload,
        target_table="agent_memories",
        action=action,
    )
    if result["ok"]:
        await index_text(
            deps.pool,
            deps.embedder,
            owner_table="memory",
            owner_id=result["memory_id"],
            text=content,
        )
    return result


async def update_project_memory(
    deps: ToolDeps,
    user: User,
    *,
    project_id: str,
    peer_did: str,
    base_version: int | None,
    facts_md: str | None,
    decisions_md: str | None,
    meta: JsonValue,
    agent: str,
) -> dict[str, Any]:
    """Create or update a project-memory document (version checked); audited.

    Partial: ``facts_md``, ``decisions_md`` and ``meta`` left out (or null) keep their stored
    value; ``""`` empties a text. Validated as ``PUT /v1/project-memory/{project_id}``
    (:data:`~gateway.services.project_memory.PROJECT_ID_PATTERN`, ``ProjectMemoryWrite``).
    """
    sent = {
        name: value
        for name, value in (
            ("facts_md", facts_md),
            ("decisions_md", decisions_md),
            ("meta", meta),
            ("base_version", base_version),
        )
        if value is not None
    }
    payload = {"project_id": project_id, "peer_did": peer_did, **sent}

    async def action(tx: Transaction) -> tuple[dict[str, Any], str | None]:
        data = ProjectMemoryWrite.model_validate(sent)
        document, created = await project_memory_service.write_in(
            tx.conn,
            user,
            project_id,
            peer_did,
            data,
            if_match=None,
            via="mcp",
            keep_unset=True,
            version_field="base_version",
        )
        target = f"{project_id}:{peer_did}"
        return {"version": document.version, "created": created}, target

    return await audited_write(
        deps.pool,
        user_id=user.id,
        agent=agent,
        tool_name="confer_update_project_memory",
        payload=payload,
        target_table="project_memory",
        action=action,
    )


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}
