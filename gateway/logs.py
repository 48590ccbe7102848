"""Process logging: text or JSON lines, each record carrying a request id and the instance DID.

- :func:`configure_logging` (called by ``confer serve`` once uvicorn set up its loggers) puts
  one stderr handler on the root logger and on uvicorn's, formatted as plain text or as one
  JSON object per line (``python-json-logger``), at ``CONFER_LOG_LEVEL``.
- Every :class:`logging.LogRecord` gets ``request_id`` and ``did`` attributes from a record
  factory, so they are set in the thread that logs (the access log is *written* by a queue
  thread, :mod:`gateway.access_log`, but its records are made on the event loop).
- :class:`RequestIdMiddleware` gives each HTTP request an id: a client's ``X-Request-ID`` when
  it is a plain token of at most 128 characters, else a fresh one; it is returned in the
  response's ``X-Request-ID`` and held in a :class:`contextvars.ContextVar` while the request
  runs, so every record logged on its behalf carries it.
- :func:`bind_instance` records the instance DID once the lifespan has loaded it (one DID per
  process; tests that run several instances in one process see the last one).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import uuid
from contextvars import ContextVar
from typing import Any, Literal

from pythonjsonlogger.json import JsonFormatter

LogFormat = Literal["text", "json"]

REQUEST_ID: ContextVar[str | None] = ContextVar("confer_request_id", default=None)
REQUEST_ID_HEADER = "x-request-id"
_ACCEPTED_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")

log = logging.getLogger(__name__)
_instance: dict[str, str | None] = {"did": None}
_base_factory = logging.getLogRecordFactory()

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(request_id)s] %(message)s"
JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(did)s"


def bind_instance(did: str) -> None:
    """Stamp ``did`` on every later log record of this process."""
    _instance["did"] = did


def _record_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
    record = _base_factory(*args, **kwargs)
    record.request_id = REQUEST_ID.get()
    record.did = _instance["did"]
    return record


def formatter(fmt: LogFormat) -> logging.Formatter:
    """The formatter for ``fmt``: JSON keys ``time level logger message request_id did`` (plus
    ``exc_info`` when there is one), or one readable text line."""
    if fmt == "json":
        return JsonFormatter(
            JSON_FIELDS,
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        )
    return logging.Formatter(TEXT_FORMAT)


def configure_logging(fmt: LogFormat, level: str) -> None:
    """Send every log record (ours, uvicorn's, its access log's) to stderr as ``fmt``, at
    ``level`` (``debug`` … ``error``). Call after ``uvicorn.Config`` configured its loggers."""
    logging.setLogRecordFactory(_record_factory)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    if fmt == "json":  # uvicorn's own loggers do not propagate: give them the same handler
        for name in ("uvicorn", "uvicorn.access"):
            logging.getLogger(name).handlers = [handler]


def backends(
    *,
    database_url: str | None,
    redis_url: str | None,
    nats_url: str | None,
    attachments: str = "local",
) -> dict[str, str]:
    """Which backends are on, for the start-up line: ``postgresql`` is ``embedded`` or
    ``external``; ``redis`` and ``nats`` are ``on`` or ``off`` (no URL, no credentials);
    ``attachments`` is ``local`` or ``s3``."""
    return {
        "postgresql": "external" if database_url else "embedded",
        "redis": "on" if redis_url else "off",
        "nats": "on" if nats_url else "off",
        "attachments": attachments,
    }


def startup_banner(
    *, did: str, public_url: str, backends: dict[str, str]
) -> tuple[str, dict[str, Any]]:
    """The one start-up line and its structured fields (``did``, ``public_url``, ``client``,
    ``docs``, ``backends``), for ``log.info(line, extra=fields)``."""
    fields: dict[str, Any] = {
        "public_url": public_url,
        "client": f"{public_url}/",
        "docs": f"{public_url}/docs",
        "backends": backends,
    }
    on = ", ".join(f"{name} {state}" for name, state in backends.items())
    line = (
        f"Confer is up as {did} at {public_url} — client {fields['client']}, "
        f"API docs {fields['docs']}; backends: {on}"
    )
    return line, fields


def _request_id(headers: list[tuple[bytes, bytes]]) -> str:
    for name, value in headers:
        if name == b"x-request-id":
            candidate = value.decode("latin-1")
            if _ACCEPTED_ID.match(candidate):
                return candidate
    return uuid.uuid4().hex


def _internal_error_body(scope: Any) -> bytes:
    """The RFC 9457 problem details of an unexpected error (``internal_error``), as the
    application's own handler writes them."""
    return json.dumps(
        {
            "type": "urn:confer:problem:internal_error",
            "title": "Internal error",
            "status": 500,
            "detail": "unexpected error",
            "code": "internal_error",
            "instance": scope.get("path", ""),
        }
    ).encode()


class RequestIdMiddleware:
    """Give each HTTP request an id (module docstring); pure ASGI, no framework import."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope.get("headers", []))
        raw = request_id.encode("latin-1")
        started = False

        async def send_with_id(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [h for h in message.get("headers", []) if h[0] != b"x-request-id"]
                message = {**message, "headers": [*headers, (b"x-request-id", raw)]}
            await send(message)

        token = REQUEST_ID.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            if started:  # a response half sent cannot be mended: the server drops it
                raise
            # Answered here, not by the framework's last-resort handler: that one re-raises to
            # the server, which then closes the keep-alive connection, and a client's next
            # request already on its way over it is lost unanswered. Logged here too, where
            # the record still carries the request id.
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            body = _internal_error_body(scope)
            await send_with_id(
                {
                    "type": "http.response.start",
                    "status": 500,
                    "headers": [
                        (b"content-type", b"application/problem+json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"x-content-type-options", b"nosniff"),
                    ],
                }
            )
            await send_with_id({"type": "http.response.body", "body": body})
        finally:
            REQUEST_ID.reset(token)
