"""Which serving processes share a database, told by a PostgreSQL advisory lock.

Live events reach a device through the event bus of the process it is connected to. Two
``confer serve`` processes on one database (an external one, or the embedded server of one data
directory) without a shared bus (``CONFER_NATS_URL``) would each fan out only their own
changes, so a device on one would silently miss what was written through the other. Every
serving process therefore holds one session-level advisory lock on its own direct connection
(never through a pooler, where a session lock would not stay with the client): *exclusive*
without a shared bus, *shared* with one. A second process that cannot take its lock within a
few seconds refuses to start with one sentence saying why.

The same lock answers "does another Confer process still use this PostgreSQL server?" when a
process leaves: a backend that dies with its process drops its locks, so there is no stale
file to clean up after a crash (``confer serve`` stops the embedded server it used only when
the answer is no; ``confer stop`` asks the same question first).
"""

from __future__ import annotations

import asyncio
import time

import asyncpg

from gateway.store import system as system_store

CLAIM_WAIT_SECONDS = 5.0
"""How long a starting process retries the lock (a process killed just before may still be
listed while PostgreSQL notices its connection is gone)."""

DIRECT_CONNECT_TIMEOUT = 10.0
"""Seconds to open the claim's connection."""


class DatabaseInUseError(RuntimeError):
    """Another serving process holds the database in a way this one cannot share; the message
    is the one sentence ``confer serve`` prints before it exits."""


class ProcessClaim:
    """A held claim on one database: its direct connection (closed by :meth:`release`)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def others(self, *, this_database: bool = True) -> list[int]:
        """PostgreSQL backend pids of the other Confer processes holding a claim: on this
        database, or (``this_database=False``) on any database of the same server."""
        return await system_store.claim_holders(self._conn, this_database=this_database)

    async def release(self) -> None:
        """Drop the claim (closes the connection; idempotent; a broken connection is
        simply dropped)."""
        if not self._conn.is_closed():
            try:
                await self._conn.close(timeout=5)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                self._conn.terminate()


async def claim_database(
    url: str, *, shared_bus: bool, wait: float = CLAIM_WAIT_SECONDS
) -> ProcessClaim:
    """Open a direct connection to ``url`` and take the serving-process lock (shared when
    ``shared_bus``), retrying for ``wait`` seconds.

    Raises :class:`DatabaseInUseError` when another process holds it incompatibly, and the
    driver's ``OSError``/``PostgresError`` when the database is unreachable.
    """
    conn = await asyncpg.connect(url, timeout=DIRECT_CONNECT_TIMEOUT)
    deadline = time.monotonic() + wait
    try:
        while not await system_store.try_claim(conn, shared=shared_bus):
            if time.monotonic() >= deadline:
                holders = await system_store.claim_holders(conn, this_database=True)
                raise DatabaseInUseError(_refusal(shared_bus, holders))
            await asyncio.sleep(0.25)
    except BaseException:
        await conn.close()
        raise
    return ProcessClaim(conn)


def _refusal(shared_bus: bool, holders: list[int]) -> str:
    who = f"another Confer process (PostgreSQL backend {', '.join(map(str, holders)) or '?'})"
    if shared_bus:
        return (
            f"{who} serves this database without a shared event bus, so live events written "
            "here would never reach its devices; give it CONFER_NATS_URL too, or stop it"
        )
    return (
        f"{who} already serves this database (or this data directory's embedded PostgreSQL) "
        "and there is no shared event bus: live events between the two would be lost; stop "
        "it, or give every process the same CONFER_NATS_URL"
    )
