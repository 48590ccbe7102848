"""Count the statements a request sends to PostgreSQL (tests and benches only).

asyncpg calls a connection's query loggers for every statement it executes — the
transaction's ``BEGIN``/``COMMIT``, the pool's reset query on release, and each
``fetch``/``execute`` — each one round trip once its prepared statement is cached. While
:func:`counting` is active, every connection acquired from the pool *in the current task's
context* gets a logger until it is released, so the statements of concurrent background
work on other connections are not counted. The requests must run in the caller's context:
an ``httpx.ASGITransport`` client calls the app in the caller's task.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import asyncpg

_log: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("statements", default=None)
_loggers: dict[int, Any] = {}  # connections acquired with `await`: their logger until released


class _Counted:
    """Wraps the pool's acquire context: a logger on the connection while it is held."""

    def __init__(self, inner: Any, log: list[str]) -> None:
        self._inner = inner
        self._log = log
        self._conn: Any = None

    def _record(self, query: Any) -> None:
        self._log.append(" ".join(str(query.query).split()))

    async def __aenter__(self) -> Any:
        self._conn = await self._inner.__aenter__()
        self._conn._con.add_query_logger(self._record)
        return self._conn

    async def __aexit__(self, *exc: Any) -> None:
        raw = self._conn._con
        try:
            await self._inner.__aexit__(*exc)
        finally:
            await asyncio.sleep(0)  # loggers are called with call_soon
            raw.remove_query_logger(self._record)

    def __await__(self) -> Any:
        """``await pool.acquire()`` (a connection held across calls, released with
        ``pool.release``, as :class:`gateway.db.SharedTransaction` does)."""
        return self._acquired().__await__()

    async def _acquired(self) -> Any:
        conn = await self._inner
        conn._con.add_query_logger(self._record)
        _loggers[id(conn)] = self._record
        return conn


@contextlib.contextmanager
def counting(pool: asyncpg.Pool) -> Iterator[list[str]]:
    """``with counting(pool) as statements:`` — the statements (whitespace-collapsed) that
        connections acquired in this context sent, in order (``async with pool.acquire()``, or
    ``await pool.acquire()`` until ``pool.release``)."""
    log: list[str] = []
    original = pool.acquire

    def acquire(**kwargs: Any) -> Any:
        current = _log.get()
        inner = original(**kwargs)
        return _Counted(inner, current) if current is not None else inner

    original_release = pool.release

    async def release(conn: Any, **kwargs: Any) -> Any:
        raw = conn._con
        try:
            return await original_release(conn, **kwargs)
        finally:
            logger = _loggers.pop(id(conn), None)
            if logger is not None and raw is not None:
                await asyncio.sleep(0)  # loggers are called with call_soon
                raw.remove_query_logger(logger)

    token = _log.set(log)
    pool.acquire = acquire
    pool.release = release
    try:
        yield log
    finally:
        pool.acquire = original
        pool.release = original_release
        _log.reset(token)
