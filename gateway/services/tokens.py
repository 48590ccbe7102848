"""Access tokens: short-lived JWTs (RFC 7519) signed with the instance's Ed25519 token key.

The algorithm is pinned to ``EdDSA`` (RFC 8037) on both sides; ``exp``, ``iat``, ``sub``,
``sid`` and ``jti`` are required. A token is only as good as its session row: logout or
revocation deletes the row and the token stops working at once.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import jwt

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
    try:
        claims = jwt.decode(
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
    rest = claims.get("typ") == TOKEN_TYPE and "aud" not in claims
    resource = claims.get("typ") == RESOURCE_TOKEN_TYPE and claims.get("aud") == audience
    if not rest and not (audience is not None and resource):
        raise TokenInvalidError("not an access token for this endpoint")
    if not isinstance(claims["exp"], int) or claims["exp"] <= now:
        raise TokenInvalidError("the access token has expired")
    return AccessClaims(claims["sub"], claims["sid"], claims["jti"], claims["exp"])
