"""Inbound rate limits per peer domain and per peer agent, and the shared nonce store.

Both are backends chosen by settings (DESIGN "Scale"): in-process / PostgreSQL by default,
Redis when ``CONFER_REDIS_URL`` is set, so every gateway process shares one budget and one
replay window. Rate limits use the ``limits`` library's moving window (the data model's
``ratelimit:peer:{peer_domain}`` key family); a Redis outage fails open for rate limits (logged)
but never for nonces, whose store errors surface as 503.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

import asyncpg
from limits.errors import StorageError

from did.web import did_to_url
from gateway.errors import ServiceUnavailableError
from gateway.services.ratelimits import PEER_AGENT, PEER_DOMAIN, RateLimiter
from gateway.store import federation as federation_store

if TYPE_CHECKING:  # redis-py loads only when Redis is configured (it pulls in much at import)
    import redis.asyncio as redis

log = logging.getLogger(__name__)


class PeerRateLimiter:
    """Budgets per peer domain and per peer DID (``CONFER_PEER_RATE_LIMIT_*``), on the shared
    :class:`~gateway.services.ratelimits.RateLimiter` and its storage."""

    def __init__(self, limiter: RateLimiter) -> None:
        self._limiter = limiter

    async def check(self, peer_did: str, cost: int = 1) -> None:
        """Count ``cost`` calls of ``peer_did`` (one request; a JSON-RPC batch's further
        calls). Raises RateLimitedError (429, Retry-After)."""
        keys = ((PEER_DOMAIN, f"peer:{_domain(peer_did)}"), (PEER_AGENT, peer_did))
        for rule, key in keys:
            try:
                await self._limiter.hit(rule, key, cost)
            except StorageError as exc:
                log.warning("rate limit storage unavailable, not limiting: %s", exc)
                return


def _domain(did: str) -> str:
    """The host[:port] a did:web lives on (the data model's ``peer_domain``)."""
    url = did_to_url(did, allow_http=True)
    return url.split("/")[2].lower()


class NonceStore(Protocol):
    """Remembers signature nonces until they expire; shared by every gateway process."""

    async def add(self, keyid: str, nonce: str, expires_at: datetime) -> bool:
        """Record the nonce; False when it was seen before (a replay, RFC 9421 §7.2.2)."""
        ...


class PostgresNonceStore:
    """Nonces in ``signature_nonces`` (migration 0002)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def add(self, keyid: str, nonce: str, expires_at: datetime) -> bool:
        """Insert; False on a conflict."""
        async with self._pool.acquire() as conn:
            return await federation_store.insert_nonce(
                conn, keyid=keyid, nonce=nonce, expires_at=expires_at
            )


class RedisNonceStore:
    """Nonces as ``confer:nonce:{keyid}:{nonce}`` keys, ``SET NX`` with an absolute expiry."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client

    async def add(self, keyid: str, nonce: str, expires_at: datetime) -> bool:
        """``SET … NX EXAT``: True only for the first writer."""
        from redis.exceptions import RedisError

        key = f"confer:nonce:{keyid}:{nonce}"
        try:
            stored = await self._client.set(
                key, b"1", nx=True, exat=int(expires_at.timestamp()) + 1
            )
        except RedisError as exc:  # never accept a signature we cannot check for replay
            raise ServiceUnavailableError(f"nonce store unavailable: {exc}") from exc
        return bool(stored)
