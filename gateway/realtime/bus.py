"""The event bus: how a frame for a user reaches the gateway process holding its devices.

``EventBus`` is the interface; ``InProcessBus`` (the default) hands frames straight to this
process's hub; ``gateway.realtime.nats_bus.NatsBus`` carries them over NATS subjects
``user.{user_id}.events`` and ``conversation.{conversation_id}.messages`` (data model, "NATS
subjects") when ``CONFER_NATS_URL`` is set.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from gateway.realtime.subscriber import Frame

Deliver = Callable[[str, Frame], None]
"""Called with (user_id, frame) for every frame that reaches this process."""


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


class InProcessBus(EventBus):
    """The single-process bus: publishing is a direct call to this process's hub."""

    def __init__(self) -> None:
        self._deliver: Deliver | None = None

    async def start(self, deliver: Deliver) -> None:
        self._deliver = deliver

    async def close(self) -> None:
        self._deliver = None

    async def watch(self, user_id: str) -> None:
        return None

    async def unwatch(self, user_id: str) -> None:
        return None

    async def publish(self, frames: Sequence[tuple[str, Frame]]) -> None:
        if self._deliver is None:
            return
        for user_id, frame in frames:
            self._deliver(user_id, frame)

    async def publish_conversation(self, conversation_id: str, text: str) -> None:
        return None
