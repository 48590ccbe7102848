"""Who is calling ``/mcp``: a Confer access token, an OAuth access token issued for ``/mcp`` (MCP
sign-in, :mod:`gateway.services.oauth`) or a ``cfk_…`` API key (docs/agents.md, MCP server spec).

All arrive as ``Authorization: Bearer <credential>``. API keys are recognised by their
``cfk_`` prefix (:data:`gateway.services.api_keys.KEY_PREFIX`); their owner must still be an
active account (neither deleted nor disabled). Anything else is verified as an access token.
"""

from __future__ import annotations

import asyncpg

from gateway.clock import Clock
from gateway.errors import ApiKeyInvalidError, AuthenticationError
from gateway.services import api_keys
from gateway.services.accounts import Accounts
from gateway.store import users as users_store
from models import User


def bearer(authorization: str | None) -> str:
    """The credential of an ``Authorization: Bearer …`` header. Raises AuthenticationError."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationError("send Authorization: Bearer <access token or API key>")
    return token.strip()


async def authenticate(
    pool: asyncpg.Pool, clock: Clock, accounts: Accounts, authorization: str | None, resource: str
) -> User:
    """The live user behind the header (an access token checked by ``accounts`` — a REST one
    or an OAuth one whose audience is ``resource`` —, an API key looked up in ``pool`` and
    checked against ``clock``).

    Raises AuthenticationError (no bearer), ApiKeyInvalidError (unknown or revoked key, or its
    account is gone), TokenInvalidError (bad or expired access token, ended session).
    """
    credential = bearer(authorization)
    if not credential.startswith(api_keys.KEY_PREFIX):
        return (await accounts.authenticate(credential, audience=resource)).user
    key = await api_keys.authenticate(pool, clock, credential)
    async with pool.acquire() as conn:
        active = await users_store.account_active(conn, user_id=key.user_id)
        user = await users_store.get_user(conn, id=key.user_id) if active else None
    if user is None:
        raise ApiKeyInvalidError("the API key's account is deleted or disabled")
    return user
