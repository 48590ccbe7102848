"""Scratch PostgreSQL databases for the benches, on whatever server this machine has.

:func:`admin_dsn` picks the server: ``CONFER_BENCH_DATABASE_URL`` when set, else the local
server on 127.0.0.1:5432 when it answers, else Confer's embedded PostgreSQL under
``.data/bench-pg`` (started on demand and left running, as ``confer serve`` leaves it), so
``make bench`` runs to the end on a fresh machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
LOCAL_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


def admin_dsn() -> str:
    """The URL of a database on the bench's server where databases may be created."""
    configured = os.environ.get("CONFER_BENCH_DATABASE_URL")
    if configured:
        return configured
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", 5432), timeout=1):
        return LOCAL_DSN
    from gateway.embedded import embedded_postgres_url

    return embedded_postgres_url(ROOT / ".data" / "bench-pg")


@contextlib.asynccontextmanager
async def held_connection(url: str, within: float = 120.0) -> AsyncIterator[asyncpg.Connection]:
    """A connection to ``url``, closed at exit: benches hold one for their whole run (a shared
    server may have no free slot later), waiting up to ``within`` seconds while it has none."""
    deadline = time.monotonic() + within
    while True:
        try:
            conn = await asyncpg.connect(url)
            break
        except asyncpg.TooManyConnectionsError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1.0)
    try:
        yield conn
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def scratch_database(admin: str, *, template: str | None = None) -> AsyncIterator[str]:
    """A new database on ``admin``'s server, migrated to the newest revision (or copied from
    the database ``template`` names: a file copy, much faster than migrating each one); its
    URL is yielded and the database dropped at exit."""
    from gateway import migrations
    from gateway.embedded import with_database

    name = f"confer_bench_{uuid.uuid4().hex[:8]}"
    async with held_connection(admin) as conn:
        if template is None:
            await conn.execute(f'CREATE DATABASE "{name}"')
        else:
            source = template.rpartition("/")[2].partition("?")[0]
            await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
        url = with_database(admin, name)
        try:
            if template is None:
                await asyncio.to_thread(migrations.upgrade, url)
            yield url
        finally:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
