"""One connected device: a bounded queue of frames with a drop policy for slow clients.

Frames are durable events (they carry the user's stream ``offset`` and are stored in
PostgreSQL, so a dropped connection can replay them), ephemeral events (``typing``,
``presence``: never stored, dropped first when the client falls behind) and control frames
(``pong``, ``ping``: tiny, never dropped). When the queue is full of durable events the client
is too slow: the subscriber is marked ``overflowed`` and the WebSocket is closed with 4008.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.realtime.wire import text_frame

FrameKind = Literal["event", "ephemeral", "control"]


@dataclass(frozen=True, slots=True)
class Frame:
    """A serialised server frame; ``offset`` is set for durable events only, ``delivers``
    to the id of a message whose ``delivered_at`` is set once a device received the frame.

    One frame object is shared by every device of its audience (a user's devices for a
    durable event, every recipient's for an ephemeral one): :meth:`wire` encodes it once.
    """

    text: str
    kind: FrameKind = "event"
    offset: int | None = None
    delivers: str | None = None
    _wire: bytes | None = field(default=None, init=False, repr=False, compare=False)

    def wire(self) -> bytes:
        """The frame as a WebSocket text frame (:func:`gateway.realtime.wire.text_frame`),
        built on the first call and reused by every later one."""
        wire = self._wire
        if wire is None:
            wire = text_frame(self.text.encode())
            object.__setattr__(self, "_wire", wire)
        return wire


def event_frame(event_type: str, offset: int, data_json: str, delivers: str | None = None) -> Frame:
    """A durable event ``{"type", "offset", "data"}``; ``data_json`` is already JSON text."""
    text = f'{{"type":{json.dumps(event_type)},"offset":{offset},"data":{data_json}}}'
    return Frame(text, "event", offset, delivers)


def ephemeral_frame(event_type: str, data: Any) -> Frame:
    """An ephemeral event ``{"type", "data"}`` (typing, presence): no offset, never stored."""
    return Frame(json.dumps({"type": event_type, "data": data}, separators=(",", ":")), "ephemeral")


def control_frame(frame_type: str, data: Any = None) -> Frame:
    """A control frame such as ``{"type": "pong"}``."""
    body: dict[str, Any] = {"type": frame_type}
    if data is not None:
        body["data"] = data
    return Frame(json.dumps(body, separators=(",", ":")), "control")


class Subscriber:
    """A device of ``user_id``: at most ``maxsize`` queued frames; ``offer`` never blocks.

    Ephemeral frames are only queued while the queue is under half full, and one is evicted
    to make room for a durable frame; with no ephemeral frame to evict, the subscriber
    overflows (``overflowed`` turns True for good). ``dropped`` counts the ephemeral frames
    lost that way.

    A session may set ``sink``, which takes a frame straight to the socket when nothing is
    queued (returning False when it cannot: the frame is then queued), and ``wake``, called
    after a frame was queued or the subscriber overflowed, so that no task has to wait on an
    idle connection, and ``recheck``, called when the user's login sessions may have changed
    (:meth:`gateway.realtime.hub.EventHub.recheck`). The queue itself exists only while
    frames wait in it: an idle device costs this object and no buffer (a ``deque`` reserves
    a 64-slot block up front).
    """

    __slots__ = (
        "_frames",
        "dropped",
        "maxsize",
        "overflowed",
        "recheck",
        "sink",
        "user_id",
        "wake",
    )

    def __init__(self, user_id: str, maxsize: int) -> None:
        self.user_id = user_id
        self.maxsize = max(2, maxsize)
        self.overflowed = False
        self.dropped = 0
        self.sink: Callable[[Frame], bool] | None = None
        self.wake: Callable[[], None] | None = None
        self.recheck: Callable[[], None] | None = None
        self._frames: deque[Frame] | None = None

    def __len__(self) -> int:
        return len(self._frames) if self._frames is not None else 0

    def offer(self, frame: Frame) -> bool:
        """Queue ``frame`` if the policy allows; returns whether it was queued."""
        if self.overflowed:
            return False
        frames = self._frames
        if not frames and self.sink is not None and self.sink(frame):
            return True
        if frames is None:
            frames = self._frames = deque()
        if frame.kind == "ephemeral" and len(frames) >= self.maxsize // 2:
            self.dropped += 1
            return False
        if frame.kind == "event" and len(frames) >= self.maxsize:
            if not self._evict_ephemeral(frames):
                self.overflowed = True
                if self.wake is not None:
                    self.wake()
                return False
        frames.append(frame)
        if self.wake is not None:
            self.wake()
        return True

    def _evict_ephemeral(self, frames: deque[Frame]) -> bool:
        for index, queued in enumerate(frames):
            if queued.kind == "ephemeral":
                del frames[index]
                self.dropped += 1
                return True
        return False

    def pop(self) -> Frame | None:
        """The next queued frame, or None when the queue is empty (then it is released)."""
        frames = self._frames
        if not frames:
            self._frames = None
            return None
        return frames.popleft()
