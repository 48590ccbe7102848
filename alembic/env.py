"""Alembic environment for Confer: plain-SQL migrations run over an async (asyncpg) engine.

The database URL is the config's ``sqlalchemy.url`` (set by ``gateway.migrations``), falling back
to the ``CONFER_DATABASE_URL`` environment variable for the ``alembic`` command line. Either may be
a plain ``postgresql://`` URL; it is converted to ``postgresql+asyncpg://``.
"""

from __future__ import annotations

import asyncio
import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, pool
from sqlalchemy.ext.asyncio import create_async_engine

from gateway.migrations import to_sqlalchemy_url

config = context.config

# Only the command line configures logging: fileConfig would disable the loggers of an
# application (or of pytest) that runs migrations in-process.
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name)

# Migrations are plain SQL; there is no metadata to autogenerate from.
target_metadata = None


def database_url() -> str:
    """The SQLAlchemy URL to migrate; raises ``RuntimeError`` when none is configured."""
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("CONFER_DATABASE_URL")
    if not url:
        raise RuntimeError("no database URL: set CONFER_DATABASE_URL or sqlalchemy.url")
    return to_sqlalchemy_url(url)


def run_migrations_offline() -> None:
    """Emit the migrations as SQL (``alembic upgrade --sql``) without connecting."""
    context.configure(
        url=database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def do_run_migrations(connection: Connection) -> None:
    """Run the migrations on ``connection`` in one transaction (PostgreSQL DDL is transactional)."""
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


async def run_async_migrations() -> None:
    """Open one asyncpg connection and run the migrations on it."""
    engine = create_async_engine(database_url(), poolclass=pool.NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(do_run_migrations)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    asyncio.run(run_async_migrations())
