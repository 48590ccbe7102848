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
) -> str:
    """Sign an access token valid for ``ttl`` seconds from ``now`` (UNIX seconds).

    ``jti`` defaults to 128 random bits; Ed25519 signatures are deterministic (RFC 8032), so the
    same claims give the same token."""
    claims = {
        "iss": identity.did,
        "sub": user_id,
        "sid": session_id,
        "jti": jti or secrets.token_urlsafe(16),
        "typ": TOKEN_TYPE,
        "iat": now,
        "exp": now + ttl,
    }
    return jwt.encode(
        claims,
        identity.token_key.private_key,
        algorithm=ALGORITHM,
        headers={"kid": identity.token_key.fragment},
    )


def verify_access_token(identity: Identity, token: str, *, now: int) -> AccessClaims:
    """Verify signature, algorithm, issuer, type and expiry. Raises TokenInvalidError."""
    try:
        claims = jwt.decode(
            token,
            identity.token_key.public_key,
            algorithms=[ALGORITHM],
            issuer=identity.did,
            options={"require": ["exp", "iat", "sub", "sid", "jti"], "verify_exp": False},
        )
    except jwt.PyJWTError as exc:
        raise TokenInvalidError(f"access token rejected: {exc}") from exc
    if claims.get("typ") != TOKEN_TYPE:
        raise TokenInvalidError("not an access token")
    if not isinstance(claims["exp"], int) or claims["exp"] <= now:
        raise TokenInvalidError("the access token has expired")
    return AccessClaims(claims["sub"], claims["sid"], claims["jti"], claims["exp"])
