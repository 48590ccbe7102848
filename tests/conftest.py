"""Shared fixtures: a real PostgreSQL for every test.

The server is ``CONFER_TEST_DATABASE_URL`` when set, otherwise an embedded PostgreSQL (pgserver)
under ``.data/test-pg``. One template database is migrated once per session; each test that asks
for ``database_url`` gets a fresh copy of it (``CREATE DATABASE … TEMPLATE``), dropped afterwards.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from gateway import migrations
from gateway.embedded import embedded_postgres_url, with_database

ROOT = Path(__file__).resolve().parent.parent
REDIS_ADDRESS = ("127.0.0.1", 6379)


def _listening(address: tuple[str, int]) -> bool:
    try:
        socket.create_connection(address, timeout=1).close()
    except OSError:
        return False
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``redis`` need the local Redis (``.ci/run`` starts it); where it cannot
    run at all they are skipped with that reason rather than failing on a connection error."""
    if _listening(REDIS_ADDRESS):
        return
    skip = pytest.mark.skip(reason="needs the local Redis on 127.0.0.1:6379 (.ci/run starts it)")
    for item in items:
        if "redis" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def pg_admin_dsn() -> str:
    """DSN of a PostgreSQL server on which tests may CREATE and DROP databases."""
    url = os.environ.get("CONFER_TEST_DATABASE_URL")
    if url:
        return url
    return embedded_postgres_url(ROOT / ".data" / "test-pg")


async def _create_database(admin_dsn: str, name: str, template: str | None = None) -> str:
    conn = await asyncpg.connect(admin_dsn)
    try:
        suffix = f" TEMPLATE {template}" if template else ""
        await conn.execute(f'CREATE DATABASE "{name}"{suffix}')
    finally:
        await conn.close()
    return with_database(admin_dsn, name)


async def _drop_database(admin_dsn: str, name: str) -> None:
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture(scope="session")
async def template_database(pg_admin_dsn: str) -> AsyncIterator[str]:
    """Name of a database migrated to head, used as the template for per-test databases."""
    name = f"confer_tpl_{uuid.uuid4().hex[:10]}"
    url = await _create_database(pg_admin_dsn, name)
    try:
        await asyncio.to_thread(migrations.upgrade, url)
        yield name
    finally:
        await _drop_database(pg_admin_dsn, name)


DatabaseFactory = Callable[[], Awaitable[str]]


@pytest.fixture
async def make_database(
    pg_admin_dsn: str, template_database: str
) -> AsyncIterator[DatabaseFactory]:
    """Factory: each call returns the URL of a new, migrated, empty database."""
    created: list[str] = []

    async def factory() -> str:
        name = f"confer_t_{uuid.uuid4().hex[:12]}"
        created.append(name)
        return await _create_database(pg_admin_dsn, name, template_database)

    yield factory
    for name in created:
        await _drop_database(pg_admin_dsn, name)


@pytest.fixture
async def database_url(make_database: DatabaseFactory) -> str:
    """URL of a fresh migrated database for this test."""
    return await make_database()


@pytest.fixture
async def empty_database(pg_admin_dsn: str) -> AsyncIterator[str]:
    """URL of a fresh database with no tables at all (for migration tests)."""
    name = f"confer_e_{uuid.uuid4().hex[:12]}"
    url = await _create_database(pg_admin_dsn, name)
    yield url
    await _drop_database(pg_admin_dsn, name)
