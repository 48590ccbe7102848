"""The event bus over NATS (nats-py): subjects from the data model's "NATS subjects".

- ``user.{user_id}.events``: every frame for a user; each gateway process subscribes to the
  users with a device connected to it, and only while they are.
- ``conversation.{conversation_id}.messages``: each new message (``{"type", "data"}``), for
  listeners such as agent runtimes; the gateway itself does not need it for fan-out.
- ``task.{task_id}.updates``: each A2A task update (the ``statusUpdate`` JSON an SSE stream
  emits); one subscription per open ``SubscribeToTask`` / ``SendStreamingMessage`` stream.

Core NATS is at-most-once; that is enough because PostgreSQL holds every durable event: a
device that sees a gap in offsets fills it from the database, and a reconnect replays.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from gateway.backend_urls import connect_nats
from gateway.realtime.bus import (
    Deliver,
    EventBus,
    TaskDeliver,
    Unwatch,
    decode_frame,
    encode_frame,
)
from gateway.realtime.subscriber import Frame

log = logging.getLogger(__name__)


def user_subject(user_id: str) -> str:
    """``user.{user_id}.events``."""
    return f"user.{user_id}.events"


def conversation_subject(conversation_id: str) -> str:
    """``conversation.{conversation_id}.messages``."""
    return f"conversation.{conversation_id}.messages"


_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,128}")


def task_subject(task_id: str) -> str:
    """``task.{task_id}.updates``. Raises ValueError unless ``task_id`` is one plain subject
    token (no ``.``, wildcard or space: it must not reach other tasks' subjects)."""
    if not _TOKEN.fullmatch(task_id):
        raise ValueError("a task id must be letters, digits, '-' or '_'")
    return f"task.{task_id}.updates"


class NatsBus(EventBus):
    """Publishes frames to ``user.{id}.events`` and subscribes per watched user."""

    def __init__(self, url: str, *, connect_timeout: float = 15.0) -> None:
        self.url = url
        self.connect_timeout = connect_timeout  # seconds for the first connection
        self._nc: Client | None = None
        self._deliver: Deliver | None = None
        self._subscriptions: dict[str, Any] = {}
        self._task_subscriptions: set[Any] = set()

    async def start(self, deliver: Deliver) -> None:
        self._deliver = deliver
        self._nc = await connect_nats(self.url, name="confer-gateway", within=self.connect_timeout)

    async def close(self) -> None:
        nc, self._nc = self._nc, None
        self._subscriptions.clear()
        self._task_subscriptions.clear()
        if nc is not None and not nc.is_closed:
            await nc.close()

    def _client(self) -> Client:
        if self._nc is None:
            raise RuntimeError("the NATS bus is not started")
        return self._nc

    async def watch(self, user_id: str) -> None:
        if user_id in self._subscriptions:
            return
        nc = self._client()

        async def on_message(msg: Msg) -> None:
            try:
                frame = decode_frame(msg.data)
            except ValueError:
                log.warning("dropping a malformed frame on %s", msg.subject)
                return
            if self._deliver is not None:
                self._deliver(((user_id, frame),))

        self._subscriptions[user_id] = await nc.subscribe(user_subject(user_id), cb=on_message)
        await nc.flush()  # the server has the subscription before we read the database

    async def unwatch(self, user_id: str) -> None:
        subscription = self._subscriptions.pop(user_id, None)
        if subscription is not None and self._nc is not None and not self._nc.is_closed:
            await subscription.unsubscribe()

    async def publish(self, frames: Sequence[tuple[str, Frame]]) -> None:
        nc = self._client()
        for user_id, frame in frames:
            await nc.publish(user_subject(user_id), encode_frame(frame))

    async def publish_conversation(self, conversation_id: str, text: str) -> None:
        await self._client().publish(conversation_subject(conversation_id), text.encode())

    async def watch_task(self, task_id: str, deliver: TaskDeliver) -> Unwatch:
        subject = task_subject(task_id)
        nc = self._client()

        async def on_message(msg: Msg) -> None:
            deliver(msg.data)

        subscription = await nc.subscribe(subject, cb=on_message)
        self._task_subscriptions.add(subscription)

        async def unwatch() -> None:
            if subscription not in self._task_subscriptions:
                return  # ended already, or the bus was closed
            self._task_subscriptions.discard(subscription)
            if nc.is_closed or nc.is_draining:
                return
            # nats-py drops the subscription locally before its first await
            await subscription.unsubscribe()

        try:
            await nc.flush()  # the server has the subscription before the caller reads the task
        except BaseException:
            await unwatch()
            raise
        return unwatch

    async def publish_task(self, task_id: str, payload: bytes) -> None:
        await self._client().publish(task_subject(task_id), payload)

    def task_watches(self) -> int:
        return len(self._task_subscriptions)
