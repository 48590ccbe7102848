"""The event bus: how a frame for a user reaches the gateway process holding its devices.

``EventBus`` is the interface; ``InProcessBus`` (the default) hands frames straight to this
process's hub; ``gateway.realtime.nats_bus.NatsBus`` carries them over NATS subjects
``user.{user_id}.events`` and ``conversation.{conversation_id}.messages`` (data model, "NATS
subjects") when ``CONFER_NATS_URL`` is set. A2A task updates travel on the same bus, one channel
per task (``task.{task_id}.updates`` on NATS), so a stream on one process sees a decision made
on another.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence

from gateway.realtime.subscriber import Frame

Deliver = Callable[[Sequence[tuple[str, Frame]]], None]
"""Called with the (user_id, frame) pairs that reach this process, in order: a publish's whole
batch at once in this process, one pair per message from NATS."""

TaskDeliver = Callable[[bytes], None]
"""Called with the payload of every update published for a watched task."""

Unwatch = Callable[[], Awaitable[None]]
"""Ends one task watch. Its local part is done before its first suspension, so a watch ends
even when the awaiting task is being cancelled (an SSE client that went away)."""


def encode_frame(frame: Frame) -> bytes:
    """Wire form of a frame on the bus: ``<offset>\\n<kind>\\n<delivers>\\n<JSON text>``
    (empty offset and delivers when unset)."""
    offset = "" if frame.offset is None else str(frame.offset)
    return f"{offset}\n{frame.kind}\n{frame.delivers or ''}\n{frame.text}".encode()


def decode_frame(payload: bytes) -> Frame:
    """Inverse of ``encode_frame``. Raises ValueError on a malformed payload."""
    offset, kind, delivers, text = payload.decode().split("\n", 3)
    if kind not in ("event", "ephemeral", "control"):
        raise ValueError(f"unknown frame kind {kind!r}")
    return Frame(text, kind, int(offset) if offset else None, delivers or None)  # type: ignore[arg-type]


class EventBus(ABC):
    """Publish frames for users; deliver the frames of watched users to this process."""

    @abstractmethod
    async def start(self, deliver: Deliver) -> None:
        """Connect; from now on frames of watched users are passed to ``deliver``."""

    @abstractmethod
    async def close(self) -> None:
        """Disconnect; safe to call more than once."""

    @abstractmethod
    async def watch(self, user_id: str) -> None:
        """Receive ``user_id``'s frames here; returns once the subscription is active."""

    @abstractmethod
    async def unwatch(self, user_id: str) -> None:
        """Stop receiving ``user_id``'s frames."""

    @abstractmethod
    async def publish(self, frames: Sequence[tuple[str, Frame]]) -> None:
        """Send each (user_id, frame) to every process watching that user."""

    @abstractmethod
    async def publish_conversation(self, conversation_id: str, text: str) -> None:
        """Announce a conversation event (``conversation.{id}.messages``) to listeners."""

    @abstractmethod
    async def watch_task(self, task_id: str, deliver: TaskDeliver) -> Unwatch:
        """Pass every update published for ``task_id`` (on any process) to ``deliver`` until
        the returned :data:`Unwatch` is awaited; returns once the watch is active.

        Raises ValueError for a ``task_id`` that cannot name a channel.
        """

    @abstractmethod
    async def publish_task(self, task_id: str, payload: bytes) -> None:
        """Send ``payload`` to every watch of ``task_id`` on every process."""

    @abstractmethod
    def task_watches(self) -> int:
        """How many task watches of this process are active (for leak checks and metrics)."""


class InProcessBus(EventBus):
    """The single-process bus: publishing is a direct call to this process's hub."""

    def __init__(self) -> None:
        self._deliver: Deliver | None = None
        self._task_watches: dict[str, set[TaskDeliver]] = {}

    async def start(self, deliver: Deliver) -> None:
        self._deliver = deliver

    async def close(self) -> None:
        self._deliver = None

    async def watch(self, user_id: str) -> None:
        return None

    async def unwatch(self, user_id: str) -> None:
        return None

    async def publish(self, frames: Sequence[tuple[str, Frame]]) -> None:
        if self._deliver is not None:
            self._deliver(frames)

    async def publish_conversation(self, conversation_id: str, text: str) -> None:
        return None

    async def watch_task(self, task_id: str, deliver: TaskDeliver) -> Unwatch:
        # a fresh wrapper per watch, so the same function may watch twice
        def watch(payload: bytes) -> None:
            deliver(payload)

        self._task_watches.setdefault(task_id, set()).add(watch)

        async def unwatch() -> None:
            group = self._task_watches.get(task_id, set())
            group.discard(watch)
            if not group:
                self._task_watches.pop(task_id, None)

        return unwatch

    async def publish_task(self, task_id: str, payload: bytes) -> None:
        for deliver in tuple(self._task_watches.get(task_id, ())):
            deliver(payload)

    def task_watches(self) -> int:
        return sum(len(group) for group in self._task_watches.values())
