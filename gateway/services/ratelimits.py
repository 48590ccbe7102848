"""Rate limits (login, registration, uploads, inbound federation per peer), on ``limits``.

One backend behind one small interface (DESIGN "Scale"): in-process memory by default, Redis
when ``CONFER_REDIS_URL`` is set so that several gateway processes share the counters (keys
``<prefix>/…`` under the data model's ``ratelimit:`` convention). Moving-window strategy; each
rule is a ``limits`` string such as ``"10/minute;50/hour"``.
"""

from __future__ import annotations

import bisect
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


class LoopMemoryStorage(MemoryStorage):
    """``limits``' in-process storage, its expiry run in the event loop at most once a second.

    The library's own expiry starts after every hit and hands each key's search for expired
    entries to a thread (``asyncio.to_thread``): for each signed peer request (two rules), a
    sweep of every key with a thread hop and a loop wake-up each, for bisections of a few
    microseconds. Here the same sweep runs inline, without an ``await`` (so no hit runs in
    between), when a hit comes at least :attr:`SWEEP_SECONDS` after the last sweep; windows are
    counted from the entries' times, so a later sweep never lets more hits through.
    """

    SWEEP_SECONDS = 1.0

    def __init__(self) -> None:
        super().__init__()
        self._next_sweep = 0.0

    async def _MemoryStorage__schedule_expiry(self) -> None:  # the library's hook, by name
        now = time.time()
        if now >= self._next_sweep:
            self._next_sweep = now + self.SWEEP_SECONDS
            self.expire(now)

    def expire(self, now: float) -> None:
        """Drop the entries and counters whose window ended before ``now`` (UNIX seconds), as
        the library's expiry does: moving-window entries newest first, so the expired ones are
        a tail found by bisection."""
        for key, events in list(self.events.items()):
            cutoff = bisect.bisect_left(events, -now, key=lambda event: -event.expiry)
            if cutoff:
                self.events[key] = events[:cutoff]
            else:
                del self.events[key]
                self.locks.pop(key, None)
        for key, expiry in list(self.expirations.items()):
            if expiry <= now:
                self.storage.pop(key, None)
                del self.expirations[key]
                self.locks.pop(key, None)


def storage_for(settings: Settings) -> Storage:
    """Memory storage (:class:`LoopMemoryStorage`), or Redis (redis-py asyncio) for a
    ``redis://``/``rediss://`` URL."""
    if not settings.redis_url:
        return LoopMemoryStorage()
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
