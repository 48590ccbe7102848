"""Inbound federation authentication: the one place an RFC 9421 request becomes a peer.

Handlers receive a :class:`VerifiedPeer` and never see unverified peer data (Synapse's
"verified origin"). Checks, in order (RFC 9421 §3.2, §7.2; RFC 9530):

1. ``Signature``/``Signature-Input`` present, ours selected by the signed ``tag``.
2. The ``keyid`` DID URL resolves (``peer_agents`` cache, did:web) to an authentication key.
3. Required components covered, ``created``/``expires`` within the window, ``Content-Digest``
   recomputed over the raw body, signature verified over a base built from the configured
   public URL and the raw, still-encoded path and query (never the client's Host header).
4. ``nonce`` present and never seen before, across every gateway process (PostgreSQL, or
   Redis when configured).

Every failure is a 401 problem with the precise code, and leaves an ``audit_log`` row. Before
the key lookup (so no DID document of a refused peer is ever fetched), the instance federation
policy (``services.federation_policy``) is applied to the keyid's DID: a refused peer gets a
403 JSON-RPC error signed by this instance (:func:`signed_refusal`) and an audit row.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import Response

from a2a.digest import verify_content_digest
from a2a.errors import A2AError, SignatureMalformedError
from a2a.signatures import (
    DEFAULT_COMPONENTS,
    FETCH_COMPONENTS,
    SignatureInput,
    check_signature_params,
    field_lines,
    parse_signature,
    sign_response,
    verify_signature,
)
from did.errors import DIDError
from did.web import split_did_url
from gateway.deps import State
from gateway.errors import FederationAuthError, FederationRefusedError
from gateway.http_errors import problem_for
from gateway.services.callers import VerifiedPeer
from gateway.services.identity import Identity
from gateway.services.limits import PostgresNonceStore
from gateway.store import audit as audit_store
from gateway.tracing import keep_verified_trace_context
from models import PeerAgentRow


def canonical_url(public_url: str, request: Request) -> str:
    """The target URI as the signer must have seen it: our public origin + raw path + query."""
    raw_path = request.scope.get("raw_path") or request.url.path.encode()
    query = request.scope.get("query_string", b"")
    url = public_url + raw_path.decode("latin-1")
    return f"{url}?{query.decode('latin-1')}" if query else url


def client_ip(request: Request) -> str | None:
    """The TCP peer address of the request (not a forwarding header)."""
    return request.client.host if request.client else None


async def _check(
    state: State, request: Request, body: bytes, required: Sequence[str]
) -> tuple[SignatureInput, PeerAgentRow]:
    parsed = parse_signature(request.headers)
    if not parsed.nonce:
        raise SignatureMalformedError("a nonce is required (RFC 9421 §7.2.2)")
    settings = state.settings
    now = int(state.clock.time())
    # Everything that needs no key first: a stale, incomplete or body-mismatched request must
    # not make us fetch a DID document that a stranger chose.
    check_signature_params(
        parsed,
        now=now,
        required_components=required,
        max_age=settings.signature_max_age_seconds,
        clock_skew=settings.signature_clock_skew_seconds,
        require_expires=True,
    )
    if "content-digest" in parsed.components:
        lines = field_lines(request.headers, "content-digest")
        verify_content_digest(", ".join(lines) if lines else None, body)
    state.federation_policy.check(split_did_url(parsed.keyid)[0])
    peer, key = await state.peers.authentication_key(parsed.keyid)
    # the window, the components and the digest are checked above, each once
    verify_signature(
        parsed,
        method=request.method,
        url=canonical_url(settings.public_url, request),
        headers=request.headers,
        public_key=key,
    )
    return parsed, peer


async def verify_signed_request(request: Request, state: State) -> VerifiedPeer:
    """FastAPI dependency: the verified peer behind a signed request, or a 401 problem."""
    return await _verify(request, state, DEFAULT_COMPONENTS)


async def verify_signed_fetch(request: Request, state: State) -> VerifiedPeer:
    """FastAPI dependency: the verified peer behind a signed GET (covering
    :data:`a2a.signatures.FETCH_COMPONENTS`, no body), or a 401 problem."""
    return await _verify(request, state, FETCH_COMPONENTS)


async def _verify(request: Request, state: State, required: Sequence[str]) -> VerifiedPeer:
    body = await request.body()
    try:
        parsed, peer = await _check(state, request, body, required)
        horizon = (parsed.created or 0) + state.settings.signature_max_age_seconds
        expires = datetime.fromtimestamp(
            max(horizon, parsed.expires or 0) + state.settings.signature_clock_skew_seconds, UTC
        )
        nonces = state.nonces or PostgresNonceStore(state.pool)
        fresh = await nonces.add(parsed.keyid, parsed.nonce or "", expires)
        if not fresh:
            raise FederationAuthError("signature_replayed", "this nonce was already used")
    except (A2AError, DIDError) as exc:
        await audit_rejection(state, request, exc.code, exc.detail)
        raise FederationAuthError(exc.code, exc.detail) from exc
    except (FederationAuthError, FederationRefusedError) as exc:
        await audit_rejection(state, request, exc.wire_code, exc.detail)
        raise
    # only now may the request's span continue the caller's trace (gateway.tracing)
    keep_verified_trace_context(request.scope, request.headers, parsed.components)
    return VerifiedPeer(peer=peer, keyid=parsed.keyid, body=body)


async def audit_rejection(state: State, request: Request, code: str, detail: str) -> None:
    """Leave the ``federation.inbound.rejected`` audit row of a refused request."""
    async with state.pool.acquire() as conn:
        await audit_store.insert_audit(
            conn,
            action="federation.inbound.rejected",
            details={"path": request.url.path, "code": code, "detail": detail[:500]},
            ip_address=client_ip(request),
        )


FEDERATION_REFUSED_RPC_CODE = -32040
"""The JSON-RPC error code of a refusal by the federation policy (an implementation-defined
server error, JSON-RPC 2.0 §5.1); ``error.data.code`` is ``federation_refused``."""


def signed_refusal(identity: Identity, exc: FederationRefusedError, now: int) -> Response:
    """A 403 JSON-RPC error for a peer the federation policy refuses, signed (RFC 9421
    §2.2.9: ``@status``, ``content-type``, ``content-digest``) with the instance's key under
    the instance DID, so the peer can tell our refusal from a forgery on the way."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": FEDERATION_REFUSED_RPC_CODE,
                "message": exc.title,
                "data": {"code": exc.wire_code, "detail": exc.detail},
            },
        },
        separators=(",", ":"),
    ).encode()
    headers = {"Content-Type": "application/json"}
    key = identity.signing_key
    headers |= sign_response(
        status=403,
        headers=headers,
        body=body,
        private_key=key.private_key,
        keyid=f"{identity.did}#{key.fragment}",
        created=now,
        expires=now + identity.signature_window,
        nonce=secrets.token_urlsafe(16),
    )
    return Response(body, status_code=403, headers=headers)


async def refusal_handler(request: Request, exc: Exception) -> Response:
    """Exception handler: a signed JSON-RPC refusal for a signed request, problem details for
    anything else (a REST call naming a refused peer)."""
    assert isinstance(exc, FederationRefusedError)
    if "signature" not in request.headers:
        return problem_for(exc, request.url.path)
    state = request.app.state.confer
    return signed_refusal(state.identity, exc, int(state.clock.time()))


Peer = Annotated[VerifiedPeer, Depends(verify_signed_request)]
SignedFetch = Annotated[VerifiedPeer, Depends(verify_signed_fetch)]
