"""The ephemeral store on Redis (redis-py asyncio), with the data model's key names.

- ``presence:{user_id}``: the SET of connected device ids, and ``presence:{user_id}:{device}``
  a lease per device (``SET PX``, renewed by the connection's heartbeat). A member whose lease
  ran out — its process died without saying goodbye — is pruned and does not count. Each
  change runs as one Lua script, so exactly one process sees the first device arrive and the
  last one leave. (The scripts derive the lease keys from the set's name, so this store wants
  a single Redis, not a cluster.)
- ``ratelimit:{key}``: a rate-limit slot, ``SET NX PX`` (e.g. ``ratelimit:typing:{conv}:{user}``).
- ``unread:…``: cached unread counters (``SET EX`` / ``GET``) and per-conversation generations
  (``INCR``), see :mod:`gateway.services.unread`.
"""

from __future__ import annotations

from redis.asyncio import Redis

from gateway.realtime.ephemeral import EphemeralStore


class RedisEphemeralStore(EphemeralStore):
    """Presence and rate-limit slots shared by every gateway process through Redis."""

    def __init__(self, url: str, presence_ttl: float = 60.0) -> None:
        self._redis = Redis.from_url(url)
        self._ttl_ms = max(1000, int(presence_ttl * 1000))
        self._online = self._redis.register_script(_PRUNE + _ONLINE)
        self._offline = self._redis.register_script(_PRUNE + _OFFLINE)
        self._alive = self._redis.register_script(_ALIVE)
        self._live = self._redis.register_script(_PRUNE + "return live_devices()")

    async def allow(self, key: str, interval: float) -> bool:
        taken = await self._redis.set(
            f"ratelimit:{key}", b"1", nx=True, px=max(1, int(interval * 1000))
        )
        return bool(taken)

    async def device_online(self, user_id: str, device: str) -> bool:
        first = await self._online(keys=[f"presence:{user_id}"], args=[device, self._ttl_ms])
        return bool(first)

    async def device_offline(self, user_id: str, device: str) -> bool:
        last = await self._offline(keys=[f"presence:{user_id}"], args=[device])
        return bool(last)

    async def device_alive(self, user_id: str, device: str) -> None:
        await self._alive(keys=[f"presence:{user_id}"], args=[device, self._ttl_ms])

    async def user_online(self, user_id: str) -> bool:
        return bool(await self._live(keys=[f"presence:{user_id}"], args=[]))

    async def device_count(self, user_id: str) -> int | None:
        return int(await self._live(keys=[f"presence:{user_id}"], args=[]))

    async def get_counter(self, key: str) -> int | None:
        value = await self._redis.get(key)
        return int(value) if value is not None else None

    async def set_counter(self, key: str, value: int, ttl: float) -> None:
        await self._redis.set(key, value, px=max(1, int(ttl * 1000)))

    async def incr(self, key: str) -> int:
        return int(await self._redis.incr(key))

    async def close(self) -> None:
        await self._redis.aclose()


_PRUNE = """
local function live_devices()
  local live = 0
  for _, device in ipairs(redis.call('SMEMBERS', KEYS[1])) do
    if redis.call('EXISTS', KEYS[1] .. ':' .. device) == 1 then
      live = live + 1
    else
      redis.call('SREM', KEYS[1], device)
    end
  end
  return live
end
"""
"""Lua: count the set's devices whose lease is alive, dropping the others."""

_ONLINE = """
local live = live_devices()
local added = redis.call('SADD', KEYS[1], ARGV[1])
redis.call('SET', KEYS[1] .. ':' .. ARGV[1], '1', 'PX', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if added == 1 and live == 0 then return 1 end
return 0
"""

_OFFLINE = """
local removed = redis.call('SREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[1] .. ':' .. ARGV[1])
if removed == 1 and live_devices() == 0 then return 1 end
return 0
"""

_ALIVE = """
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('SET', KEYS[1] .. ':' .. ARGV[1], '1', 'PX', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
