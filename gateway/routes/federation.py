"""The A2A 1.0 JSON-RPC endpoint of each local user and agent, for signed peer requests.

``POST /users/{username}/a2a`` and ``POST /agents/{agent_id}/a2a`` accept ``SendMessage``
(A2A spec §9, JSON-RPC binding) from peers authenticated with RFC 9421 signatures.
Authentication failures are 401 problem+json. Once authenticated, protocol errors are JSON-RPC
error objects (A2A §9.5): ``-32700``/``-32600`` with HTTP 400 (the body is not a JSON-RPC
request), the others with HTTP 200 as A2A clients expect.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from gateway.deps import State
from gateway.errors import UnsupportedMediaTypeError
from gateway.federation_auth import Peer, client_ip
from gateway.routes import problems
from gateway.services import federation as service

router = APIRouter(tags=["federation"])

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
VERSION_NOT_SUPPORTED = -32009
SUPPORTED_VERSIONS = ("1.0",)


def _error(rpc_id: Any, code: int, message: str, status: int = 200) -> JSONResponse:
    body = {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status)


def _parse(body: bytes) -> dict[str, Any] | JSONResponse:
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return _error(None, PARSE_ERROR, "Parse error: the body is not JSON", 400)
    if (
        not isinstance(payload, dict)
        or payload.get("jsonrpc") != "2.0"
        or not isinstance(payload.get("method"), str)
        or not isinstance(payload.get("id"), str | int)
    ):
        return _error(None, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 call", 400)
    return payload


async def _dispatch(
    state: State,
    peer: Peer,
    request: Request,
    kind: Literal["users", "agents"],
    name: str,
) -> JSONResponse:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type not in ("application/json", "application/a2a+json"):
        raise UnsupportedMediaTypeError("send Content-Type: application/json")
    payload = _parse(peer.body)
    if isinstance(payload, JSONResponse):
        return payload
    rpc_id = payload["id"]
    version = request.headers.get("a2a-version", "0.3")
    if version not in SUPPORTED_VERSIONS:
        return _error(rpc_id, VERSION_NOT_SUPPORTED, f"A2A version {version} is not supported")
    if payload["method"] != "SendMessage":
        return _error(rpc_id, METHOD_NOT_FOUND, f"Method not found: {payload['method']}")
    try:
        params = service.SendMessageParams.model_validate(payload.get("params"))
        text = service.message_text(params.message, state.settings.max_message_chars)
    except (ValidationError, ValueError) as exc:
        return _error(rpc_id, INVALID_PARAMS, f"Invalid params: {exc}"[:500])
    result = await service.receive_message(
        state, peer, kind=kind, name=name, params=params, text=text, ip=client_ip(request)
    )
    return JSONResponse({"jsonrpc": "2.0", "id": rpc_id, "result": result})


_DOC = problems(
    401, 404, 413, 415, s401="Signature missing or invalid (the `code` says which check failed)"
)


@router.post("/users/{username}/a2a", summary="A2A JSON-RPC endpoint of a user", responses=_DOC)
async def user_endpoint(username: str, request: Request, state: State, peer: Peer) -> JSONResponse:
    """Receive an A2A ``SendMessage`` for a local user from a signed peer (RFC 9421)."""
    return await _dispatch(state, peer, request, "users", username)


@router.post("/agents/{agent_id}/a2a", summary="A2A JSON-RPC endpoint of an agent", responses=_DOC)
async def agent_endpoint(agent_id: str, request: Request, state: State, peer: Peer) -> JSONResponse:
    """Receive an A2A ``SendMessage`` for a local agent from a signed peer (RFC 9421)."""
    return await _dispatch(state, peer, request, "agents", agent_id)
