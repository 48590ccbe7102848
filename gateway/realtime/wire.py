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
"""

from __future__ import annotations

import struct
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State

__all__ = [
    "EXTENSION",
    "ConferWebSocketProtocol",
    "FrameWriter",
    "frame_writer",
    "text_frame",
    "uvicorn_options",
]

EXTENSION = "confer.frames"
"""The ASGI scope extension under which the protocol offers its :class:`FrameWriter`."""

_FIN_TEXT = 0x81  # FIN bit + opcode 1 (text), RFC 6455 §5.2


def text_frame(payload: bytes) -> bytes:
    """``payload`` (UTF-8 text) as one unfragmented, unmasked text frame (RFC 6455 §5.2).

    The length takes 7 bits below 126 bytes, 16 bits below 64 KiB, 64 bits above.
    """
    size = len(payload)
    if size < 126:
        header = bytes((_FIN_TEXT, size))
    elif size < 1 << 16:
        header = struct.pack("!BBH", _FIN_TEXT, 126, size)
    else:
        header = struct.pack("!BBQ", _FIN_TEXT, 127, size)
    return header + payload


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


class ConferWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's ``websockets-sansio`` protocol plus a :class:`FrameWriter` in the ASGI scope."""

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)  # absent when the handshake was refused
        if scope is not None:
            scope["extensions"][EXTENSION] = {"writer": FrameWriter(self)}


def frame_writer(scope: Any) -> FrameWriter | None:
    """The writer the server offers for this connection's ``scope``, if any."""
    extension = (scope.get("extensions") or {}).get(EXTENSION)
    writer = extension.get("writer") if isinstance(extension, dict) else None
    return writer if isinstance(writer, FrameWriter) else None


def uvicorn_options(*, compression: bool) -> dict[str, Any]:
    """The ``uvicorn.Config`` options for Confer's WebSockets: this module's protocol, and
    permessage-deflate only with ``compression`` (setting ``ws_compression``)."""
    return {"ws": ConferWebSocketProtocol, "ws_per_message_deflate": compression}
