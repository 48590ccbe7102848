"""The asyncpg pool and the unit of work.

One pool per app, built in the lifespan, with JSON codecs registered once per connection.

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
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg

log = logging.getLogger(__name__)

AfterCommit = Callable[[], Awaitable[None]]
"""A coroutine function run once the transaction has committed."""


async def _init_connection(conn: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def create_pool(url: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    """Open a pool on ``url`` whose connections decode ``json``/``jsonb`` to Python values.

    Raises asyncpg's ``OSError``/``PostgresError`` subclasses when the server is unreachable.
    """
    pool = await asyncpg.create_pool(
        url, min_size=min_size, max_size=max_size, init=_init_connection
    )
    assert pool is not None
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
