"""Run Confer's alembic migrations from Python: upgrade, downgrade, current and head revision.

``database_url`` is the plain asyncpg URL used everywhere in Confer — ``postgresql://user@host:5432/db``
or the embedded server's ``postgresql://postgres:@/db?host=/socket/dir`` — and is converted here to
SQLAlchemy's ``postgresql+asyncpg://`` form for ``alembic/env.py``.

The functions are synchronous because alembic drives its own event loop (``asyncio.run``): call them
from a thread when an event loop is running, ``await asyncio.to_thread(migrations.upgrade, url)``.
Alembic keeps its migration context in module globals, so do not run two of them concurrently in
one process.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import alembic.command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

ROOT = Path(__file__).resolve().parent.parent
ALEMBIC_INI = ROOT / "alembic.ini"
SCRIPT_LOCATION = ROOT / "alembic"

_POSTGRES_SCHEMES = frozenset({"postgres", "postgresql", "postgresql+asyncpg"})


def to_sqlalchemy_url(database_url: str) -> str:
    """Return ``database_url`` as a SQLAlchemy ``postgresql+asyncpg://`` URL (idempotent).

    User, password, host, port, database and query are kept; a ``host`` query parameter (a Unix
    socket directory) reaches asyncpg unchanged. libpq's ``sslmode`` becomes asyncpg's ``ssl``,
    which takes the same values. Raises ``ValueError`` for a URL that is not PostgreSQL.
    """
    url = make_url(database_url)
    if url.drivername not in _POSTGRES_SCHEMES:
        raise ValueError(f"not a PostgreSQL URL: {url.drivername}://…")
    url = url.set(drivername="postgresql+asyncpg")
    if "sslmode" in url.query:
        sslmode = url.query["sslmode"]
        url = url.difference_update_query(["sslmode"]).update_query_dict({"ssl": sslmode})
    return url.render_as_string(hide_password=False)


def alembic_config(database_url: str | None = None) -> Config:
    """Build the alembic ``Config`` for this checkout, pointed at ``database_url`` when given.

    ``script_location`` is absolute (computed from this file), so the current directory does not
    matter; ``env.py`` is told not to reconfigure the caller's logging.
    """
    config = Config(str(ALEMBIC_INI))
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    if database_url is not None:
        # configparser interpolation: a literal "%" (percent-encoded URL parts) must be doubled.
        sqlalchemy_url = to_sqlalchemy_url(database_url).replace("%", "%%")
        config.set_main_option("sqlalchemy.url", sqlalchemy_url)
    config.attributes["configure_logger"] = False
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Migrate the database at ``database_url`` up to ``revision`` (default: the newest)."""
    alembic.command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    """Migrate the database at ``database_url`` down to ``revision`` (``"base"``: no tables)."""
    alembic.command.downgrade(alembic_config(database_url), revision)


def current_revision(database_url: str) -> str | None:
    """Return the revision the database is at, or ``None`` when it was never migrated."""
    return asyncio.run(_current_revision(to_sqlalchemy_url(database_url)))


def head_revision() -> str:
    """Return the newest revision in ``alembic/versions`` (raises if the history has two heads)."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {SCRIPT_LOCATION / 'versions'}")
    return head


async def _current_revision(sqlalchemy_url: str) -> str | None:
    def read(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    engine = create_async_engine(sqlalchemy_url, poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(read)
    finally:
        await engine.dispose()
