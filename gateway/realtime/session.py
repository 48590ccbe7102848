"""One device's WebSocket session after authentication: resume, live events, heartbeat.

The session (protocol in ``docs/websocket.md``):

1. registers the device with the hub (the bus subscription is active before anything is read),
2. reads the user's stream head and sends ``ready`` with ``epoch`` and ``offset``,
3. when the client asked to resume from (epoch, offset): replays exactly the stored events
   after that offset, or sends ``resync_required`` when the epoch differs, the offset is ahead
   of the stream, or the gap is older than the replay window,
4. then forwards live frames in offset order, filling any gap from PostgreSQL (frames may
   reach a process out of order), while it reads and answers the client, pings it and closes
   it when it stops answering, and re-checks the device's login session.

An idle connection costs no task of its own beyond the ASGI one that runs the session: the
session reads in that task; pings and session checks are loop timers; a live frame in order is
written to the socket by the hub's ``deliver`` call itself (``Subscriber.sink``, pre-encoded
bytes through :class:`gateway.realtime.wire.FrameWriter` when the server offers one), and a
pump task exists only while frames are queued (the socket is not writable, a gap needs a replay
from PostgreSQL, or the server offers no writer).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect

from did.resolver import json_nesting_exceeds
from gateway.errors import TooManyConnectionsError
from gateway.realtime.hub import EventHub
from gateway.realtime.subscriber import Frame, Subscriber, control_frame
from gateway.realtime.wire import FrameWriter, frame_writer

log = logging.getLogger(__name__)

CLOSE_UNSUPPORTED = 1003
CLOSE_TOO_SLOW = 4008
CLOSE_HEARTBEAT_TIMEOUT = 4009
CLOSE_TOO_MANY_CONNECTIONS = 4029  # the user's connection budget on this process is spent
CLOSE_UNAUTHENTICATED = 4001  # the device's login session ended (logout, revocation, expiry)
CLOSE_TIMEOUT = 5.0
REPLAY_PAGE = 500
MAX_FRAME_DEPTH = 8
"""Deepest nesting a client frame may have; the protocol's frames are flat (docs/websocket.md)."""

ClientFrameHandler = Callable[[dict[str, Any]], Awaitable[bool]]
"""Handles a client frame other than ping/pong; returns False for an unsupported one."""

SessionCheck = Callable[[], Awaitable[bool]]
"""Re-checks the device's login session every ``SessionLimits.session_check`` seconds; False
closes the socket with 4001. An exception is logged and the check runs again next time."""

PING = control_frame("ping")
PONG = control_frame("pong")


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


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """Replay window (events), heartbeat timing and session re-check interval (seconds) and
    the most connections one user may hold on this process (None = no bound)."""

    replay_window: int = 1000
    ping_interval: float = 25.0
    ping_timeout: float = 20.0
    max_connections: int | None = None
    session_check: float = 10.0


class EventSession:
    """Runs one authenticated device connection until it ends; see the module docstring.

    ``check`` (optional) re-checks the device's login session every
    ``limits.session_check`` seconds.
    """

    # one per open connection: slots keep it to its fields, without a dict per session
    __slots__ = (
        "_asked",
        "_checking",
        "_held",
        "_interrupted",
        "_pump",
        "_reading",
        "_stopped",
        "_subscriber",
        "_task",
        "_timers",
        "_writer",
        "check",
        "close_code",
        "close_reason",
        "hub",
        "last_offset",
        "last_seen",
        "limits",
        "on_frame",
        "user_id",
        "websocket",
    )

    def __init__(
        self,
        websocket: WebSocket,
        hub: EventHub,
        user_id: str,
        limits: SessionLimits,
        on_frame: ClientFrameHandler | None = None,
        check: SessionCheck | None = None,
    ) -> None:
        self.websocket = websocket
        self.hub = hub
        self.user_id = user_id
        self.limits = limits
        self.on_frame = on_frame
        self.check = check
        self.last_offset = 0
        self.last_seen = time.monotonic()
        self.close_code: int | None = None
        self.close_reason = ""
        self._writer: FrameWriter | None = frame_writer(websocket.scope)
        self._subscriber: Subscriber | None = None
        self._task: asyncio.Task[Any] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._checking: asyncio.Task[None] | None = None
        self._timers: list[asyncio.TimerHandle | None] = [None, None]
        self._stopped = False
        self._reading = False
        self._interrupted = False
        self._held = False
        self._asked = 0

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
        self._subscriber = subscriber
        self._task = asyncio.current_task()
        try:
            head = await self.hub.head(self.user_id)
            await self.websocket.send_json(
                {"type": "ready", "data": {**ready, "epoch": head.epoch, "offset": head.head}}
            )
            self.last_offset = head.head
            if resume is not None:
                await self._resume(resume, head.epoch, head.head)
            # live from here: frames queued meanwhile go first, through the pump
            subscriber.wake = self._wake
            subscriber.recheck = self.recheck_now
            if self._writer is not None:
                subscriber.sink = self._write_now
            self._wake()
            loop = asyncio.get_running_loop()
            self._timers[0] = loop.call_later(self.limits.ping_interval, self._beat)
            if self.check is not None:
                self._timers[1] = loop.call_later(self.limits.session_check, self._recheck)
            await self._read_until_stopped(subscriber)
        except Exception:  # the client went away mid-send; nothing more to do for it
            pass
        finally:
            self._stopped = True
            subscriber.sink = subscriber.wake = subscriber.recheck = None
            for timer in self._timers:
                if timer is not None:
                    timer.cancel()
            tasks = [t for t in (self._pump, self._checking) if t is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.hub.disconnect(subscriber)
        if subscriber.overflowed:
            self.close_code, self.close_reason = CLOSE_TOO_SLOW, "client too slow"
        if self.close_code is not None:
            # A client that is not reading may never drain the close frame: bound the wait,
            # then drop the connection rather than wait for it to read.
            try:
                await asyncio.wait_for(
                    self.websocket.close(code=self.close_code, reason=self.close_reason),
                    CLOSE_TIMEOUT,
                )
            except Exception:
                if self._writer is not None:
                    self._writer.abort()

    async def _read_until_stopped(self, subscriber: Subscriber) -> None:
        """Read client frames in the session's own task until the client leaves or
        :meth:`_stop` interrupts the wait (a cancellation of this task, taken back here)."""
        if self._stopped:
            return
        self._reading = True
        try:
            await self._read(subscriber)
        except asyncio.CancelledError:
            task = self._task
            if not self._interrupted or task is None or task.uncancel() > 0:
                raise  # cancelled from outside too: the connection is being torn down
        finally:
            self._reading = False

    def _stop(self, code: int | None = None, reason: str = "") -> None:
        """End the session (once): close with ``code`` when given (None: the client is gone)."""
        if self._stopped:
            return
        self._stopped = True
        if code is not None:
            self.close_code, self.close_reason = code, reason
        if self._reading and self._task is not None and not self._interrupted:
            self._interrupted = True
            self._task.cancel()

    # -- sending -----------------------------------------------------------------------

    def _write_now(self, frame: Frame) -> bool:
        """``Subscriber.sink``: write a frame that is next in order straight to the socket;
        False when it has to be queued (a pump is running, a gap, the socket is not writable).
        """
        if self._pump is not None or self._stopped or self._held or self._writer is None:
            return False
        offset = frame.offset
        if offset is not None:
            if offset <= self.last_offset:
                return True  # already sent by a replay or gap fill
            if offset != self.last_offset + 1:
                return False
        if not self._writer.write(frame.wire()):
            return False
        if offset is not None:
            self.last_offset = offset
            if frame.delivers is not None:
                self.hub.note_delivered(frame.delivers)
        return True

    def _wake(self) -> None:
        """``Subscriber.wake``: a frame was queued (start the pump) or the client overflowed."""
        subscriber = self._subscriber
        if subscriber is None or self._stopped:
            return
        if subscriber.overflowed:
            self._stop(CLOSE_TOO_SLOW, "client too slow")
        elif self._pump is None and not self._held and len(subscriber):
            self._pump = asyncio.get_running_loop().create_task(self._drain(subscriber))

    async def _drain(self, subscriber: Subscriber) -> None:
        """Send the queued frames through ASGI, in order; ends when the queue is empty."""
        try:
            while (frame := subscriber.pop()) is not None:
                await self._send(frame)
        except Exception:  # the client went away mid-send
            self._stop()
        finally:
            self._pump = None

    async def _send(self, frame: Frame) -> None:
        if frame.offset is None:
            await self.websocket.send_text(frame.text)
            return
        if frame.offset <= self.last_offset:
            return  # already sent by a replay or gap fill
        if frame.offset > self.last_offset + 1 and not await self._replay(
            self.last_offset, frame.offset - 1
        ):
            head = await self.hub.head(self.user_id)
            await self._resync("too_old", head.epoch, frame.offset - 1)
        await self.websocket.send_text(frame.text)
        self.last_offset = frame.offset
        if frame.delivers is not None:
            self.hub.note_delivered(frame.delivers)

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

    # -- reading, heartbeat, session check ----------------------------------------------

    async def _read(self, subscriber: Subscriber) -> None:
        while True:
            raw = await receive_text_frame(self.websocket)
            self.last_seen = time.monotonic()
            frame = parse_frame(raw) if raw is not None else None
            kind = frame.get("type") if frame is not None else None
            if kind == "ping":
                subscriber.offer(PONG)
            elif kind == "pong":
                continue
            elif not (
                frame is not None and self.on_frame is not None and await self.on_frame(frame)
            ):
                self.close_code, self.close_reason = CLOSE_UNSUPPORTED, "unsupported frame"
                return

    def _beat(self) -> None:
        """Heartbeat timer: ping the client, or close it when it stopped answering."""
        interval, timeout = self.limits.ping_interval, self.limits.ping_timeout
        if self._stopped or self._subscriber is None:
            return
        if time.monotonic() - self.last_seen > interval + timeout:
            self._stop(CLOSE_HEARTBEAT_TIMEOUT, "no pong")
            return
        self._subscriber.offer(PING)
        self._timers[0] = asyncio.get_running_loop().call_later(interval, self._beat)

    def recheck_now(self) -> None:
        """``Subscriber.recheck``: the user's login sessions may have changed. Events are held
        (queued, not written) until ``check`` has answered, so a device whose session ended
        receives nothing more; then they flow again, or the socket closes with 4001."""
        if self._stopped or self.check is None:
            return
        self._held = True
        self._asked += 1
        timer = self._timers[1]
        if timer is not None:
            timer.cancel()
        self._recheck()

    def _recheck(self) -> None:
        """Session-check timer: run ``check`` in a short task, then schedule the next one."""
        if not self._stopped and self._checking is None:
            self._checking = asyncio.get_running_loop().create_task(self._run_check())

    async def _run_check(self) -> None:
        assert self.check is not None
        asked = self._asked
        try:
            alive = await self.check()
        except Exception:
            log.warning("could not re-check the session of %s", self.user_id, exc_info=True)
            alive = True
        finally:
            self._checking = None
        if not alive:
            self._stop(CLOSE_UNAUTHENTICATED, "session ended")
            return
        if self._stopped:
            return
        if self._asked != asked:  # asked again meanwhile: this answer may predate the change
            self._recheck()
            return
        self._held = False
        self._wake()
        loop = asyncio.get_running_loop()
        self._timers[1] = loop.call_later(self.limits.session_check, self._recheck)
