"""Server frames on the wire: one encoding per frame, written to each socket without the ASGI hop.

Fan-out writes the same frame to many sockets. Through ASGI every ``websocket.send`` costs a
Starlette state check, an await, a ``str.encode`` and a fresh RFC 6455 frame header per socket.
A server-to-client frame is unmasked (RFC 6455 §5.1, §5.3), so without a negotiated extension
(permessage-deflate, RFC 7692, keeps per-connection compression state) its bytes are the same
on every socket: :func:`text_frame` builds them once and :class:`FrameWriter` hands them to a
socket's transport in one call.

:class:`ConferWebSocketProtocol` is uvicorn's sans-I/O ``websockets`` protocol (what
``ws="auto"`` picks when the ``websockets`` package is installed) that also offers its
writer to the application in the ASGI scope, under ``extensions["confer.frames"]["writer"]``.
A server without it (another ASGI server, the ``wsproto`` protocol) offers no writer, and the
session sends every frame through ASGI instead: same frames, only slower.

The protocol also keeps less per open connection than uvicorn's: its receive queue and its
"writable" flag are the small :class:`ReceiveQueue` and :class:`Flag` instead of an
``asyncio.Queue`` (four deques, each reserving a 64-slot block) and an ``asyncio.Event`` (one),
and it lets go of the parsed handshake request (headers included) and response once the handshake
is answered.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any, Generic, TypeVar

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State

__all__ = [
    "EXTENSION",
    "ConferWebSocketProtocol",
    "Flag",
    "FrameWriter",
    "ReceiveQueue",
    "frame_header",
    "frame_writer",
    "text_frame",
    "uvicorn_options",
]

EXTENSION = "confer.frames"
"""The ASGI scope extension under which the protocol offers its :class:`FrameWriter`."""

T = TypeVar("T")

_FIN_TEXT = 0x81  # FIN bit + opcode 1 (text), RFC 6455 §5.2


_LENGTH_16 = struct.Struct("!BBH")
_LENGTH_64 = struct.Struct("!BBQ")


def frame_header(size: int) -> bytes:
    """The header of an unfragmented, unmasked text frame of ``size`` payload bytes (RFC 6455
    §5.2): the length takes 7 bits below 126 bytes, 16 bits below 64 KiB, 64 bits above."""
    if size < 126:
        return bytes((_FIN_TEXT, size))
    if size < 1 << 16:
        return _LENGTH_16.pack(_FIN_TEXT, 126, size)
    return _LENGTH_64.pack(_FIN_TEXT, 127, size)


def text_frame(payload: bytes) -> bytes:
    """``payload`` (UTF-8 text) as one unfragmented, unmasked text frame (RFC 6455 §5.2)."""
    return frame_header(len(payload)) + payload


class FrameWriter:
    """Writes whole pre-encoded frames to one uvicorn WebSocket connection's transport.

    :meth:`write` never blocks and never buffers beyond the transport: it refuses (returns
    False) while the transport is above its high-water mark (the peer is not reading), once a
    close frame was sent or received, and when an extension was negotiated; the caller then
    queues the frame under its own bound and sends it through ASGI.
    """

    __slots__ = ("_protocol",)

    def __init__(self, protocol: WebSocketsSansIOProtocol) -> None:
        self._protocol = protocol

    def write(self, frame: bytes) -> bool:
        """Write ``frame`` (from :func:`text_frame`) now; False when it must wait or go via ASGI."""
        protocol = self._protocol
        if (
            protocol.close_sent
            or protocol.disconnected
            or not protocol.writable.is_set()
            or protocol.conn.state is not State.OPEN
            or protocol.conn.extensions
            or protocol.transport.is_closing()
        ):
            return False
        protocol.transport.write(frame)
        return True

    def abort(self) -> None:
        """Drop the connection without flushing (a peer that stopped reading never would)."""
        self._protocol.transport.abort()


class Flag:
    """A set/clear flag that coroutines can wait for: the part of ``asyncio.Event`` uvicorn's
    protocol uses (``is_set``, ``set``, ``clear``, ``wait``), with no waiter deque until
    someone waits. Loop-bound like ``asyncio.Event``; not thread-safe.
    """

    __slots__ = ("_set", "_waiter")

    def __init__(self, value: bool = False) -> None:
        self._set = value
        self._waiter: asyncio.Future[None] | None = None

    def is_set(self) -> bool:
        """Whether the flag is set."""
        return self._set

    def set(self) -> None:
        """Set the flag and wake every waiter."""
        self._set = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        """Clear the flag; later :meth:`wait` calls block until :meth:`set`."""
        self._set = False

    async def wait(self) -> None:
        """Return once the flag is set (at once when it already is)."""
        while not self._set:
            waiter = self._waiter
            if waiter is None or waiter.done():
                waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
                return  # like asyncio.Event: woken by set(), even if cleared since
            except asyncio.CancelledError:
                # The waiters share one future: cancelling one task cancels it for all, and
                # only the task that was cancelled stops waiting.
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise


class ReceiveQueue(Generic[T]):
    """An unbounded FIFO with the three calls uvicorn's protocol makes on its receive queue
    (``put_nowait``, ``get``, ``empty``); it holds a list only while items wait in it.

    uvicorn pauses reading after each message until the application takes it, so a connection
    has at most a few items queued; an ``asyncio.Queue`` would reserve four deques for them.
    """

    __slots__ = ("_items", "_ready")

    def __init__(self) -> None:
        self._items: list[T] | None = None
        self._ready = Flag()

    def empty(self) -> bool:
        """Whether no item waits."""
        return not self._items

    def put_nowait(self, item: T) -> None:
        """Append ``item`` and wake a waiting :meth:`get`."""
        if self._items is None:
            self._items = []
        self._items.append(item)
        self._ready.set()

    async def get(self) -> T:
        """The oldest item, waiting until there is one."""
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        item = self._items.pop(0)
        if not self._items:
            self._items = None
        return item


class ConferWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's ``websockets-sansio`` protocol plus a :class:`FrameWriter` in the ASGI scope,
    with a smaller footprint per open connection (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn calls only put_nowait/get/empty on the queue and is_set/set/clear/wait on
        # the flag; these take a few hundred bytes less per connection than asyncio's.
        self.queue = ReceiveQueue()  # type: ignore[assignment]
        self.writable = Flag(True)  # type: ignore[assignment]

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)  # absent when the handshake was refused
        if scope is not None:
            scope["extensions"][EXTENSION] = {"writer": FrameWriter(self)}

    async def send(self, message: Any) -> None:
        await super().send(message)
        if self.handshake_complete:
            # uvicorn reads the parsed request and the prepared response only to answer the
            # handshake (accept or refuse); an open connection would keep both, headers and all
            request = self.__dict__.pop("request", None)
            if request is not None:
                # websockets' parser generator keeps the request as a local while it reads
                # frames, for the life of the connection: empty the part that weighs
                request.headers.clear()
            self.__dict__.pop("response", None)


def frame_writer(scope: Any) -> FrameWriter | None:
    """The writer the server offers for this connection's ``scope``, if any."""
    extension = (scope.get("extensions") or {}).get(EXTENSION)
    writer = extension.get("writer") if isinstance(extension, dict) else None
    return writer if isinstance(writer, FrameWriter) else None


def uvicorn_options(*, compression: bool) -> dict[str, Any]:
    """The ``uvicorn.Config`` options for Confer's WebSockets: this module's protocol, and
    permessage-deflate only with ``compression`` (setting ``ws_compression``)."""
    return {"ws": ConferWebSocketProtocol, "ws_per_message_deflate": compression}
