"""In-process fan-out of events to each user's connected devices.

An event is serialised to JSON once and the same text is put on every subscriber's bounded
queue. A subscriber whose queue is full is marked ``overflowed`` and its connection is closed
by the WebSocket handler with close code 4008, so one slow client never delays the others.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any


class Subscriber:
    """One connected device of ``user_id``: a bounded queue of serialised events."""

    def __init__(self, user_id: str, maxsize: int) -> None:
        self.user_id = user_id
        self.queue: asyncio.Queue[str] = asyncio.Queue(maxsize)
        self.overflowed = asyncio.Event()


class EventHub:
    """Registry of subscribers by user id; ``publish`` never blocks."""

    def __init__(self, queue_size: int = 256) -> None:
        self._queue_size = queue_size
        self._subscribers: dict[str, set[Subscriber]] = {}

    def subscribe(self, user_id: str) -> Subscriber:
        """Register a new device connection for ``user_id``."""
        subscriber = Subscriber(user_id, self._queue_size)
        self._subscribers.setdefault(user_id, set()).add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        """Forget a connection; safe to call more than once."""
        group = self._subscribers.get(subscriber.user_id)
        if group is not None:
            group.discard(subscriber)
            if not group:
                del self._subscribers[subscriber.user_id]

    def connections(self, user_id: str) -> int:
        """How many devices of ``user_id`` are connected to this process."""
        return len(self._subscribers.get(user_id, ()))

    def publish(self, user_ids: Iterable[str], event_type: str, data: Any) -> int:
        """Queue ``{"type": event_type, "data": data}`` for every device of ``user_ids``.

        ``data`` must be JSON-serialisable. Returns the number of queues the event reached.
        """
        text = json.dumps({"type": event_type, "data": data}, separators=(",", ":"))
        reached = 0
        for user_id in set(user_ids):
            for subscriber in tuple(self._subscribers.get(user_id, ())):
                try:
                    subscriber.queue.put_nowait(text)
                    reached += 1
                except asyncio.QueueFull:
                    subscriber.overflowed.set()
        return reached
