"""One device's WebSocket session after authentication: resume, live events, heartbeat.

The session (protocol in ``docs/websocket.md``):

1. registers the device with the hub (the bus subscription is active before anything is read),
2. reads the user's stream head and sends ``ready`` with ``epoch`` and ``offset``,
3. when the client asked to resume from (epoch, offset): replays exactly the stored events
   after that offset, or sends ``resync_required`` when the epoch differs, the offset is ahead
   of the stream, or the gap is older than the replay window,
4. then forwards live frames in offset order, filling any gap from PostgreSQL (frames may
   reach a process out of order), while a reader task answers the client and a heartbeat task
   pings it and closes it when it stops answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect

from did.resolver import json_nesting_exceeds
from gateway.errors import TooManyConnectionsError
from gateway.realtime.hub import EventHub
from gateway.realtime.subscriber import Subscriber, control_frame

CLOSE_UNSUPPORTED = 1003
CLOSE_TOO_SLOW = 4008
CLOSE_HEARTBEAT_TIMEOUT = 4009
CLOSE_TOO_MANY_CONNECTIONS = 4029  # the user's connection budget on this process is spent
CLOSE_TIMEOUT = 5.0
REPLAY_PAGE = 500
MAX_FRAME_DEPTH = 8
"""Deepest nesting a client frame may have; the protocol's frames are flat (docs/websocket.md)."""

ClientFrameHandler = Callable[[dict[str, Any]], Awaitable[bool]]
"""Handles a client frame other than ping/pong; returns False for an unsupported one."""


def parse_frame(raw: str) -> dict[str, Any] | None:
    """A client frame as a JSON object, or None when it is not one.

    The nesting depth is checked before parsing: a frame of a few thousand ``[`` would make
    ``json.loads`` raise RecursionError, and frames arrive before any authentication.
    """
    if json_nesting_exceeds(raw, MAX_FRAME_DEPTH):
        return None
    try:
        frame = json.loads(raw)
    except ValueError:
        return None
    return frame if isinstance(frame, dict) else None


async def receive_text_frame(websocket: WebSocket) -> str | None:
    """The next client message's text, or None for a binary frame (RFC 6455 §5.6).

    Raises WebSocketDisconnect when the client left. Starlette's ``receive_text`` raises
    KeyError on a binary frame, which would drop the socket without a close frame.
    """
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000), message.get("reason"))
    text = message.get("text")
    return text if isinstance(text, str) else None


@dataclass(frozen=True)
class Resume:
    """Where the client left off: the stream ``epoch`` and the last ``offset`` it processed."""

    epoch: str
    offset: int


@dataclass(frozen=True)
class SessionLimits:
    """Replay window (events), heartbeat timing (seconds) and the most connections one user
    may hold on this process (None = no bound)."""

    replay_window: int = 1000
    ping_interval: float = 25.0
    ping_timeout: float = 20.0
    max_connections: int | None = None


class EventSession:
    """Runs one authenticated device connection until it ends; see the module docstring."""

    def __init__(
        self,
        websocket: WebSocket,
        hub: EventHub,
        user_id: str,
        limits: SessionLimits,
        on_frame: ClientFrameHandler | None = None,
    ) -> None:
        self.websocket = websocket
        self.hub = hub
        self.user_id = user_id
        self.limits = limits
        self.on_frame = on_frame
        self.last_offset = 0
        self.last_seen = time.monotonic()
        self.close_code: int | None = None
        self.close_reason = ""

    async def run(self, ready: dict[str, Any], resume: Resume | None) -> None:
        """Serve the session; returns after the socket is closed or the client left."""
        try:
            subscriber = await self.hub.connect(
                self.user_id, max_connections=self.limits.max_connections
            )
        except TooManyConnectionsError as exc:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    self.websocket.close(code=CLOSE_TOO_MANY_CONNECTIONS, reason=exc.detail[:120]),
                    CLOSE_TIMEOUT,
                )
            return
        tasks: list[asyncio.Task[Any]] = []
        try:
            head = await self.hub.head(self.user_id)
            await self.websocket.send_json(
                {"type": "ready", "data": {**ready, "epoch": head.epoch, "offset": head.head}}
            )
            self.last_offset = head.head
            if resume is not None:
                await self._resume(resume, head.epoch, head.head)
            tasks = [
                asyncio.create_task(self._pump(subscriber)),
                asyncio.create_task(self._read(subscriber)),
                asyncio.create_task(self._heartbeat(subscriber)),
                asyncio.create_task(subscriber.overflowed.wait()),
            ]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        except Exception:  # the client went away mid-send; nothing more to do for it
            pass
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.hub.disconnect(subscriber)
        if subscriber.overflowed.is_set():
            self.close_code, self.close_reason = CLOSE_TOO_SLOW, "client too slow"
        if self.close_code is not None:
            # A client that is not reading may never drain the close frame: bound the wait.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    self.websocket.close(code=self.close_code, reason=self.close_reason),
                    CLOSE_TIMEOUT,
                )

    async def _resume(self, resume: Resume, epoch: str, head: int) -> None:
        reason = None
        if resume.epoch != epoch:
            reason = "epoch_changed"
        elif resume.offset > head:
            reason = "offset_ahead"
        elif head - resume.offset > self.limits.replay_window:
            reason = "too_old"
        elif not await self._replay(resume.offset, head):
            reason = "too_old"
        if reason is not None:
            await self._resync(reason, epoch, head)

    async def _resync(self, reason: str, epoch: str, offset: int) -> None:
        """Tell the client its state cannot be recovered; it continues from ``offset``."""
        data = {"reason": reason, "epoch": epoch, "offset": offset}
        await self.websocket.send_text(control_frame("resync_required", data).text)
        self.last_offset = offset

    async def _replay(self, after: int, upto: int) -> bool:
        """Send stored events ``after < offset <= upto``; False when some were trimmed."""
        self.last_offset = after
        while self.last_offset < upto:
            frames = await self.hub.replay(
                self.user_id, after=self.last_offset, upto=upto, limit=REPLAY_PAGE
            )
            if not frames or frames[0].offset != self.last_offset + 1:
                return False
            for frame in frames:
                await self.websocket.send_text(frame.text)
                self.last_offset = frame.offset or self.last_offset
        return True

    async def _pump(self, subscriber: Subscriber) -> None:
        while True:
            frame = await subscriber.get()
            if frame.offset is None:
                await self.websocket.send_text(frame.text)
                continue
            if frame.offset <= self.last_offset:
                continue  # already sent by a replay or gap fill
            if frame.offset > self.last_offset + 1 and not await self._replay(
                self.last_offset, frame.offset - 1
            ):
                head = await self.hub.head(self.user_id)
                await self._resync("too_old", head.epoch, frame.offset - 1)
            await self.websocket.send_text(frame.text)
            self.last_offset = frame.offset
            if frame.delivers is not None:
                self.hub.note_delivered(frame.delivers)

    async def _read(self, subscriber: Subscriber) -> None:
        while True:
            raw = await receive_text_frame(self.websocket)
            self.last_seen = time.monotonic()
            frame = parse_frame(raw) if raw is not None else None
            kind = frame.get("type") if frame is not None else None
            if kind == "ping":
                subscriber.offer(control_frame("pong"))
            elif kind == "pong":
                continue
            elif not (
                frame is not None and self.on_frame is not None and await self.on_frame(frame)
            ):
                self.close_code, self.close_reason = CLOSE_UNSUPPORTED, "unsupported frame"
                return

    async def _heartbeat(self, subscriber: Subscriber) -> None:
        interval, timeout = self.limits.ping_interval, self.limits.ping_timeout
        while True:
            await asyncio.sleep(interval)
            if time.monotonic() - self.last_seen > interval + timeout:
                self.close_code, self.close_reason = CLOSE_HEARTBEAT_TIMEOUT, "no pong"
                return
            subscriber.offer(control_frame("ping"))
