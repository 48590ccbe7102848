"""The MCP server at ``/mcp`` (streamable HTTP, official ``mcp`` SDK 2.x ``MCPServer``).

Every request must carry ``Authorization: Bearer <access token or cfk_ API key>`` of a Confer
user (:mod:`gateway.mcp.auth`); the gate answers 401 problem+json otherwise, and each tool
authenticates the same header again, so a tool only ever acts for that user. Read tools never
modify state; write tools go through :func:`gateway.mcp.audit.audited_write`.

Every refusal is a tool result ``{"ok": false, "code", "error"}`` with the REST API's codes and
MCP's ``isError: true`` — also arguments the tool's schema rejects (``validation_failed``),
which the SDK would otherwise report as bare error text. Write tools add ``audit_id``: even
such a call leaves an audit row.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, TypeVar
from urllib.parse import urlsplit

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, JsonValue, StrictInt, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.errors import ConferError
from gateway.http_errors import problem_for
from gateway.mcp import permissions, tools
from gateway.mcp.args import (
    Agent,
    Domain,
    Flag,
    Identifier,
    Limit,
    Markdown,
    Project,
    Query,
    Short,
    Text,
    Threshold,
    Topic,
)
from gateway.mcp.audit import audited_failure, describe_error, guarded
from gateway.mcp.auth import authenticate
from gateway.mcp.concept_tools import READ, WRITE, register_concept_tools
from gateway.mcp.deps import ToolDeps
from gateway.services.oauth import protected_resource_metadata_url
from gateway.services.search import SearchMode
from gateway.settings import Settings
from models import User
from models.base import Ulid

# GET /v1/search's limits (gateway/routes/memory.py); tests/agents/test_mcp_parity.py checks both.
SearchQuery = Query
SearchThreshold = Threshold | None
SearchLimit = Annotated[StrictInt, Field(ge=1, le=100)]

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Awaitable[dict[str, Any]]])

DepsGetter = Callable[[], ToolDeps]
"""The tools' dependencies, once the app's lifespan has built them."""


async def _authenticate(deps: ToolDeps, authorization: str | None) -> User:
    return await authenticate(deps.pool, deps.clock, deps.accounts, authorization, deps.resource)


def _headers(ctx: Context) -> dict[str, str]:
    request = ctx.request_context.request
    if request is not None and hasattr(request, "headers"):
        return {k.lower(): v for k, v in request.headers.items()}
    transport = getattr(ctx, "transport", None)
    return {k.lower(): v for k, v in (getattr(transport, "headers", None) or {}).items()}


def challenge(resource: str, authorization: str | None) -> str:
    """The 401's ``WWW-Authenticate`` (RFC 6750 §3, RFC 9728 §5.1): where the resource's
    metadata is, the scope to ask for, and ``invalid_token`` when a credential was sent."""
    value = f'Bearer resource_metadata="{protected_resource_metadata_url(resource)}", scope="mcp"'
    return value + (', error="invalid_token"' if authorization else "")


class BearerGate:
    """ASGI wrapper: refuse MCP requests without a valid access token or API key (401 with an
    OAuth challenge naming the protected resource metadata)."""

    def __init__(self, app: ASGIApp, get_deps: DepsGetter) -> None:
        self._app = app
        self._get_deps = get_deps

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            deps = self._get_deps()
            authorization = headers.get("authorization")
            try:
                await _authenticate(deps, authorization)
            except ConferError as exc:
                response = problem_for(exc, scope["path"])
                if response.status_code == 401:
                    response.headers["WWW-Authenticate"] = challenge(deps.resource, authorization)
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


class ConferMCPServer(MCPServer):
    """``MCPServer`` whose every failing tool call is a result ``{"ok": false, "code",
    "error"}`` with MCP's ``isError: true`` (MCP 2025-06-18 "Tools" §Error Handling: tool
    execution errors are reported in the result, so generic hosts show them as failures).

    That covers refusals the tools return, arguments the tool's schema rejects
    (``validation_failed``, audited for write tools), a tool that raises a ConferError outside
    its own guard (its code) and a crash (``internal_error``, logged with its traceback here,
    never sent), and an unknown tool name (``not_found``).
    """

    def __init__(self, *args: Any, get_deps: DepsGetter, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._get_deps = get_deps
        self.write_tools: set[str] = set()

    def write_tool(self, annotations: ToolAnnotations | None = None) -> Callable[[F], F]:
        """Like ``tool()``, for a write tool: its argument errors leave an audit row too."""

        def register(fn: F) -> F:
            self.write_tools.add(fn.__name__)
            self.tool(annotations=annotations)(fn)
            return fn

        return register

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> Any:
        """Run the tool; every failure becomes a refusal result with ``isError`` (see class)."""
        try:
            outcome = await super().call_tool(name, arguments, context)
        except ToolError as exc:
            return _failure(await self._refusal(name, arguments, context, exc))
        if (
            isinstance(outcome, CallToolResult)
            and (outcome.structured_content or {}).get("ok") is False
        ):
            return outcome.model_copy(update={"is_error": True})
        return outcome

    async def _refusal(
        self, name: str, arguments: dict[str, Any], context: Context | None, exc: ToolError
    ) -> dict[str, Any]:
        cause = exc.__cause__
        if self._tool_manager.get_tool(name) is None:
            return {"ok": False, "code": "not_found", "error": f"no tool {name[:100]!r}"}
        if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
            code, detail = describe_error(cause) if isinstance(cause, Exception) else _UNEXPECTED
            if code == "internal_error":
                log.error("MCP tool %s failed", name, exc_info=cause or exc)
            return {"ok": False, "code": code, "error": detail}
        code, detail = describe_error(cause)
        if name in self.write_tools and context is not None:
            try:
                return await self._audit_refusal(name, arguments, context, code, detail)
            except ConferError as refused:  # the caller's token went bad meanwhile
                code, detail = describe_error(refused)
        return {"ok": False, "code": code, "error": detail}

    async def _audit_refusal(
        self, name: str, arguments: dict[str, Any], ctx: Context, code: str, detail: str
    ) -> dict[str, Any]:
        deps = self._get_deps()
        user = await _authenticate(deps, _headers(ctx).get("authorization"))
        agent = arguments.get("agent")
        return await audited_failure(
            deps.pool,
            user_id=user.id,
            agent=agent if isinstance(agent, str) else "unknown",
            tool_name=name,
            payload=arguments,
            target_table=None,
            code=code,
            detail=detail,
        )


def build_mcp(get_deps: DepsGetter, settings: Settings) -> tuple[MCPServer, ASGIApp]:
    """The MCP server and its gated ASGI app (serve it at ``/mcp``; run its session manager
    in the host's lifespan)."""
    server = ConferMCPServer(
        get_deps=get_deps,
        name="confer",
        title="Confer",
        instructions="Conversations, memory and project memory of one Confer user.",
        version="0.1.0",
    )
    _register(server, get_deps)
    host = urlsplit(settings.public_url)
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[host.netloc, f"{host.hostname}:*", "127.0.0.1:*", "localhost:*"],
            allowed_origins=[settings.public_url],
        ),
    )
    return server, BearerGate(app, get_deps)


Caller = Callable[[Context], Awaitable[tuple[ToolDeps, User]]]

_UNEXPECTED = ("internal_error", "unexpected error")


def _failure(result: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(result))],
        structured_content=result,
        is_error=True,
    )


def _register(server: ConferMCPServer, get_deps: DepsGetter) -> None:
    async def caller(ctx: Context) -> tuple[ToolDeps, User]:
        deps = get_deps()
        return deps, await _authenticate(deps, _headers(ctx).get("authorization"))

    _register_reads(server, caller)
    _register_writes(server, caller)
    register_concept_tools(server, caller)


def _register_reads(server: ConferMCPServer, caller: Caller) -> None:
    @server.tool(annotations=READ)
    @guarded
    async def confer_list_conversations(ctx: Context, limit: Limit = 20) -> dict[str, Any]:
        """List your conversations, most recently active first (read-only)."""
        return await tools.list_conversations(*await caller(ctx), limit=limit)

    @server.tool(annotations=READ)
    @guarded
    async def confer_read_messages(
        ctx: Context, conversation_id: Ulid, limit: Limit = 50, before: Ulid | None = None
    ) -> dict[str, Any]:
        """Read a conversation's messages, newest first; page with ``before`` (a message id,
        the ``next_before`` of the previous page) (read-only)."""
        return await tools.read_messages(
            *await caller(ctx), conversation_id=conversation_id, limit=limit, before=before
        )

    @server.tool(annotations=READ)
    @guarded
    async def confer_search_memory(
        ctx: Context,
        query: SearchQuery,
        project: Project | None = None,
        domain: Domain | None = None,
        method: SearchMode = "auto",
        threshold: SearchThreshold = None,
        limit: SearchLimit = 10,
    ) -> dict[str, Any]:
        """Search your agent's memories, knowledge and messages. Semantic (pgvector, similarity
        >= ``threshold``, default 0.3) when available, full-text always; each hit names its
        method (read-only)."""
        return await tools.search_memory(
            *await caller(ctx),
            query=query,
            project=project,
            domain=domain,
            method=method,
            threshold=threshold,
            limit=limit,
        )

    @server.tool(annotations=READ)
    @guarded
    async def confer_get_session_context(
        ctx: Context,
        topic: Topic,
        queries: Annotated[list[Query], Field(min_length=1, max_length=5)],
        project: Project | None = None,
        domain: Domain | None = None,
        token_budget: Annotated[StrictInt, Field(ge=100, le=100_000)] = 4000,
        limit_per_query: Annotated[StrictInt, Field(ge=1, le=20)] = 5,
    ) -> dict[str, Any]:
        """Context to open a work session: project memory, the memories and knowledge that
        best match 1-5 queries, and recent threads, under a token budget (read-only)."""
        return await tools.get_session_context(
            *await caller(ctx),
            topic=topic,
            queries=queries,
            project=project,
            domain=domain,
            token_budget=token_budget,
            limit_per_query=limit_per_query,
        )

    @server.tool(annotations=READ)
    @guarded
    async def confer_list_pending_permissions(ctx: Context, limit: Limit = 50) -> dict[str, Any]:
        """Permission requests waiting for your decision (read-only)."""
        return await tools.list_pending_permissions(*await caller(ctx), limit=limit)

    @server.tool(annotations=READ)
    @guarded
    async def confer_get_audit_log(
        ctx: Context,
        agent: Agent | None = None,
        tool_name: Short | None = None,
        target_id: Identifier | None = None,
        success: Flag | None = None,
        since: datetime | None = None,
        limit: Limit = 50,
    ) -> dict[str, Any]:
        """Your MCP write-tool audit log, newest first, filtered (read-only; max 200)."""
        return await tools.get_audit_log(
            *await caller(ctx),
            agent=agent,
            tool_name=tool_name,
            target_id=target_id,
            success=success,
            since=since,
            limit=limit,
        )


def _register_writes(server: ConferMCPServer, caller: Caller) -> None:
    @server.write_tool(annotations=WRITE)
    async def confer_send_message(
        ctx: Context,
        conversation_id: Identifier,
        content: Text,
        in_reply_to: Identifier | None = None,
        agent: Agent = "claude-code",
    ) -> dict[str, Any]:
        """Send a message as you (``via: claude-code``) to one of your conversations (audited)."""
        return await tools.send_message(
            *await caller(ctx),
            conversation_id=conversation_id,
            content=content,
            in_reply_to=in_reply_to,
            agent=agent,
        )

    @server.write_tool(annotations=WRITE)
    async def confer_record_memory(
        ctx: Context,
        type: Short,
        content: Text,
        importance: StrictInt = 5,
        project: Project | None = None,
        domain: Domain | None = None,
        agent: Agent = "unknown",
    ) -> dict[str, Any]:
        """Record a long-term memory of your agent: type preference | fact | decision |
        learning | procedure, importance 1-10 (audited)."""
        return await tools.record_memory(
            *await caller(ctx),
            type=type,
            content=content,
            importance=importance,
            project=project,
            domain=domain,
            agent=agent,
        )

    @server.write_tool(annotations=WRITE)
    async def confer_update_project_memory(
        ctx: Context,
        project_id: Identifier,
        peer_did: Identifier,
        base_version: StrictInt | None = None,
        facts_md: Markdown | None = None,
        decisions_md: Markdown | None = None,
        meta: JsonValue = None,
        agent: Agent = "unknown",
    ) -> dict[str, Any]:
        """Create or update the project memory shared with a peer. Fields you leave out (or
        send as null) keep their stored value; "" empties a text. ``base_version`` must be the
        version you read (omit only to create); a stale one fails with version_conflict.
        ``project_id``: letters, digits, ``.``, ``_``, ``-`` (audited)."""
        return await tools.update_project_memory(
            *await caller(ctx),
            project_id=project_id,
            peer_did=peer_did,
            base_version=base_version,
            facts_md=facts_md,
            decisions_md=decisions_md,
            meta=meta,
            agent=agent,
        )

    @server.write_tool(annotations=WRITE)
    async def confer_decide_permission(
        ctx: Context,
        permission_id: Identifier,
        decision: Short,
        scope: Short | None = None,
        agent: Agent = "unknown",
    ) -> dict[str, Any]:
        """Decide a pending permission request: decision allow_once | allow_always | deny;
        scope (what allow_always covers) peer | peer_action | global (audited)."""
        return await permissions.decide_permission(
            *await caller(ctx),
            permission_id=permission_id,
            decision=decision,
            scope=scope,
            agent=agent,
        )
