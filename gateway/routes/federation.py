"""The A2A 1.0 JSON-RPC endpoints: one per local user and agent, and the instance's ``/a2a``.

``POST /users/{username}/a2a``, ``POST /agents/{agent_id}/a2a`` and ``POST /a2a`` accept
``SendMessage``, ``SendStreamingMessage`` (SSE), ``GetTask``, ``ListTasks``, ``CancelTask`` and
``SubscribeToTask`` (A2A §9, JSON-RPC binding) with ``A2A-Version: 1.0``, from Confer peers
signing per RFC 9421 or stock A2A clients with a bearer API key. Authentication failures are
401 problem+json. Once authenticated, protocol errors are JSON-RPC error objects (A2A §9.5):
``-32700``/``-32600`` with HTTP 400 (the body is not a JSON-RPC request), the others with HTTP
200 as A2A clients expect. On ``/a2a`` a message names its recipient by ``params.tenant`` (an
agent id) or ``message.metadata.confer.recipient`` (a local DID).

A signed peer may send a JSON-RPC 2.0 batch (an array of calls, :mod:`a2a.batch`), which this
instance declares in its Agent Card: answered by the array of each call's response (HTTP 200),
or by one ``-32600``/``-32700`` error with HTTP 400 when the array itself is refused (empty,
too many calls, too large, unsigned, or batches off).
"""

from __future__ import annotations

import dataclasses
import json
import logging
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
    call_of,
    error_envelope,
    parse_batch,
    parse_call,
    result_envelope,
)
from gateway.a2a_callers import Caller
from gateway.db import shared_transaction
from gateway.deps import State
from gateway.errors import (
    ApiKeyScopeError,
    ConferError,
    NotGroupMemberError,
    PeerBlockedError,
    RateLimitedError,
    UnsupportedMediaTypeError,
)
from gateway.federation_auth import audit_rejection, client_ip
from gateway.routes import problems
from gateway.routes.params import Id
from gateway.services import a2a_rpc, cards
from gateway.services import federation as service
from gateway.services.a2a_push import PushRules
from gateway.services.tasks import Recipient
from gateway.store import audit as audit_store

log = logging.getLogger(__name__)
router = APIRouter(tags=["federation"])

CALL_REFUSED_RPC_CODE = -32041
"""The JSON-RPC error code of one batched call refused as a single request would be with a
problem (an implementation-defined server error, JSON-RPC 2.0 §5.1)."""

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
        max_attachment_bytes=state.settings.attachment_max_bytes,
        permission_ttl_seconds=state.settings.permission_ttl_seconds,
        message_requests_default=state.settings.message_requests_default,
        peers=state.peers,
        max_group_members=state.settings.max_group_members,
        group_backfill_messages=state.settings.group_backfill_messages,
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
        if caller.body.lstrip()[:1] == b"[":
            return await _dispatch_batch(state, caller, request, endpoint)
        try:
            rpc_id, name, params = parse_call(caller.body)
        except (ParseError, InvalidRequestError) as exc:
            return JSONResponse(error_envelope(None, exc), status_code=400)
        ctx = _context(state, caller, request, await _admit(state, caller, endpoint))
        try:
            answer = await _run(state, ctx, request, rpc_id, name, params)
        except JSONRPCError as exc:
            return JSONResponse(error_envelope(rpc_id, exc))
    except (PeerBlockedError, ApiKeyScopeError, NotGroupMemberError, RateLimitedError) as exc:
        # The door refused: at the endpoint's recipient below, or (on /a2a) at the recipient
        # the message names, inside the method. Either way the refusal writes nothing else.
        await audit_rejection(state, request, exc.code, exc.detail)
        raise
    if isinstance(answer, dict):
        return JSONResponse(answer)
    return StreamingResponse(
        _sse(rpc_id, answer), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


async def _admit(
    state: State, caller: Caller, endpoint: tuple[str, str] | None
) -> Recipient | None:
    """Admit the caller to the endpoint's recipient (once per request: the methods admit only
    a recipient a /a2a message names)."""
    if endpoint is None:
        return None
    async with state.pool.acquire() as conn:
        recipient = await service.resolve_recipient(conn, *endpoint)
        await service.admit(conn, caller, recipient)
    return recipient


async def _run(
    state: State,
    ctx: a2a_rpc.RpcContext,
    request: Request,
    rpc_id: Any,
    name: str,
    params: Any,
) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
    """Run the method with its unparsed ``params``: the JSON-RPC response of a unary method,
    the events of a streaming one. Raises JSONRPCError."""
    version = _version(request)
    if version not in SUPPORTED_VERSIONS:
        raise VersionNotSupportedError(f"A2A version {version} is not supported; use 1.0")
    unary, streaming = a2a_rpc.method(name)
    if name not in ("SendMessage", "SendStreamingMessage"):  # those audit in the service
        await _audit_call(state, ctx.caller, request, name, ctx.recipient)
    if unary is not None:
        return result_envelope(rpc_id, await unary(ctx, params))
    assert streaming is not None
    return await streaming(ctx, params)


class CallRefusedError(JSONRPCError):
    """One call of a batch refused the way a single request would be with a problem (a
    blocked peer, an unknown recipient, ...): ``message`` starts with the problem's code."""

    code, reason = CALL_REFUSED_RPC_CODE, "CALL_REFUSED"


async def _dispatch_batch(
    state: State, caller: Caller, request: Request, endpoint: tuple[str, str] | None
) -> Response:
    """A JSON-RPC 2.0 batch (§6) from a signed peer (:mod:`a2a.batch`): bounded by
    ``federation_batch_max_items`` calls and ``federation_batch_max_bytes``, the signature
    verified once for the whole body, the peer's budget charged one unit per call, each call
    checked and run on its own, in order; a bad call gets its own error in the answer.

    Consecutive plain messages into one conversation share one transaction, each in its own
    savepoint (:class:`gateway.db.SharedTransaction`, :func:`a2a_rpc.joins_batch`): one
    commit for the run instead of one per call, and a refused call still rolls back alone."""
    limits = cards.batch_limits(state.settings)
    refusal = None
    if caller.peer is None:
        refusal = "Invalid Request: batches are accepted from signed Confer peers only"
    elif limits is None:
        refusal = "Invalid Request: this instance accepts no batches"
    elif len(caller.body) > limits[1]:
        refusal = f"Invalid Request: a batch body is at most {limits[1]} bytes"
    try:
        if refusal is not None:
            raise InvalidRequestError(refusal)
        assert limits is not None and caller.peer is not None
        items = parse_batch(caller.body, limits[0])
    except (ParseError, InvalidRequestError) as exc:
        return JSONResponse(error_envelope(None, exc), status_code=400)
    if state.peer_limits is not None and len(items) > 1:  # the request itself counted one
        await state.peer_limits.check(caller.peer.peer.did, cost=len(items) - 1)
    recipient = await _admit(state, caller, endpoint)
    answers: list[tuple[dict[str, Any], int]] = []
    async with shared_transaction(state.pool) as shared:
        ctx = dataclasses.replace(_context(state, caller, request, recipient), batch=shared)
        for item in items:
            joined = shared.joined
            answer = await _batch_call(state, ctx, request, item)
            answers.append((answer, shared.joined if shared.joined > joined else 0))
    # A call stored in a run of the shared transaction that then failed to commit is not
    # stored at all: the sender is told to retry it, like any error of ours.
    lost = JSONRPCError("Internal error")
    return JSONResponse(
        [error_envelope(a.get("id"), lost) if shared.lost(unit) else a for a, unit in answers]
    )


async def _batch_call(
    state: State, ctx: a2a_rpc.RpcContext, request: Request, item: Any
) -> dict[str, Any]:
    """The JSON-RPC response to one element of a batch; never raises."""
    try:
        rpc_id, name, params = call_of(item)
    except InvalidRequestError as exc:
        return error_envelope(None, exc)
    try:
        if a2a_rpc.method(name)[0] is None:
            raise InvalidRequestError("Invalid Request: a streaming method cannot be batched")
        if name != "SendMessage" and ctx.batch is not None:
            await ctx.batch.commit()  # it reads on its own connection: the earlier calls first
        answer = await _run(state, ctx, request, rpc_id, name, params)
        assert isinstance(answer, dict)
        return answer
    except JSONRPCError as exc:
        return error_envelope(rpc_id, exc)
    except ConferError as exc:
        await audit_rejection(state, request, exc.wire_code, exc.detail)
        return error_envelope(rpc_id, CallRefusedError(f"{exc.wire_code}: {exc.detail}"))
    except Exception:  # a bug of ours must not fail the other calls; the peer retries
        log.exception("batch call %r failed unexpectedly", rpc_id)
        return error_envelope(rpc_id, JSONRPCError("Internal error"))


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
async def agent_endpoint(agent_id: Id, request: Request, state: State, caller: Caller) -> Response:
    """A2A 1.0 JSON-RPC for a local agent, from a signed peer or an API-key client."""
    return await _dispatch(state, caller, request, ("agents", agent_id))


@router.post("/a2a", summary="The instance's A2A JSON-RPC endpoint", responses=_DOC)
async def instance_endpoint(request: Request, state: State, caller: Caller) -> Response:
    """A2A 1.0 JSON-RPC for any local agent, named by ``tenant`` or the Confer metadata."""
    return await _dispatch(state, caller, request, None)
