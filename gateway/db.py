"""The asyncpg pool: one per app, built in the lifespan, with JSON codecs registered once."""

from __future__ import annotations

import json

import asyncpg


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
