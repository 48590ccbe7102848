"""Choose the real-time backends from settings: NATS or in-process bus, Redis or memory store."""

from __future__ import annotations

import asyncpg

from gateway.realtime.bus import EventBus, InProcessBus
from gateway.realtime.ephemeral import EphemeralStore, MemoryEphemeralStore
from gateway.realtime.hub import EventHub
from gateway.settings import Settings


def build_bus(settings: Settings) -> EventBus:
    """``NatsBus`` when ``CONFER_NATS_URL`` is set, else the in-process bus."""
    if settings.nats_url:
        from gateway.realtime.nats_bus import NatsBus

        return NatsBus(settings.nats_url, connect_timeout=settings.backend_connect_timeout_seconds)
    return InProcessBus()


def build_ephemeral(settings: Settings) -> EphemeralStore:
    """``RedisEphemeralStore`` when ``CONFER_REDIS_URL`` is set, else the in-memory store."""
    if settings.redis_url:
        from gateway.realtime.redis_store import RedisEphemeralStore

        # a device's presence outlives its process by at most three session checks
        ttl = max(15.0, 3 * settings.ws_session_check_seconds)
        return RedisEphemeralStore(settings.redis_url, presence_ttl=ttl)
    return MemoryEphemeralStore()


async def start_hub(settings: Settings, pool: asyncpg.Pool) -> EventHub:
    """Build the hub with the configured backends and connect it. Close it with ``close()``."""
    hub = EventHub(
        settings.ws_queue_size,
        pool=pool,
        bus=build_bus(settings),
        ephemeral=build_ephemeral(settings),
    )
    await hub.start()
    return hub
