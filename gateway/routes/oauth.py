"""MCP sign-in: OAuth metadata, the authorization server's endpoints and the consent API.

Discovery (RFC 9728, RFC 8414), ``/oauth/authorize`` (a browser redirect), ``/oauth/token``,
``/oauth/register`` (RFC 7591) and ``/oauth/revoke`` (RFC 7009) speak OAuth: their errors are
RFC 6749 §5.2 JSON (``{"error", "error_description"}``). The consent API under ``/v1/oauth``
is Confer's REST API for the web client's consent page (bearer access token, problem details).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse

from gateway.deps import Current, State
from gateway.errors import OAuthError
from gateway.federation_auth import client_ip
from gateway.routes import problems
from gateway.services.ratelimits import OAUTH_IP
from models.oauth_api import (
    OAuthDecisionPublic,
    OAuthGrantList,
    OAuthGrantPublic,
    OAuthRequestPublic,
)

router = APIRouter()
_protocol = APIRouter(tags=["oauth"])
_consent = APIRouter(tags=["accounts"])

_NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
# The token, registration and revocation endpoints answer RFC 6749 error JSON, not problem
# details, so they stay out of the OpenAPI document (every error there is problem details);
# docs/agents.md describes them.
_OAUTH_PROTOCOL: dict[str, Any] = {"include_in_schema": False}


def _metadata(body: dict[str, Any]) -> JSONResponse:
    # Public documents that browser-based MCP clients read across origins.
    return JSONResponse(
        body, headers={"Access-Control-Allow-Origin": "*", "Cache-Control": "max-age=300"}
    )


@_protocol.get("/.well-known/oauth-protected-resource", summary="Protected resource metadata")
@_protocol.get(
    "/.well-known/oauth-protected-resource/mcp",
    summary="Protected resource metadata of /mcp",
)
async def protected_resource(state: State) -> JSONResponse:
    """RFC 9728 metadata of the MCP endpoint: its resource identifier and Confer as its
    authorization server (the root form answers the same, for clients that look there)."""
    return _metadata(state.oauth.resource_metadata())


@_protocol.get("/.well-known/oauth-authorization-server", summary="Authorization server metadata")
async def authorization_server(state: State) -> JSONResponse:
    """RFC 8414 metadata: endpoints, PKCE S256, public clients, client ID metadata documents."""
    return _metadata(state.oauth.metadata())


@_protocol.get(
    "/oauth/authorize",
    status_code=302,
    summary="OAuth authorization endpoint",
    responses=problems(400, 429),
)
async def authorize(request: Request, state: State) -> RedirectResponse:
    """Check the client, redirect URI, PKCE challenge and resource, then redirect the browser
    to the consent page (or back to the client with an `error`). An unknown client or
    redirect URI is 400 `oauth_client_invalid`, shown here; rate limited per client IP (429)."""
    await state.accounts.limiter.hit(OAUTH_IP, client_ip(request) or "unknown")
    location = await state.oauth.authorize(dict(request.query_params))
    return RedirectResponse(location, status_code=302, headers=_NO_STORE)


async def _form(request: Request) -> dict[str, str]:
    form = await request.form()
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    if len(values) != len(form):
        raise OAuthError("invalid_request", "form fields must be text")
    return values


@_protocol.post("/oauth/token", **_OAUTH_PROTOCOL)
async def token(request: Request, state: State) -> JSONResponse:
    """`authorization_code` (with the PKCE `code_verifier`) or `refresh_token` grant,
    form-encoded; answers an access token for `/mcp` and a rotating refresh token."""
    body = await state.oauth.token(await _form(request), ip=client_ip(request))
    return JSONResponse(body, headers=_NO_STORE)


@_protocol.post("/oauth/register", status_code=201, **_OAUTH_PROTOCOL)
async def register(request: Request, state: State) -> JSONResponse:
    """RFC 7591 dynamic client registration of a public client (no secret)."""
    await state.accounts.limiter.hit(OAUTH_IP, client_ip(request) or "unknown")
    try:
        metadata = json.loads(await request.body())
    except ValueError as exc:
        raise OAuthError("invalid_client_metadata", "the body is not JSON") from exc
    body = await state.oauth.clients.register(metadata)
    return JSONResponse(body, status_code=201, headers=_NO_STORE)


@_protocol.post("/oauth/revoke", **_OAUTH_PROTOCOL)
async def revoke(request: Request, state: State) -> JSONResponse:
    """RFC 7009: a refresh or access token ends its grant; unknown tokens are no error."""
    await state.oauth.revoke(await _form(request), ip=client_ip(request))
    return JSONResponse({}, headers=_NO_STORE)


@_consent.get(
    "/v1/oauth/requests/{request_id}",
    summary="A pending MCP sign-in request",
    responses=problems(401, 404),
)
async def pending_request(request_id: str, current: Current, state: State) -> OAuthRequestPublic:
    """What the consent page shows: the client, where it redirects, the resource and scope."""
    pending = await state.oauth.pending(request_id)
    return OAuthRequestPublic.model_validate(dataclasses.asdict(pending))


async def _decide(
    request_id: str, approve: bool, request: Request, current: Current, state: State
) -> OAuthDecisionPublic:
    redirect_to = await state.oauth.decide(
        request_id, user_id=current.user.id, approve=approve, ip=client_ip(request)
    )
    return OAuthDecisionPublic(redirect_to=redirect_to)


@_consent.post(
    "/v1/oauth/requests/{request_id}/approve",
    summary="Approve an MCP sign-in",
    responses=problems(401, 404),
)
async def approve(
    request_id: str, request: Request, current: Current, state: State
) -> OAuthDecisionPublic:
    """Approve as the logged-in user; `redirect_to` carries the authorization code."""
    return await _decide(request_id, True, request, current, state)


@_consent.post(
    "/v1/oauth/requests/{request_id}/deny",
    summary="Deny an MCP sign-in",
    responses=problems(401, 404),
)
async def deny(
    request_id: str, request: Request, current: Current, state: State
) -> OAuthDecisionPublic:
    """Deny; `redirect_to` tells the client `access_denied`."""
    return await _decide(request_id, False, request, current, state)


@_consent.get("/v1/oauth/grants", summary="My MCP sign-ins", responses=problems(401))
async def grants(current: Current, state: State) -> OAuthGrantList:
    """Clients signed in to MCP as me (each is also one of my sessions)."""
    rows = await state.oauth.grants(user_id=current.user.id)
    fields = OAuthGrantPublic.model_fields
    items = [OAuthGrantPublic.model_validate({k: r[k] for k in fields}) for r in rows]
    return OAuthGrantList(items=items)


router.include_router(_protocol)
router.include_router(_consent)
