"""Inbound rate limits per peer domain and per peer agent, and the shared nonce store.

Both are backends chosen by settings (DESIGN "Scale"): in-process / PostgreSQL by default,
Redis when ``CONFER_REDIS_URL`` is set, so every gateway process shares one budget and one
replay window. Rate limits use the ``limits`` library's moving window (the data model's
``ratelimit:peer:{peer_domain}`` key family); a Redis outage fails open for rate limits (logged)
but never for nonces, whose store errors surface as 503.
"""

from __future__ import annotations

import logging
import math
import time
from datetime import datetime
from typing import Protocol

import asyncpg
import redis.asyncio as redis
from limits import parse
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError

from did.web import did_to_url
from gateway.errors import RateLimitedError, ServiceUnavailableError
from gateway.store import federation as federation_store

log = logging.getLogger(__name__)


class PeerRateLimiter:
    """Budgets per peer domain and per peer DID, e.g. ``"1200/minute"`` and ``"600/minute"``."""

    def __init__(self, redis_url: str | None, *, per_domain: str, per_agent: str) -> None:
        storage: Storage = (
            RedisStorage(
                redis_url.replace("redis://", "async+redis://", 1),
                implementation="redispy",
                key_prefix="confer",
                wrap_exceptions=True,
            )
            if redis_url
            else MemoryStorage()
        )
        self._limiter = MovingWindowRateLimiter(storage)
        self._per_domain = parse(per_domain)
        self._per_agent = parse(per_agent)

    async def check(self, peer_did: str) -> None:
        """Count one request of ``peer_did``. Raises RateLimitedError (429, Retry-After)."""
        domain = _domain(peer_did)
        for limit, key in ((self._per_domain, f"peer:{domain}"), (self._per_agent, peer_did)):
            try:
                if await self._limiter.hit(limit, "ratelimit", key):
                    continue
                stats = await self._limiter.get_window_stats(limit, "ratelimit", key)
            except StorageError as exc:
                log.warning("rate limit storage unavailable, not limiting: %s", exc)
                return
            retry_after = max(1, math.ceil(stats.reset_time - time.time()))
            raise RateLimitedError(f"{key} is over its budget of {limit}", retry_after=retry_after)


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
        key = f"confer:nonce:{keyid}:{nonce}"
        try:
            stored = await self._client.set(
                key, b"1", nx=True, exat=int(expires_at.timestamp()) + 1
            )
        except redis.RedisError as exc:  # never accept a signature we cannot check for replay
            raise ServiceUnavailableError(f"nonce store unavailable: {exc}") from exc
        return bool(stored)
