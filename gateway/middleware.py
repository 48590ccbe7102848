"""ASGI middleware: a hard cap on request body size (413 problem+json, never a 500), and
``X-Content-Type-Options: nosniff`` on every response."""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimitMiddleware:
    """Refuse bodies over ``limit`` bytes, by ``Content-Length`` and while streaming.

    A declared length over the limit is refused before the app runs; a streamed body that
    grows past it raises a 413 ``HTTPException`` from ``receive``, which the app's one error
    handler renders as problem details.
    """

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        path_limits: dict[str, int] | None = None,
        path_details: dict[str, str] | None = None,
    ) -> None:
        self.app = app
        self.limit = limit
        self.path_limits = path_limits or {}
        # what a refusal under a prefix says instead of the raw byte cap: an upload's cap
        # includes the multipart envelope, which is not the file limit a person can act on
        self.path_details = path_details or {}

    def _limit_for(self, path: str) -> int:
        """The cap for ``path``: a ``path_limits`` entry whose prefix matches, else ``limit``."""
        for prefix, limit in self.path_limits.items():
            if path.startswith(prefix):
                return limit
        return self.limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit_for(scope.get("path", ""))
        for name, value in scope.get("headers", []):
            if name == b"content-length" and (not value.isdigit() or int(value) > limit):
                await self._reject(scope, send, limit)
                return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise HTTPException(413, "The request body is too large")
            return message

        await self.app(scope, limited_receive, send)

    async def _reject(self, scope: Scope, send: Send, limit: int) -> None:
        path = scope.get("path", "")
        detail = next(
            (text for prefix, text in self.path_details.items() if path.startswith(prefix)),
            f"request bodies are limited to {limit} bytes",
        )
        body = json.dumps(
            {
                "type": "urn:confer:problem:payload_too_large",
                "title": "The request body is too large",
                "status": 413,
                "detail": detail,
                "code": "payload_too_large",
                "instance": scope.get("path", ""),
            }
        ).encode()
        headers = [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class NoSniffMiddleware:
    """Send ``X-Content-Type-Options: nosniff`` with every HTTP response that does not set it:
    a browser then takes each response as the type it declares (a JSON answer or a stored file
    is never run as a script or rendered as HTML)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_nosniff(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"x-content-type-options" for name, _ in headers):
                    message = {
                        **message,
                        "headers": [*headers, (b"x-content-type-options", b"nosniff")],
                    }
            await send(message)

        await self.app(scope, receive, send_nosniff)
