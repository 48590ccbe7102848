"""A raw asyncio HTTP/1.1 server on loopback, for testing ``did.resolver`` end to end.

No HTTP framework on purpose: tests need byte-level control over responses (chunked or
truncated bodies, wrong ``Content-Length``, ``Content-Encoding``, redirects, stalls) and
to see exactly what the resolver sent (request headers, TLS SNI name). Each test sets
``LoopbackServer.routes`` to map a path to a ``Route``; the ``respond*``/``redirect``
helpers build the common ones. Fixtures serving it live in ``tests/did/conftest.py``.

Sources: RFC 9112 (HTTP/1.1 message syntax, §7.1 chunked transfer coding); RFC 6066 §3
(TLS Server Name Indication, observed through ``ssl.SSLContext.sni_callback``).
"""

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any


@dataclass
class SeenRequest:
    path: str
    headers: dict[str, str]
    body: bytes = b""


Route = Callable[[SeenRequest, asyncio.StreamWriter], Awaitable[None]]


class LoopbackServer:
    """A tiny HTTP/1.1 server on 127.0.0.1: one request per connection, routes set per test.

    A request body is read by its ``Content-Length`` (no chunked uploads) into ``body``."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[SeenRequest] = []
        self.sni_names: list[str | None] = []
        self._ssl = ssl_context
        self._tasks: set[asyncio.Task[Any]] = set()
        if ssl_context is not None:
            ssl_context.sni_callback = lambda _obj, name, _ctx: self.sni_names.append(name)

    async def __aenter__(self) -> "LoopbackServer":
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self._ssl)
        self.port = self._server.sockets[0].getsockname()[1]
        self.scheme = "http" if self._ssl is None else "https"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await self._server.wait_closed()

    def did(self, *path: str) -> str:
        return ":".join([f"did:web:localhost%3A{self.port}", *path])

    def url(self, path: str) -> str:
        return f"{self.scheme}://localhost:{self.port}{path}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            first = await reader.readexactly(1)
            if first == b"\x16":  # a TLS ClientHello sent to the plain-HTTP server
                return
            head = first + await reader.readuntil(b"\r\n\r\n")
            request_line, *lines = head.decode("latin-1").split("\r\n")
            headers = {}
            for line in filter(None, lines):
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = headers.get("content-length", "0")
            body = await reader.readexactly(int(length)) if length.isdigit() else b""
            request = SeenRequest(path=request_line.split(" ")[1], headers=headers, body=body)
            self.requests.append(request)
            route = self.routes.get(request.path, respond(404, b"not found", "text/plain"))
            await route(request, writer)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()


def raw_head(status: int, headers: dict[str, str]) -> bytes:
    """The status line and header block of a response, as bytes."""
    lines = [f"HTTP/1.1 {status} X", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    return "\r\n".join(lines).encode("latin-1")


def respond(
    status: int,
    body: bytes = b"",
    content_type: str = "application/did+json",
    **extra: str,
) -> Route:
    """A route answering with a fixed response (extra headers: underscores become hyphens)."""
    headers = {"Content-Type": content_type, "Content-Length": str(len(body))}
    headers |= {k.replace("_", "-"): v for k, v in extra.items()}
    headers["Connection"] = "close"

    async def route(_request: SeenRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(raw_head(status, headers) + body)

    return route


def respond_json(value: Any, **extra: str) -> Route:
    return respond(200, json.dumps(value).encode(), **extra)


def respond_chunked(chunks: list[bytes]) -> Route:
    headers = {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}

    async def route(_request: SeenRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(raw_head(200, headers))
        for chunk in chunks:
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")

    return route


def redirect(location: str, status: int = 302) -> Route:
    return respond(status, content_type="text/plain", Location=location)
