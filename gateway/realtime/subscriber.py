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
from typing import Any, Literal

from gateway.realtime.wire import frame_header, text_frame

FrameKind = Literal["event", "ephemeral", "control"]


class Frame:
    """A serialised server frame; ``offset`` is set for durable events only, ``delivers``
    to the id of a message whose ``delivered_at`` is set once a device received the frame.

    One frame object is shared by every device of its audience (a user's devices for a
    durable event, every recipient's for an ephemeral one). It is made from its JSON ``text``
    or from a durable event's shared :class:`EventEncoding` and the user's ``offset``; either
    way :meth:`wire` builds its bytes on the first call only, so a frame that no socket of
    this process takes costs no encoding.
    """

    __slots__ = ("_encoding", "_text", "_wire", "delivers", "kind", "offset")

    def __init__(
        self,
        text: str | None,
        kind: FrameKind = "event",
        offset: int | None = None,
        delivers: str | None = None,
        *,
        encoding: EventEncoding | None = None,
    ) -> None:
        if text is None and (encoding is None or offset is None):
            raise ValueError("a frame needs its text, or an event's encoding and an offset")
        self._text = text
        self._encoding = encoding
        self._wire: bytes | None = None
        self.kind: FrameKind = kind
        self.offset = offset
        self.delivers = delivers

    def __repr__(self) -> str:
        return f"Frame({self.text!r}, {self.kind!r}, {self.offset!r}, {self.delivers!r})"

    @property
    def text(self) -> str:
        """The frame's JSON text."""
        text = self._text
        if text is None:
            assert self._encoding is not None and self.offset is not None
            text = self._text = self._encoding.text(self.offset)
        return text

    def wire(self) -> bytes:
        """The frame as a WebSocket text frame (:func:`gateway.realtime.wire.text_frame`),
        built on the first call and reused by every later one."""
        wire = self._wire
        if wire is None:
            encoding = self._encoding
            if encoding is not None and self.offset is not None:
                wire = encoding.wire(self.offset)
            else:
                wire = text_frame(self.text.encode())
            self._wire = wire
        return wire


class EventEncoding:
    """One durable event encoded once for all the users it is appended for.

    A durable event's frame ``{"type","offset","data"}`` differs between users only in the
    offset's digits: the text and bytes before and after them are made here once, and each
    user's frame (:meth:`frame`) joins them around its offset when it is first needed (the
    same text and bytes :func:`event_frame` gives). ``data_json`` is already JSON text.
    """

    __slots__ = ("_after", "_after_text", "_before", "_before_text", "_size")

    def __init__(self, event_type: str, data_json: str) -> None:
        self._before_text = f'{{"type":{json.dumps(event_type)},"offset":'
        self._after_text = f',"data":{data_json}}}'
        self._before = self._before_text.encode()
        self._after = self._after_text.encode()
        self._size = len(self._before) + len(self._after)

    def frame(self, offset: int, delivers: str | None = None) -> Frame:
        """The event at ``offset`` of a user's stream, as one frame for that user's devices."""
        return Frame(None, "event", offset, delivers, encoding=self)

    def text(self, offset: int) -> str:
        """The JSON text of the event at ``offset``."""
        return f"{self._before_text}{offset}{self._after_text}"

    def wire(self, offset: int) -> bytes:
        """The WebSocket text frame of the event at ``offset`` (one join of shared bytes)."""
        digits = b"%d" % offset
        header = frame_header(self._size + len(digits))
        return b"".join((header, self._before, digits, self._after))


def event_frame(event_type: str, offset: int, data_json: str, delivers: str | None = None) -> Frame:
    """A durable event ``{"type", "offset", "data"}``; ``data_json`` is already JSON text."""
    return EventEncoding(event_type, data_json).frame(offset, delivers)


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
