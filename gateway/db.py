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

:class:`GroupCommit` lets units of work on one key (a conversation) that arrive while another
is being written share one transaction, each in its own ``SAVEPOINT``: group commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Hashable
from types import TracebackType
from typing import Any, TypeVar

import asyncpg

from gateway.errors import DatabaseBusyError

log = logging.getLogger(__name__)

AfterCommit = Callable[[], Awaitable[None]]
"""A coroutine function run once the transaction has committed."""

T = TypeVar("T")


# Types that asyncpg learns by introspection (a recursive catalog query, with ``jit`` switched
# off and on around it: three more round trips) the first time a connection meets them: the
# post function's composite (migration 0030) and the arrays of core types that asyncpg has no
# built-in codec for but Confer's statements bind (``char(26)[]`` ids, ``int4[]``). Learning
# them in one statement when a connection opens keeps that cost out of the first request that
# lands on it.
_SCHEMA_TYPES = "NULL::confer_post_participant[]"
_CORE_TYPES = "NULL::bpchar[], NULL::int4[]"


async def _init_connection(conn: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    try:
        await conn.fetchrow(f"SELECT {_SCHEMA_TYPES}, {_CORE_TYPES}")
    except asyncpg.UndefinedObjectError:
        # Before migrations have created the schema's types (``confer migrate`` on an empty
        # database) there is only the core's to learn; a later first use introspects the rest.
        await conn.fetchrow(f"SELECT {_CORE_TYPES}")


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


class _Notices:
    """What the triggers tell the connection that ran their statement (``RAISE NOTICE``),
    routed to this process's handlers: ``message`` → handler of the notice's ``DETAIL``.

    A handler is called when the notice arrives (before the statement's result) and once more
    when the connection goes back to the pool, its transaction over: a reader that ran between
    the two saw the state from before the commit and may have cached it. Connections are the
    pool's proxies, as asyncpg passes them to listeners.
    """

    __slots__ = ("_heard", "handlers")

    def __init__(self) -> None:
        self.handlers: dict[str, Callable[[str], None]] = {}
        self._heard: dict[int, list[tuple[Callable[[str], None], str]]] = {}

    def heard(self, conn: asyncpg.Connection, notice: Any) -> None:
        """asyncpg's log listener: ``notice`` is a ``PostgresLogMessage``."""
        handler = self.handlers.get(getattr(notice, "message", ""))
        detail = getattr(notice, "detail", None)
        if handler is None or not detail:
            return
        handler(detail)
        self._heard.setdefault(id(conn), []).append((handler, detail))

    async def setup(self, conn: asyncpg.Connection) -> None:
        """Pool ``setup``: asyncpg drops a connection's log listeners at every release."""
        if self.handlers:
            conn.add_log_listener(self.heard)

    def released(self, conn: asyncpg.Connection) -> None:
        """``conn`` goes back to the pool: stop listening (asyncpg warns of a listener left
        behind) and call the handlers of what it heard again."""
        conn.remove_log_listener(self.heard)
        for handler, detail in self._heard.pop(id(conn), ()):
            handler(detail)


class Pool(asyncpg.Pool):  # type: ignore[misc]  # asyncpg ships no type information
    """asyncpg's pool with a bounded wait for a connection, direct connections for
    ``LISTEN``, and the notices of Confer's triggers routed to handlers (:meth:`on_notice`).
    Build one with :func:`create_pool`."""

    acquire_timeout: float | None = None
    _direct: tuple[str, dict[str, str]] = ("", {})
    _notices: _Notices

    def on_notice(self, message: str, handler: Callable[[str], None] | None) -> None:
        """Call ``handler(detail)`` whenever a statement on one of this pool's connections
        raises a notice whose message is ``message`` (migration 0028's session triggers:
        ``confer_sessions``, detail the user's id): at once, and again once the connection's
        transaction is over. ``None`` removes the handler."""
        if handler is None:
            self._notices.handlers.pop(message, None)
        else:
            self._notices.handlers[message] = handler

    async def release(
        self,
        connection: asyncpg.Connection,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (asyncpg's signature)
    ) -> None:
        """asyncpg's release, after passing on what the connection heard (:meth:`on_notice`)."""
        self._notices.released(connection)
        await super().release(connection, timeout=timeout)

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
    notices = _Notices()
    if statement_timeout > 0:
        server_settings["statement_timeout"] = str(max(1, round(statement_timeout * 1000)))
    pool = Pool(
        url,
        min_size=min_size,
        max_size=max_size,
        max_queries=50000,
        max_inactive_connection_lifetime=300.0,
        init=_init_connection,
        setup=notices.setup,
        reset=_reset_connection,
        loop=None,
        connection_class=asyncpg.Connection,
        record_class=asyncpg.Record,
        server_settings=server_settings,
        statement_cache_size=statement_cache_size,
    )
    pool.acquire_timeout = acquire_timeout
    pool._notices = notices
    pool._direct = (direct_url or url, server_settings)
    await pool
    return pool


class Transaction:
    """A connection inside one transaction, and the work to run after it commits.

    ``conn`` is what store functions take. :meth:`call_after` registers after-commit work;
    :meth:`savepoint` opens a nested block whose registrations are dropped with it when it
    rolls back; :meth:`remembered` reads a value once for every unit of the transaction.
    :meth:`call_before_commit` registers work for the end of the transaction, run by every
    runner just before ``COMMIT`` (its failure rolls the whole transaction back).
    Build one with :func:`transaction`.
    """

    __slots__ = ("_after", "_before", "_memo", "conn", "events_at_commit")

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self._after: list[AfterCommit] = []
        self._before: list[AfterCommit] = []
        self._memo: dict[Hashable, Any] = {}
        self.events_at_commit = False
        """Whether stream events are appended just before ``COMMIT`` rather than at once
        (:meth:`gateway.realtime.hub.EventHub.append`): a shared run's or a group commit's, so
        the row lock on a user's stream is held for the commit only, not for the whole run."""

    def call_before_commit(self, work: AfterCommit) -> None:
        """Run ``work()`` at the end of the transaction, just before ``COMMIT`` (in
        registration order); work that raises rolls the transaction back."""
        self._before.append(work)

    async def run_before_commit(self) -> None:
        """Call the work registered for the end (the runner does this before ``COMMIT``)."""
        while self._before:  # the work may register more
            work, self._before = self._before, []
            for fn in work:
                await fn()

    async def remembered(self, key: Hashable, read: Callable[[], Awaitable[T]]) -> T:
        """``await read()`` the first time ``key`` is asked for in this transaction, the same
        value after (until a savepoint that rolls back forgets what it learnt): for the units
        of a shared run (:class:`SharedTransaction`) that all need, say, the caller's contact
        row. The value is what this transaction saw, or wrote (:meth:`remember`)."""
        if key not in self._memo:
            self._memo[key] = await read()
        value: T = self._memo[key]
        return value

    def remember(self, key: Hashable, value: Any) -> None:
        """What :meth:`remembered` answers for ``key`` from now on (a row just written)."""
        self._memo[key] = value

    def recall(self, key: Hashable) -> Any:
        """What is remembered for ``key``, or None."""
        return self._memo.get(key)

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
        and end-of-transaction work it registered and what :meth:`remember` learnt in it are
        forgotten with it, before the exception propagates."""
        mark, before, memo = len(self._after), len(self._before), dict(self._memo)
        try:
            async with self.conn.transaction():
                yield
        except BaseException:
            del self._after[mark:]
            del self._before[before:]
            self._memo = memo
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
            await tx.run_before_commit()
    await tx.run_after_commit()


_Pending = tuple[Callable[[Transaction], Awaitable[Any]], "asyncio.Future[Any]"]


class GroupCommit:
    """Group commit: units of work on one key that arrive while another of that key is being
    written share one transaction.

    :meth:`run` starts the first work of a key at once, in a transaction of its own. Works of
    the same key that arrive meanwhile wait, then run together, in arrival order, in one
    transaction that commits once: one ``BEGIN``/``COMMIT`` and one WAL flush for the batch,
    and a lock the works all take (a conversation's row) taken once and handed to no other
    transaction between them. At most ``max_batch`` works share one transaction.

    What each caller sees is what it would see alone. The works run without savepoints, as
    nearly all succeed; when one raises, the whole transaction rolls back and the batch runs
    again with each work in a ``SAVEPOINT``, where the failing one rolls back alone (its
    writes and its after-commit registrations go, the others' stay) and its caller gets the
    exception. A work must therefore be safe to run twice when the first run rolled back
    (it only writes in ``tx`` and registers work on it). A failed ``BEGIN``/``COMMIT`` (or no
    free connection) fails every caller of that batch, nothing of it stored. Callers get
    their results only after the commit and after the batch's after-commit work has run (in
    registration order, so in arrival order). A caller cancelled before its work started is
    skipped; once started, its work commits with the batch. Works of one key therefore run one
    at a time, in arrival order, each committed exactly once; keys do not wait for each other.
    Works are run by a task of this object, never by the caller's, so a caller that goes away
    cancels nobody else's work. In a batch of several works the stream events they append are
    written just before ``COMMIT`` (:attr:`Transaction.events_at_commit`), so the batch takes
    its locks in the order a lone work does; a batch PostgreSQL rolls back to end a deadlock
    or a serialization conflict runs again (at most ``_CONFLICT_RETRIES`` times).
    """

    def __init__(self, max_batch: int = 32) -> None:
        self.max_batch = max_batch
        self._queues: dict[str, list[_Pending]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(
        self, pool: asyncpg.Pool, key: str, work: Callable[[Transaction], Awaitable[T]]
    ) -> T:
        """``await work(tx)`` in a transaction shared with other works of ``key`` (class
        docstring); returns its result or raises its exception (or the batch's)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        queue = self._queues.get(key)
        if queue is not None:
            queue.append((work, future))
        else:
            self._queues[key] = [(work, future)]
            task = asyncio.create_task(self._drain(pool, key))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        result: T = await future
        return result

    async def _drain(self, pool: asyncpg.Pool, key: str) -> None:
        queue = self._queues[key]
        try:
            while queue:  # nothing awaits between the last check and the removal below
                batch = [p for p in queue[: self.max_batch] if not p[1].cancelled()]
                del queue[: self.max_batch]
                if batch:
                    await self._commit(pool, batch)
        finally:
            del self._queues[key]
            for _, future in queue:  # only when this task itself was cancelled
                future.cancel()

    async def _commit(self, pool: asyncpg.Pool, batch: list[_Pending]) -> None:
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        try:
            for retries in reversed(range(_CONFLICT_RETRIES + 1)):
                try:
                    try:
                        tx, outcomes = await self._attempt(pool, batch, isolated=len(batch) == 1)
                    except _Isolate:
                        # A work failed with the batch unguarded: everything rolled back; run
                        # them all again, each in its savepoint, so only that one fails.
                        batch = [p for p in batch if not p[1].cancelled()]
                        tx, outcomes = await self._attempt(pool, batch, isolated=True)
                    break
                except _CONFLICTS:
                    # PostgreSQL chose this transaction to end a deadlock (or a serialization
                    # conflict): all of it rolled back, and the other side has gone on, so
                    # the same batch again almost always commits.
                    if not retries:
                        raise
                    log.info("a batch of %d met a transaction conflict; again", len(batch))
                    batch = [p for p in batch if not p[1].cancelled()]
        except BaseException as exc:
            for _, future in batch:
                if future.done():
                    continue
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        await tx.run_after_commit()
        for future, value, error in outcomes:
            if future.done():  # its caller went away while the batch ran
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

    @staticmethod
    async def _attempt(
        pool: asyncpg.Pool, batch: list[_Pending], *, isolated: bool
    ) -> tuple[Transaction, list[tuple[asyncio.Future[Any], Any, BaseException | None]]]:
        """Run ``batch`` in one transaction and commit it. ``isolated``: a lone work, whose
        exception is its own outcome, or each work in a ``SAVEPOINT``. Otherwise the works
        run unguarded (two round trips fewer per work) and the first exception rolls the
        whole transaction back as :class:`_Isolate`."""
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        async with pool.acquire() as conn:
            tx = Transaction(conn)
            # The batch's stream events are written just before COMMIT: a work's own locks
            # (its poster's participant row) are then all taken before any user's stream row,
            # the order a single post and every other writer (a read receipt: participant
            # row, then streams) take them in; appended at once, the batch would hold streams
            # while its next work waits for a participant row that a reader holding it wants
            # to append to those streams — a deadlock.
            tx.events_at_commit = len(batch) > 1
            async with conn.transaction():
                if len(batch) == 1:  # alone: no savepoint, its exception rolls back
                    outcomes.append((batch[0][1], await batch[0][0](tx), None))
                for work, future in batch if len(batch) > 1 else ():
                    if not isolated:
                        try:
                            outcomes.append((future, await work(tx), None))
                        except Exception as exc:
                            raise _Isolate from exc
                        continue
                    try:
                        async with tx.savepoint():
                            outcomes.append((future, await work(tx), None))
                    except Exception as exc:
                        outcomes.append((future, None, exc))
                await tx.run_before_commit()
        return tx, outcomes


_CONFLICT_RETRIES = 2
"""How many times :class:`GroupCommit` runs a batch again that PostgreSQL rolled back to end a
deadlock or a serialization conflict (SQLSTATE 40P01, 40001) before its callers get the
error."""

_CONFLICTS = (asyncpg.exceptions.DeadlockDetectedError, asyncpg.exceptions.SerializationError)


class _Isolate(Exception):
    """A work of an unguarded batch raised; the batch runs again with savepoints."""


class SharedTransaction:
    """One transaction that consecutive units of work of the same key join, each in its own
    ``SAVEPOINT``: for a caller that runs many small units one after another (the calls of one
    JSON-RPC batch, :mod:`gateway.routes.federation`), one ``BEGIN``/``COMMIT`` and one WAL
    flush for a run of units instead of one each.

    Build one with :func:`shared_transaction`, then ``await shared.run(key, work)`` per
    unit. A unit of another key first commits the open run (so a run holds one key's
    locks, a conversation's, in the order a unit alone takes them: it deadlocks with nobody a
    single unit would not); :meth:`commit` does it on demand (before work that must see the
    run's rows from another connection) and leaving the block does it at the end. A unit that
    raises rolls back to its savepoint — its writes and its after-commit work go, the earlier
    units' stay — and its exception propagates. After-commit work runs once its run commits.

    What a unit returns is not durable until its run commits: each unit that joined gets a
    number (:attr:`joined` after its ``run``), and :meth:`lost` says whether a failed
    ``COMMIT`` took it.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._key: str | None = None
        self._conn: asyncpg.Connection | None = None
        self._inner: Any = None  # asyncpg's transaction of the open run
        self._tx: Transaction | None = None
        self._first = 1
        self._lost: list[range] = []
        self.joined = 0
        """How many units have joined so far (the number of the latest)."""

    async def run(self, key: str, work: Callable[[Transaction], Awaitable[T]]) -> T:
        """``await work(tx)`` in a savepoint of the open run of ``key`` (a new run when none
        is open or the open one is of another key); its result, or its exception."""
        if self._tx is not None and key != self._key:
            await self.commit()
        if self._tx is None:
            self._conn = await self._pool.acquire()
            try:
                self._inner = self._conn.transaction()
                await self._inner.start()
            except BaseException:
                await self._pool.release(self._conn)
                self._conn = None
                raise
            self._tx, self._key, self._first = Transaction(self._conn), key, self.joined + 1
            self._tx.events_at_commit = True
        async with self._tx.savepoint():
            result = await work(self._tx)
        self.joined += 1
        return result

    async def commit(self) -> None:
        """Commit the open run, if any, then run its after-commit work. A failed ``COMMIT``
        is logged and marks the run's units :meth:`lost`; it is not raised."""
        await self._close(commit=True)

    async def rollback(self) -> None:
        """Roll the open run back, if any (its units are :meth:`lost`)."""
        await self._close(commit=False)

    def lost(self, unit: int) -> bool:
        """Whether unit number ``unit`` was rolled back with its whole run."""
        return any(unit in run for run in self._lost)

    async def _close(self, *, commit: bool) -> None:
        tx, conn = self._tx, self._conn
        if tx is None or conn is None:
            return
        units = range(self._first, self.joined + 1)
        self._tx = self._conn = None
        try:
            if commit:
                await tx.run_before_commit()
                await self._inner.commit()
            else:
                await self._inner.rollback()
        except Exception:
            log.exception("a shared transaction of %d units did not commit", len(units))
            commit = False
            with contextlib.suppress(Exception):  # ended already when COMMIT itself failed
                await self._inner.rollback()
        finally:
            await self._pool.release(conn)
        if not commit:
            self._lost.append(units)
            return
        await tx.run_after_commit()


@contextlib.asynccontextmanager
async def shared_transaction(pool: asyncpg.Pool) -> AsyncIterator[SharedTransaction]:
    """``async with shared_transaction(pool) as shared:`` — units of work that share runs
    (:class:`SharedTransaction`). The open run commits when the block ends, and rolls back
    when an exception leaves it (then propagated)."""
    shared = SharedTransaction(pool)
    try:
        yield shared
    except BaseException:
        await shared.rollback()
        raise
    await shared.commit()
