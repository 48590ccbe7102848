"""Coarse presence: a user is online while at least one device is connected anywhere.

Only the transitions are announced — the first device connecting, the last one leaving —
as an ephemeral ``presence`` event to the users who share a direct conversation with the user
(not to every group member: presence is the largest load of chat servers, so it stays coarse). The
device set lives in the hub's ephemeral store (memory, or Redis ``presence:{user_id}``).
"""

from __future__ import annotations

import logging

import asyncpg

from gateway.realtime.hub import EventHub
from gateway.services.signals import Signals, presence_to_peers
from gateway.store import conversations as conv_store
from models import User

log = logging.getLogger(__name__)

PRESENCE = "presence"


async def _announce(
    pool: asyncpg.Pool, hub: EventHub, user: User, status: str, signals: Signals | None
) -> None:
    async with pool.acquire() as conn:
        audience = await conv_store.list_co_participant_user_ids(conn, user_id=user.id)
    await hub.emit_ephemeral(audience, PRESENCE, {"user_id": user.id, "status": status})
    if signals is not None:  # and the peers sharing a direct conversation, as a signal
        await presence_to_peers(pool, signals, user, status)


async def device_connected(
    pool: asyncpg.Pool, hub: EventHub, user: User, device: str, signals: Signals | None = None
) -> None:
    """Record ``device``; announce ``online`` when it is the user's first (to peers too,
    with ``signals``)."""
    if await hub.ephemeral.device_online(user.id, device):
        await _announce(pool, hub, user, "online", signals)


async def device_disconnected(
    pool: asyncpg.Pool, hub: EventHub, user: User, device: str, signals: Signals | None = None
) -> None:
    """Forget ``device``; announce ``offline`` when it was the user's last. Never raises."""
    try:
        if await hub.ephemeral.device_offline(user.id, device):
            await _announce(pool, hub, user, "offline", signals)
    except Exception:  # shutting down: the pool or the bus may already be closed
        log.warning("presence update for %s failed", user.id, exc_info=True)
