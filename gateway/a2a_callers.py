"""Who is calling an A2A endpoint: a signed Confer peer or a stock client with an API key.

A request carrying ``Signature``/``Signature-Input`` goes through RFC 9421 verification
(:mod:`gateway.federation_auth`); a request with ``Authorization: Bearer <API key>`` and no
signature is a stock A2A client acting for the user who issued the key (A2A §7: credentials in
headers, every request authenticated). Anything else is a 401 ``signature_missing``. A verified
peer over its budget (per domain, per DID) gets 429 with ``Retry-After``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from gateway.deps import State
from gateway.errors import ApiKeyInvalidError, RateLimitedError
from gateway.federation_auth import audit_rejection, verify_signed_request
from gateway.services import api_keys
from gateway.services.callers import A2ACaller
from gateway.workers.delivery import resume_destination


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def authenticate_caller(request: Request, state: State) -> A2ACaller:
    """FastAPI dependency: the caller, or a 401 problem (audited as a rejection)."""
    signed = "signature" in request.headers or "signature-input" in request.headers
    token = None if signed else _bearer(request)
    if token is None:
        peer = await verify_signed_request(request, state)
        if state.peer_limits is not None:
            try:
                await state.peer_limits.check(peer.peer.did)
            except RateLimitedError as exc:
                await audit_rejection(state, request, exc.code, exc.detail)
                raise
        # Inbound contact proves the peer is up: resume deliveries parked for it.
        await resume_destination(state.pool, state.clock, peer.peer.endpoint)
        return A2ACaller(ref=f"peer:{peer.peer.did}", body=peer.body, peer=peer)
    try:
        key = await api_keys.authenticate(state.pool, state.clock, token)
    except ApiKeyInvalidError as exc:
        await audit_rejection(state, request, exc.code, exc.detail)
        raise
    return A2ACaller(ref=f"key:{key.id}", body=await request.body(), api_key=key)


Caller = Annotated[A2ACaller, Depends(authenticate_caller)]
