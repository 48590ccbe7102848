"""The ephemeral store on Redis (redis-py asyncio), with the data model's key names.

- ``presence:{user_id}``: the SET of connected device ids (SADD/SREM + SCARD in one MULTI, so
  exactly one process sees the first device arrive and the last one leave).
- ``ratelimit:{key}``: a rate-limit slot, ``SET NX PX`` (e.g. ``ratelimit:typing:{conv}:{user}``).
- ``unread:…``: cached unread counters (``SET EX`` / ``GET``) and per-conversation generations
  (``INCR``), see :mod:`gateway.services.unread`.
"""

from __future__ import annotations

from redis.asyncio import Redis

from gateway.realtime.ephemeral import EphemeralStore


class RedisEphemeralStore(EphemeralStore):
    """Presence and rate-limit slots shared by every gateway process through Redis."""

    def __init__(self, url: str) -> None:
        self._redis = Redis.from_url(url)

    async def allow(self, key: str, interval: float) -> bool:
        taken = await self._redis.set(
            f"ratelimit:{key}", b"1", nx=True, px=max(1, int(interval * 1000))
        )
        return bool(taken)

    async def device_online(self, user_id: str, device: str) -> bool:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.sadd(f"presence:{user_id}", device)
            pipe.scard(f"presence:{user_id}")
            added, count = await pipe.execute()
        return bool(added == 1 and count == 1)

    async def device_offline(self, user_id: str, device: str) -> bool:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.srem(f"presence:{user_id}", device)
            pipe.scard(f"presence:{user_id}")
            removed, count = await pipe.execute()
        return bool(removed == 1 and count == 0)

    async def user_online(self, user_id: str) -> bool:
        return bool(await self._redis.scard(f"presence:{user_id}"))

    async def get_counter(self, key: str) -> int | None:
        value = await self._redis.get(key)
        return int(value) if value is not None else None

    async def set_counter(self, key: str, value: int, ttl: float) -> None:
        await self._redis.set(key, value, px=max(1, int(ttl * 1000)))

    async def incr(self, key: str) -> int:
        return int(await self._redis.incr(key))

    async def close(self) -> None:
        await self._redis.aclose()
