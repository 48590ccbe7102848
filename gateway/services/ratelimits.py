"""Rate limits (login, registration, uploads, inbound federation per peer), on ``limits``.

One backend behind one small interface (DESIGN "Scale"): in-process memory by default, Redis
when ``CONFER_REDIS_URL`` is set so that several gateway processes share the counters (keys
``<prefix>/…`` under the data model's ``ratelimit:`` convention). Moving-window strategy; each
rule is a ``limits`` string such as ``"10/minute;50/hour"``.
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItem, parse_many
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter

from gateway.errors import RateLimitedError
from gateway.services.did_budget import DID_FETCH_DID, DID_FETCH_HOST
from gateway.settings import Settings

LOGIN_IP = "login_ip"
LOGIN_ACCOUNT = "login_account"
REGISTER_IP = "register_ip"
OAUTH_IP = "oauth_ip"
REPORT_USER = "report_user"
UPLOAD_USER = "upload_user"
PEER_DOMAIN = "peer_domain"
PEER_AGENT = "peer_agent"
RESET_IP = "reset_ip"
RESET_ACCOUNT = "reset_account"


def storage_for(settings: Settings) -> Storage:
    """Memory storage, or Redis (redis-py asyncio) for a ``redis://``/``rediss://`` URL."""
    if not settings.redis_url:
        return MemoryStorage()
    return RedisStorage(
        settings.redis_url,
        implementation="redispy",
        key_prefix=f"ratelimit:{settings.rate_limit_prefix}",
        wrap_exceptions=True,  # a Redis outage surfaces as limits.errors.StorageError
    )


class RateLimiter:
    """Named rules (``login_ip``, ``login_account``, ``register_ip``, ``oauth_ip``,
    ``report_user``, ``upload_user``, ``peer_domain``, ``peer_agent``, ``reset_ip``,
    ``reset_account``, ``did_fetch_host``, ``did_fetch_did``) over one storage."""

    def __init__(self, settings: Settings, storage: Storage | None = None) -> None:
        self.storage = storage or storage_for(settings)
        self._limiter = MovingWindowRateLimiter(self.storage)
        self._rules: dict[str, list[RateLimitItem]] = {
            LOGIN_IP: parse_many(settings.rate_limit_login_ip),
            LOGIN_ACCOUNT: parse_many(settings.rate_limit_login_account),
            REGISTER_IP: parse_many(settings.rate_limit_register_ip),
            OAUTH_IP: parse_many(settings.rate_limit_oauth_ip),
            PEER_DOMAIN: parse_many(settings.peer_rate_limit_domain),
            PEER_AGENT: parse_many(settings.peer_rate_limit_agent),
            RESET_IP: parse_many(settings.rate_limit_reset_ip),
            RESET_ACCOUNT: parse_many(settings.rate_limit_reset_account),
            REPORT_USER: parse_many(settings.rate_limit_reports),
            UPLOAD_USER: parse_many(settings.rate_limit_uploads),
            DID_FETCH_HOST: parse_many(settings.did_fetch_budget_host),
            DID_FETCH_DID: parse_many(settings.did_fetch_budget_did),
        }

    async def hit(self, rule: str, key: str, cost: int = 1) -> None:
        """Count ``cost`` attempts for ``key`` under ``rule``. Raises RateLimitedError (429)
        when any window of the rule has no room for them (nothing is then counted)."""
        await self.check(rule, key, cost)
        await self.count(rule, key, cost)

    async def count(self, rule: str, key: str, cost: int = 1) -> None:
        """Count ``cost`` attempts for ``key`` under ``rule`` without refusing them."""
        for item in self._rules[rule]:
            await self._limiter.hit(item, rule, key, cost=cost)

    async def check(self, rule: str, key: str, cost: int = 1) -> None:
        """Raise RateLimitedError (429, ``Retry-After`` in s) if ``key`` has no room for
        ``cost`` more attempts under ``rule``."""
        for item in self._rules[rule]:
            if not await self._limiter.test(item, rule, key, cost=cost):
                stats = await self._limiter.get_window_stats(item, rule, key)
                retry_after = max(1, math.ceil(stats.reset_time - time.time()))
                raise RateLimitedError(
                    f"too many attempts ({item}); try again in {retry_after} s",
                    retry_after=retry_after,
                )

    async def reset(self) -> None:
        """Forget every counter (tests and the admin CLI)."""
        await self.storage.reset()
