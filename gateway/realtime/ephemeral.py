"""Short-lived shared state: rate-limit slots, presence, typing and cached counters (never the
source of truth).

``EphemeralStore`` is the interface; ``MemoryEphemeralStore`` keeps it in this process (the
default); ``gateway.realtime.redis_store.RedisEphemeralStore`` shares it between gateway
processes when ``CONFER_REDIS_URL`` is set, with the data model's key names.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod


class EphemeralStore(ABC):
    """Rate-limit slots and presence sets shared by the gateway processes."""

    @abstractmethod
    async def allow(self, key: str, interval: float) -> bool:
        """Take the slot ``key`` for ``interval`` seconds; False while it is still taken."""

    @abstractmethod
    async def device_online(self, user_id: str, device: str) -> bool:
        """Record a connected device; True when it is the user's first (the user came online)."""

    @abstractmethod
    async def device_offline(self, user_id: str, device: str) -> bool:
        """Forget a device; True when it was the user's last (the user went offline)."""

    async def device_alive(self, user_id: str, device: str) -> None:
        """The device is still connected: renew its presence lease (stores whose entries can
        outlive a crashed process expire them; the in-memory store needs nothing)."""
        return None

    @abstractmethod
    async def user_online(self, user_id: str) -> bool:
        """True while at least one device of the user is connected to any gateway process."""

    async def device_count(self, user_id: str) -> int | None:
        """How many devices of the user are connected to any gateway process, when this store
        is shared between processes; None for a store of this process only (the hub's own
        count is then the count)."""
        return None

    @abstractmethod
    async def get_counter(self, key: str) -> int | None:
        """The integer stored at ``key``, or None when absent (expired, evicted, never set)."""

    @abstractmethod
    async def set_counter(self, key: str, value: int, ttl: float) -> None:
        """Store ``value`` at ``key`` for ``ttl`` seconds."""

    @abstractmethod
    async def incr(self, key: str) -> int:
        """Add 1 to the integer at ``key`` (0 when absent, kept without expiry); the new value."""

    async def close(self) -> None:
        """Release connections; safe to call more than once."""
        return None


class MemoryEphemeralStore(EphemeralStore):
    """The single-process store: dictionaries, with a monotonic clock for the slots."""

    def __init__(self) -> None:
        self._slots: dict[str, float] = {}
        self._devices: dict[str, set[str]] = {}
        self._counters: dict[str, tuple[int, float]] = {}

    async def allow(self, key: str, interval: float) -> bool:
        now = time.monotonic()
        if self._slots.get(key, 0.0) > now:
            return False
        if len(self._slots) > 100_000:  # bound the memory: drop expired slots
            self._slots = {k: v for k, v in self._slots.items() if v > now}
        self._slots[key] = now + interval
        return True

    async def device_online(self, user_id: str, device: str) -> bool:
        devices = self._devices.setdefault(user_id, set())
        devices.add(device)
        return len(devices) == 1

    async def device_offline(self, user_id: str, device: str) -> bool:
        devices = self._devices.get(user_id)
        if devices is None:
            return False
        devices.discard(device)
        if devices:
            return False
        del self._devices[user_id]
        return True

    async def user_online(self, user_id: str) -> bool:
        return bool(self._devices.get(user_id))

    async def get_counter(self, key: str) -> int | None:
        value, until = self._counters.get(key, (0, 0.0))
        return value if until > time.monotonic() else None

    async def set_counter(self, key: str, value: int, ttl: float) -> None:
        now = time.monotonic()
        if len(self._counters) > 100_000:  # bound the memory: drop expired entries
            self._counters = {k: v for k, v in self._counters.items() if v[1] > now}
        self._counters[key] = (value, now + ttl)

    async def incr(self, key: str) -> int:
        value = (await self.get_counter(key) or 0) + 1
        self._counters[key] = (value, float("inf"))
        return value
