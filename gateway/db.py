"""The asyncpg pool and the unit of work.

One pool per app, built in the lifespan, with JSON codecs registered once per connection. The
pool fails fast under pressure: a request waits at most ``acquire_timeout`` seconds for a free
connection and a statement runs at most ``statement_timeout`` seconds (PostgreSQL's own
setting on every pool connection). The first raises :class:`~gateway.errors.DatabaseBusyError`,
the second asyncpg's ``QueryCanceledError``; the edge answers both 503 ``database_busy`` with
``Retry-After`` instead of a queue without bound. A connection that stays in ``LISTEN`` for
the life of the process comes from :meth:`Pool.connect_direct`, outside the pool, so it never
holds a request's slot; it goes to ``direct_url`` when the pool's URL is a connection pooler
(pgbouncer in transaction mode cannot keep a ``LISTEN`` or a session's advisory lock).

A :class:`Transaction` is the unit of work every write path uses: a connection inside one
PostgreSQL transaction, plus the work that may run only once that transaction has committed
(publishing stream events on the bus, dispatching agent tasks to a broker, waking a worker).
Code inside the transaction registers such work with :meth:`Transaction.call_after`; the runner
calls it, in registration order, after ``COMMIT`` — never after a rollback. This is the shape of
Synapse's ``LoggingTransaction.call_after``: no value threaded back through return types, no
second transaction, no context variable.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from types import TracebackType
from typing import Any

import asyncpg

from gateway.errors import DatabaseBusyError

log = logging.getLogger(__name__)

AfterCommit = Callable[[], Awaitable[None]]
"""A coroutine function run once the transaction has committed."""


async def _init_connection(conn: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def _reset_connection(conn: asyncpg.Connection) -> None:
    """Return a connection to the pool as it is: a pool connection carries no session state.

    asyncpg's default reset sends ``SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
    RESET ALL`` on every release, one more round trip per request. Confer keeps what that
    would undo off the pool: ``LISTEN`` and session advisory locks live on
    :meth:`Pool.connect_direct` connections, cursors and advisory locks of a request are
    transaction-scoped, and no pool connection runs ``SET`` outside ``SET LOCAL``. asyncpg
    still rolls back a transaction left open before calling this.
    """


class _Acquire:
    """asyncpg's acquire context, with its timeout reported as :class:`DatabaseBusyError`."""

    __slots__ = ("_inner", "_timeout")

    def __init__(self, inner: Any, timeout: float | None) -> None:
        self._inner = inner
        self._timeout = timeout

    def _busy(self) -> DatabaseBusyError:
        return DatabaseBusyError(
            f"no database connection came free within {self._timeout:g} s",
            retry_after=max(1, round(self._timeout or 1)),
        )

    async def __aenter__(self) -> asyncpg.Connection:
        try:
            return await self._inner.__aenter__()
        except TimeoutError as exc:
            raise self._busy() from exc

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._inner.__aexit__(exc_type, exc, tb)

    async def _acquire(self) -> asyncpg.Connection:
        try:
            return await self._inner
        except TimeoutError as exc:
            raise self._busy() from exc

    def __await__(self) -> Generator[Any, None, asyncpg.Connection]:
        return self._acquire().__await__()


class Pool(asyncpg.Pool):  # type: ignore[misc]  # asyncpg ships no type information
    """asyncpg's pool with a bounded wait for a connection and direct connections for
    ``LISTEN``. Build one with :func:`create_pool`."""

    acquire_timeout: float | None = None
    _direct: tuple[str, dict[str, str]] = ("", {})

    def acquire(self, *, timeout: float | None = None) -> _Acquire:
        """A pool connection (``async with`` or ``await``), waiting at most ``timeout``
        seconds (default :attr:`acquire_timeout`; None = without bound).

        Raises :class:`DatabaseBusyError` when none came free in time."""
        wait = self.acquire_timeout if timeout is None else timeout
        return _Acquire(super().acquire(timeout=wait), wait)

    async def connect_direct(self) -> asyncpg.Connection:
        """A new connection to the pool's database, outside the pool, with the same codecs and
        server settings: for a ``LISTEN`` that lasts the life of a worker. The caller closes
        it. Raises asyncpg's ``OSError``/``PostgresError`` subclasses when unreachable."""
        url, server_settings = self._direct
        conn = await asyncpg.connect(url, server_settings=server_settings)
        await _init_connection(conn)
        return conn

    @contextlib.asynccontextmanager
    async def listening(self, channel: str, callback: Callable[..., None]) -> AsyncIterator[None]:
        """``LISTEN channel`` on a :meth:`connect_direct` connection while the block runs,
        calling ``callback(connection, pid, channel, payload)`` per ``NOTIFY`` (asyncpg's
        listener signature); the connection is closed when the block ends (also cancelled)."""
        listener = await self.connect_direct()
        try:
            await listener.add_listener(channel, callback)
            yield
        finally:
            with contextlib.suppress(Exception):  # a closed connection listens no more anyway
                await listener.remove_listener(channel, callback)
            await listener.close()


async def create_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    acquire_timeout: float | None = None,
    statement_timeout: float = 0,
    statement_cache_size: int = 100,
    direct_url: str | None = None,
) -> Pool:
    """Open a pool on ``url`` whose connections decode ``json``/``jsonb`` to Python values.

    ``acquire_timeout`` (seconds, None = without bound) bounds the wait for a free connection;
    ``statement_timeout`` (seconds, 0 = none) is PostgreSQL's ``statement_timeout`` on every
    connection of the pool and on :meth:`Pool.connect_direct` ones. ``statement_cache_size``
    is asyncpg's prepared-statement cache per pool connection (0 behind pgbouncer in
    transaction mode, where a prepared statement may be gone by the next transaction);
    ``direct_url`` (default ``url``) is where :meth:`Pool.connect_direct` connects.
    Raises asyncpg's ``OSError``/``PostgresError`` subclasses when the server is unreachable.
    """
    server_settings = {}
    if statement_timeout > 0:
        server_settings["statement_timeout"] = str(max(1, round(statement_timeout * 1000)))
    pool = Pool(
        url,
        min_size=min_size,
        max_size=max_size,
        max_queries=50000,
        max_inactive_connection_lifetime=300.0,
        init=_init_connection,
        reset=_reset_connection,
        loop=None,
        connection_class=asyncpg.Connection,
        record_class=asyncpg.Record,
        server_settings=server_settings,
        statement_cache_size=statement_cache_size,
    )
    pool.acquire_timeout = acquire_timeout
    pool._direct = (direct_url or url, server_settings)
    await pool
    return pool


class Transaction:
    """A connection inside one transaction, and the work to run after it commits.

    ``conn`` is what store functions take. :meth:`call_after` registers after-commit work;
    :meth:`savepoint` opens a nested block whose registrations are dropped with it when it
    rolls back. Build one with :func:`transaction`.
    """

    __slots__ = ("_after", "conn")

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self._after: list[AfterCommit] = []

    def call_after(self, work: AfterCommit) -> None:
        """Run ``work()`` after the transaction commits (in registration order).

        Work that raises is logged and skipped: the change it follows is committed already,
        so it must be safe to lose (a bus publish a device recovers by replay, a dispatch the
        sweep finds again).
        """
        self._after.append(work)

    @contextlib.asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """A nested block (``SAVEPOINT``); on an exception it rolls back, and the after-commit
        work it registered is forgotten with it, before the exception propagates."""
        mark = len(self._after)
        try:
            async with self.conn.transaction():
                yield
        except BaseException:
            del self._after[mark:]
            raise

    async def run_after_commit(self) -> None:
        """Call the registered work once (the runner does this after ``COMMIT``)."""
        work, self._after = self._after, []
        for fn in work:
            try:
                await fn()
            except Exception:
                log.exception("after-commit work %s failed", getattr(fn, "__qualname__", fn))


@contextlib.asynccontextmanager
async def transaction(pool: asyncpg.Pool) -> AsyncIterator[Transaction]:
    """``async with transaction(pool) as tx:`` — one unit of work.

    The connection is released before the after-commit work runs, so that work never holds a
    pool slot. On an exception the transaction rolls back, the registered work is dropped and
    the exception propagates.
    """
    async with pool.acquire() as conn:
        tx = Transaction(conn)
        async with conn.transaction():
            yield tx
    await tx.run_after_commit()
