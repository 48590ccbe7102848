"""The database pool of a ``confer`` command: migrated first, closed after the work."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

from gateway import migrations
from gateway.app import direct_database_url
from gateway.db import create_pool
from gateway.settings import Settings

T = TypeVar("T")


async def with_pool(settings: Settings, work: Callable[[asyncpg.Pool], Awaitable[T]]) -> T:
    """Run ``work`` with a small pool on the configured (or embedded) database, migrated to
    head first."""
    url = direct_database_url(settings)  # migrations, and no transaction pooler in between
    await asyncio.to_thread(migrations.upgrade, url)
    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        return await work(pool)
    finally:
        await pool.close()
