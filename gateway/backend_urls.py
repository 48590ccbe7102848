"""Reaching the optional shared backends at start-up: NATS (``CONFER_NATS_URL``) and Redis
(``CONFER_REDIS_URL``), each within ``CONFER_BACKEND_CONNECT_TIMEOUT_SECONDS``.

A backend that does not answer in that time ends start-up with one
:class:`~gateway.errors.BackendUnavailableError` naming its setting (docs/operations.md,
"Unreachable NATS or Redis"). Neither client library is imported here: each function imports
its own, so a gateway without NATS or Redis loads neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from gateway.errors import BackendUnavailableError

if TYPE_CHECKING:
    from nats.aio.client import Client

log = logging.getLogger(__name__)


def shown_url(url: str) -> str:
    """``url`` without its password (``nats://user:***@host:4222``), for logs and errors."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


async def connect_nats(url: str, *, name: str, within: float) -> Client:
    """A nats-py client connected to ``url`` (reconnecting for ever once connected).

    The first connection is retried for at most ``within`` seconds; then the attempt is
    abandoned and BackendUnavailableError names ``CONFER_NATS_URL`` and the last failure.
    Connection errors are logged as one warning line each, not nats-py's traceback."""
    from nats.aio.client import Client

    client = Client()
    failures: list[BaseException] = []

    async def on_error(exc: Exception) -> None:
        if client.is_connected or client.is_reconnecting:
            log.warning("NATS at %s: %s: %s", shown_url(url), type(exc).__name__, exc)
        else:  # still starting: the one error line at the end says it
            failures.append(exc)

    try:
        async with asyncio.timeout(within):
            await client.connect(
                servers=[url],
                name=name,
                max_reconnect_attempts=-1,
                connect_timeout=2,  # seconds per attempt (nats-py types them int)
                reconnect_time_wait=1,
                error_cb=on_error,
            )
    except TimeoutError:
        last = f"{type(failures[-1]).__name__}: {failures[-1]}" if failures else "no answer"
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2.0):
                await client.close()
        raise BackendUnavailableError(
            f"cannot reach NATS at CONFER_NATS_URL={shown_url(url)} within {within:g} s ({last})"
        ) from None
    return client


async def check_redis(url: str, within: float) -> None:
    """Ping the Redis at ``url`` once with a client of its own, within ``within`` seconds.
    Raises BackendUnavailableError naming ``CONFER_REDIS_URL`` when it does not answer."""
    import redis.asyncio as redis
    from redis.exceptions import RedisError

    client = redis.from_url(url)
    try:
        async with asyncio.timeout(within):
            await client.ping()
    except (TimeoutError, RedisError, OSError) as exc:
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise BackendUnavailableError(
            f"cannot reach Redis at CONFER_REDIS_URL={shown_url(url)} within {within:g} s "
            f"({reason})"
        ) from None
    finally:
        await client.aclose()
