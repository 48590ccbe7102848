"""The A2A 1.0 JSON-RPC endpoints: one per local user and agent, and the instance's ``/a2a``.

``POST /users/{username}/a2a``, ``POST /agents/{agent_id}/a2a`` and ``POST /a2a`` accept
``SendMessage``, ``SendStreamingMessage`` (SSE), ``GetTask``, ``ListTasks``, ``CancelTask`` and
``SubscribeToTask`` (A2A §9, JSON-RPC binding) with ``A2A-Version: 1.0``, from Confer peers
signing per RFC 9421 or stock A2A clients with a bearer API key. Authentication failures are
401 problem+json. Once authenticated, protocol errors are JSON-RPC error objects (A2A §9.5):
``-32700``/``-32600`` with HTTP 400 (the body is not a JSON-RPC request), the others with HTTP
200 as A2A clients expect. On ``/a2a`` a message names its recipient by ``params.tenant`` (an
agent id) or ``message.metadata.confer.recipient`` (a local DID).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from a2a.protocol import (
    PROTOCOL_VERSION,
    InvalidRequestError,
    JSONRPCError,
    ParseError,
    VersionNotSupportedError,
    error_envelope,
    parse_call,
    result_envelope,
)
from gateway.a2a_callers import Caller
from gateway.deps import State
from gateway.errors import (
    ApiKeyScopeError,
    NotGroupMemberError,
    PeerBlockedError,
    UnsupportedMediaTypeError,
)
from gateway.federation_auth import audit_rejection, client_ip
from gateway.routes import problems
from gateway.services import a2a_rpc
from gateway.services import federation as service
from gateway.services.a2a_push import PushRules
from gateway.services.tasks import Recipient
from gateway.store import audit as audit_store

router = APIRouter(tags=["federation"])

SUPPORTED_VERSIONS = (PROTOCOL_VERSION,)
_MEDIA_TYPES = ("application/json", "application/a2a+json")


def _version(request: Request) -> str:
    """The requested protocol version; none given means 0.3 (A2A §4.8)."""
    return request.headers.get("a2a-version") or request.query_params.get("A2A-Version") or "0.3"


async def _sse(rpc_id: Any, events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    """Each event as ``data: <JSON-RPC response>`` (A2A §4.6); an error ends the stream."""
    try:
        async for event in events:
            yield f"data: {json.dumps(result_envelope(rpc_id, event))}\n\n".encode()
    except JSONRPCError as exc:
        yield f"data: {json.dumps(error_envelope(rpc_id, exc))}\n\n".encode()


async def _audit_call(
    state: State, caller: Caller, request: Request, method: str, recipient: Recipient | None
) -> None:
    """Every inbound federation request leaves an ``audit_log`` row."""
    async with state.pool.acquire() as conn:
        await audit_store.insert_audit(
            conn,
            action="federation.inbound",
            user_id=recipient.user_id if recipient else None,
            details={"method": method, "caller": caller.ref},
            ip_address=client_ip(request),
        )


def _context(
    state: State, caller: Caller, request: Request, recipient: Recipient | None
) -> a2a_rpc.RpcContext:
    """What the A2A methods use for this call, taken from the app's resources."""
    return a2a_rpc.RpcContext(
        caller=caller,
        recipient=recipient,
        ip=client_ip(request),
        pool=state.pool,
        clock=state.clock,
        hub=state.hub,
        queue=state.agent_queue,
        task_events=state.task_events,
        identity=state.identity,
        storage=state.storage,
        max_message_chars=state.settings.max_message_chars,
        permission_ttl_seconds=state.settings.permission_ttl_seconds,
        message_requests_default=state.settings.message_requests_default,
        peers=state.peers,
        max_group_members=state.settings.max_group_members,
        typing_interval_seconds=state.settings.typing_interval_seconds,
        push=PushRules(
            max_configs=state.settings.a2a_push_max_configs_per_task,
            allow_http=state.settings.allow_http_dids,
            policy=state.outbound_policy,
        ),
    )


async def _dispatch(
    state: State, caller: Caller, request: Request, endpoint: tuple[str, str] | None
) -> Response:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type not in _MEDIA_TYPES:
        raise UnsupportedMediaTypeError("send Content-Type: application/json")
    try:
        rpc_id, name, params = parse_call(caller.body)
    except (ParseError, InvalidRequestError) as exc:
        return JSONResponse(error_envelope(None, exc), status_code=400)
    try:
        return await _call(state, caller, request, endpoint, rpc_id, name, params)
    except (PeerBlockedError, ApiKeyScopeError, NotGroupMemberError) as exc:
        # The door refused: at the endpoint's recipient below, or (on /a2a) at the recipient
        # the message names, inside the method. Either way the refusal writes nothing else.
        await audit_rejection(state, request, exc.code, exc.detail)
        raise


async def _call(
    state: State,
    caller: Caller,
    request: Request,
    endpoint: tuple[str, str] | None,
    rpc_id: Any,
    name: str,
    params: Any,
) -> Response:
    """Admit the caller to the endpoint's recipient (once: the methods admit only a recipient
    a /a2a message names), then run the method with its unparsed ``params``."""
    recipient: Recipient | None = None
    if endpoint is not None:
        async with state.pool.acquire() as conn:
            recipient = await service.resolve_recipient(conn, *endpoint)
            await service.admit(conn, caller, recipient)
    ctx = _context(state, caller, request, recipient)
    try:
        version = _version(request)
        if version not in SUPPORTED_VERSIONS:
            raise VersionNotSupportedError(f"A2A version {version} is not supported; use 1.0")
        unary, streaming = a2a_rpc.method(name)
        if name not in ("SendMessage", "SendStreamingMessage"):  # those audit in the service
            await _audit_call(state, caller, request, name, recipient)
        if unary is not None:
            return JSONResponse(result_envelope(rpc_id, await unary(ctx, params)))
        assert streaming is not None
        events = await streaming(ctx, params)
    except JSONRPCError as exc:
        return JSONResponse(error_envelope(rpc_id, exc))
    return StreamingResponse(
        _sse(rpc_id, events), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "JSON-RPC result or error; an SSE stream for SendStreamingMessage and "
        "SubscribeToTask",
        "content": {"text/event-stream": {}},
    },
    **problems(
        401,
        403,
        404,
        413,
        415,
        s401="Signature or API key missing or invalid (the `code` says which check failed)",
        s403="The API key may not call this agent, or the peer is blocked",
    ),
}


@router.post("/users/{username}/a2a", summary="A2A JSON-RPC endpoint of a user", responses=_DOC)
async def user_endpoint(username: str, request: Request, state: State, caller: Caller) -> Response:
    """A2A 1.0 JSON-RPC for a local user, from a signed peer (RFC 9421)."""
    return await _dispatch(state, caller, request, ("users", username))


@router.post("/agents/{agent_id}/a2a", summary="A2A JSON-RPC endpoint of an agent", responses=_DOC)
async def agent_endpoint(agent_id: str, request: Request, state: State, caller: Caller) -> Response:
    """A2A 1.0 JSON-RPC for a local agent, from a signed peer or an API-key client."""
    return await _dispatch(state, caller, request, ("agents", agent_id))


@router.post("/a2a", summary="The instance's A2A JSON-RPC endpoint", responses=_DOC)
async def instance_endpoint(request: Request, state: State, caller: Caller) -> Response:
    """A2A 1.0 JSON-RPC for any local agent, named by ``tenant`` or the Confer metadata."""
    return await _dispatch(state, caller, request, None)
