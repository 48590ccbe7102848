"""Client frames other than ping/pong: ``typing`` — coarse, rate limited, never stored.

A ``{"type": "typing", "conversation_id": …}`` frame from a participant becomes an ephemeral
``typing`` event for the conversation's other local users, at most once per
``typing_interval_seconds`` per user and conversation (extra frames are ignored), and a
signal to its remote members (:mod:`gateway.services.signals`).
"""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.ids import is_ulid
from gateway.realtime.hub import EventHub
from gateway.services.signals import Signals, typing_to_peers
from gateway.store import conversations as conv_store
from models import User

TYPING = "typing"
TYPING_EXPIRES_SECONDS = 6


async def handle_client_frame(
    pool: asyncpg.Pool,
    hub: EventHub,
    interval: float,
    user: User,
    frame: dict[str, Any],
    signals: Signals | None = None,
) -> bool:
    """Act on one client frame; returns False when its ``type`` is not supported.

    ``interval`` is ``typing_interval_seconds``: the least time between two ``typing`` events
    of one user in one conversation; ``signals`` sends it to remote members too."""
    if frame.get("type") != TYPING:
        return False
    conversation_id = frame.get("conversation_id")
    if not isinstance(conversation_id, str) or not is_ulid(conversation_id):
        return True  # malformed typing hints are ignored, not worth a disconnect
    await send_typing(pool, hub, interval, user, conversation_id, signals)
    return True


async def send_typing(
    pool: asyncpg.Pool,
    hub: EventHub,
    interval: float,
    user: User,
    conversation_id: str,
    signals: Signals | None = None,
) -> bool:
    """Tell the conversation's other users that ``user`` is typing; False when rate limited
    or when the user is not a participant (nothing is sent then)."""
    key = f"typing:{conversation_id}:{user.id}"
    if not await hub.ephemeral.allow(key, interval):
        return False
    async with pool.acquire() as conn:
        conversation = await conv_store.get_conversation_for_user(
            conn, conversation_id=conversation_id, user_id=user.id
        )
        if conversation is None:
            return False
        participants = await conv_store.list_participants(conn, conversation_id=conversation_id)
        if signals is not None:
            await typing_to_peers(conn, signals, user, conversation_id)
    others = [p["user_id"] for p in participants if p["user_id"] and p["user_id"] != user.id]
    data = {
        "conversation_id": conversation_id,
        "user_id": user.id,
        "did": user.did,
        "expires_in": TYPING_EXPIRES_SECONDS,
    }
    await hub.emit_ephemeral(others, TYPING, data)
    return True
