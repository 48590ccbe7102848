"""Budgets for outbound DID document fetches, so that strangers cannot aim our resolver.

A signed request names its sender's DID, and a conversation or contact names peers' DIDs;
each may cost a fetch of a document on a host that a stranger chose. :class:`ResolutionBudget`
bounds that work wherever it is triggered (inbound signatures, key refetches, participants,
contacts):

- **per host over time** (``CONFER_DID_FETCH_BUDGET_HOST``, a ``limits`` string such as
  ``"60/minute"``): every network fetch to one host (documents, revalidations, AgentFacts);
- **per DID over time** (``CONFER_DID_FETCH_BUDGET_DID``): every fetch of one DID's document
  (revalidations and forced refetches after an unknown ``keyid`` included);
- **per host at once** (``CONFER_DID_FETCH_CONCURRENCY_HOST``) within a process;
- a **negative cache of unreachable hosts** (``CONFER_DID_FAILURE_TTL_SECONDS``): a host that
  refused the connection or timed out is not tried again for any of its DIDs until it expires
  (failures of one DID — a 404, a malformed document — are cached per DID by the directory).

The counters live in the rate limiter's storage: in process memory, or Redis when
``CONFER_REDIS_URL`` is set, so several gateway processes share one budget. A spent budget is a
DIDResolutionError (``did_unresolvable``) naming the budget; a cached document, even stale, is
used instead when there is one (``PeerDirectory``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Protocol

from did.errors import DIDHostUnreachableError, DIDResolutionError
from did.web import did_host
from gateway.clock import Clock
from gateway.errors import RateLimitedError

MAX_REMEMBERED_HOSTS = 10_000
DID_FETCH_HOST = "did_fetch_host"
"""The rate limiter's rule of fetches per host (``CONFER_DID_FETCH_BUDGET_HOST``)."""
DID_FETCH_DID = "did_fetch_did"
"""The rate limiter's rule of fetches per DID (``CONFER_DID_FETCH_BUDGET_DID``)."""


class Limiter(Protocol):
    """What the budget needs of ``services.ratelimits.RateLimiter``."""

    async def check(self, rule: str, key: str) -> None:
        """Raise RateLimitedError when ``key`` is over ``rule``."""

    async def count(self, rule: str, key: str) -> None:
        """Count one attempt for ``key`` under ``rule``."""


class DIDBudgetExhaustedError(DIDResolutionError):
    """A fetch was not made: the host's or the DID's fetch budget is spent for now."""


class KeyedLocks:
    """One :class:`asyncio.Semaphore` of ``size`` per key (a lock when 1), held in memory only
    while a task holds or awaits it.

    The map stays as small as the number of keys in use at once: the last task to leave a
    key's semaphore drops it (a map of one lock per DID ever seen would grow with every
    stranger).
    """

    def __init__(self, size: int = 1) -> None:
        self._size = size
        self._locks: dict[str, tuple[asyncio.Semaphore, list[int]]] = {}

    def __len__(self) -> int:
        """How many keys have a lock right now."""
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold ``key``'s semaphore for the block (waiting for it first)."""
        lock, users = self._locks.setdefault(key, (asyncio.Semaphore(self._size), [0]))
        users[0] += 1  # no await since the lookup: nobody can drop the entry in between
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if users[0] == 0:
                del self._locks[key]


def host_of(did: str) -> str:
    """The ``host[:port]`` a did:web DID's document lives on (did:web §3.2)."""
    host, port = did_host(did)
    return host if port is None else f"{host}:{port}"


class ResolutionBudget:
    """The budgets of the module docstring over ``limiter``'s storage; one per process.

    ``failure_ttl`` (seconds) is how long an unreachable host is remembered.
    """

    def __init__(
        self, limiter: Limiter, clock: Clock, *, per_host_at_once: int, failure_ttl: float
    ) -> None:
        self._limiter = limiter
        self._clock = clock
        self._at_once = KeyedLocks(per_host_at_once)
        self._failure_ttl = timedelta(seconds=failure_ttl)
        self._down: dict[str, tuple[datetime, DIDHostUnreachableError]] = {}

    async def spend(self, did: str, *, document: bool = True) -> str:
        """Count one fetch for ``did``'s host (and, with ``document``, for the DID); its host.

        Raises DIDHostUnreachableError while the host is remembered as unreachable, and
        DIDBudgetExhaustedError (nothing counted) when either budget is spent.
        """
        host = host_of(did)
        self._raise_if_down(host)
        keys = [(DID_FETCH_HOST, host)] + ([(DID_FETCH_DID, did)] if document else [])
        for rule, key in keys:
            try:
                await self._limiter.check(rule, key)
            except RateLimitedError as exc:
                which = "host " + host if rule == DID_FETCH_HOST else did
                raise DIDBudgetExhaustedError(
                    f"the DID fetch budget of {which} is spent: {exc.detail}"
                ) from exc
        for rule, key in keys:
            await self._limiter.count(rule, key)
        return host

    @contextlib.asynccontextmanager
    async def fetching(self, host: str) -> AsyncIterator[None]:
        """Hold one of the host's fetch slots; a host-level failure inside is remembered."""
        async with self._at_once.hold(host):
            try:
                yield
            except DIDHostUnreachableError as exc:
                self._remember(host, exc)
                raise

    def _remember(self, host: str, error: DIDHostUnreachableError) -> None:
        now = self._clock.now()
        if len(self._down) >= MAX_REMEMBERED_HOSTS:  # bounded under a flood of hosts
            self._down = {h: f for h, f in self._down.items() if now - f[0] < self._failure_ttl}
            if len(self._down) >= MAX_REMEMBERED_HOSTS:
                self._down.clear()
        self._down[host] = (now, error)

    def _raise_if_down(self, host: str) -> None:
        failure = self._down.get(host)
        if failure is None:
            return
        when, error = failure
        if self._clock.now() - when < self._failure_ttl:
            raise DIDHostUnreachableError(f"{host} is unreachable (cached): {error.detail}")
        del self._down[host]
