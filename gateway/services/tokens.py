"""Access tokens: short-lived JWTs (RFC 7519) signed with the instance's Ed25519 token key.

The algorithm is pinned to ``EdDSA`` (RFC 8037) on both sides; ``exp``, ``iat``, ``sub``,
``sid`` and ``jti`` are required. A token is only as good as its session row: logout or
revocation deletes the row and the token stops working at once.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from gateway.errors import TokenInvalidError
from gateway.services.identity import Identity

ALGORITHM = "EdDSA"
TOKEN_TYPE = "access"
RESOURCE_TOKEN_TYPE = "resource"
"""An OAuth access token (``gateway.services.oauth``): valid only at its ``aud``, never on REST."""


@dataclass(frozen=True)
class AccessClaims:
    """The verified claims Confer uses: user id, session id, token id, expiry (UNIX s)."""

    user_id: str
    session_id: str
    jti: str
    exp: int


def issue_access_token(
    identity: Identity,
    *,
    user_id: str,
    session_id: str,
    now: int,
    ttl: int,
    jti: str | None = None,
    audience: str | None = None,
) -> str:
    """Sign an access token valid for ``ttl`` seconds from ``now`` (UNIX seconds).

    ``jti`` defaults to 128 random bits; Ed25519 signatures are deterministic (RFC 8032), so the
    same claims give the same token. With ``audience`` (an OAuth resource, RFC 8707) the token
    is a resource token: ``aud`` names the resource and ``scope`` is ``mcp`` (RFC 9068 §2.2),
    and REST endpoints refuse it."""
    claims: dict[str, object] = {
        "iss": identity.did,
        "sub": user_id,
        "sid": session_id,
        "jti": jti or secrets.token_urlsafe(16),
        "typ": TOKEN_TYPE,
        "iat": now,
        "exp": now + ttl,
    }
    if audience is not None:
        claims.update(typ=RESOURCE_TOKEN_TYPE, aud=audience, scope="mcp")
    import jwt  # PyJWT (and cryptography's X.509 it loads) on first use, not at start-up

    return jwt.encode(
        claims,
        identity.token_key.private_key,
        algorithm=ALGORITHM,
        headers={"kid": identity.token_key.fragment},
    )


def verify_access_token(
    identity: Identity, token: str, *, now: int, audience: str | None = None
) -> AccessClaims:
    """Verify signature, algorithm, issuer, type and expiry. Raises TokenInvalidError.

    Without ``audience`` only a REST access token passes; with it, also a resource token whose
    ``aud`` is ``audience`` (RFC 9068 §4: a token for another resource is refused)."""
    return _checked(_signed_claims(identity, token), now=now, audience=audience)


def _signed_claims(identity: Identity, token: str) -> dict[str, Any]:
    """The claims of ``token`` once its signature, algorithm, issuer and required claims are
    verified (what does not depend on the time or the endpoint). Raises TokenInvalidError."""
    import jwt  # see issue_access_token

    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            identity.token_key.public_key,
            algorithms=[ALGORITHM],
            issuer=identity.did,
            # ``aud`` is checked below: a REST token has none and is still good at /mcp
            options={
                "require": ["exp", "iat", "sub", "sid", "jti"],
                "verify_exp": False,
                "verify_aud": False,
            },
        )
    except jwt.PyJWTError as exc:
        raise TokenInvalidError(f"access token rejected: {exc}") from exc
    return claims


def _checked(claims: Mapping[str, Any], *, now: int, audience: str | None) -> AccessClaims:
    """The type, audience and expiry checks of :func:`verify_access_token` on signed claims."""
    rest = claims.get("typ") == TOKEN_TYPE and "aud" not in claims
    resource = claims.get("typ") == RESOURCE_TOKEN_TYPE and claims.get("aud") == audience
    if not rest and not (audience is not None and resource):
        raise TokenInvalidError("not an access token for this endpoint")
    if not isinstance(claims["exp"], int) or claims["exp"] <= now:
        raise TokenInvalidError("the access token has expired")
    return AccessClaims(claims["sub"], claims["sid"], claims["jti"], claims["exp"])


class VerifiedTokens:
    """:func:`verify_access_token` for ``identity``, remembering the tokens whose signature it
    verified: at most ``size`` (the oldest forgotten first).

    A client sends the same access token with every request until it refreshes it, and
    checking an Ed25519 signature (RFC 8032) is the largest part of authenticating one: the
    same bytes under the same key verify the same way every time, so a remembered token skips
    only that check. Its type, audience and expiry are checked on every call, and the session
    it names is the caller's to check (revocation does not depend on this). Only tokens that
    verified are remembered, and only this instance can sign one, so nobody else can fill it.
    """

    def __init__(self, identity: Identity, *, size: int = 4096) -> None:
        self._identity = identity
        self._size = size
        self._claims: dict[str, Mapping[str, Any]] = {}

    def verify(self, token: str, *, now: int, audience: str | None = None) -> AccessClaims:
        """As :func:`verify_access_token` (same errors: TokenInvalidError)."""
        claims = self._claims.get(token)
        if claims is None:
            claims = MappingProxyType(_signed_claims(self._identity, token))
            self._claims[token] = claims
            if len(self._claims) > self._size:
                del self._claims[next(iter(self._claims))]
        return _checked(claims, now=now, audience=audience)
