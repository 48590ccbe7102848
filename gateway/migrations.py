"""Run Confer's alembic migrations from Python: upgrade, downgrade, current and head revision.

``database_url`` is the plain asyncpg URL used everywhere in Confer — ``postgresql://user@host:5432/db``
or the embedded server's ``postgresql://postgres:@/db?host=/socket/dir`` — and is converted here to
SQLAlchemy's ``postgresql+asyncpg://`` form for ``alembic/env.py``.

The functions are synchronous because alembic drives its own event loop (``asyncio.run``): call them
from a thread when an event loop is running, ``await asyncio.to_thread(migrations.upgrade, url)``.
Alembic keeps its migration context in module globals, so do not run two of them concurrently in
one process.

Alembic and SQLAlchemy are imported only when a function here needs them (about a second of
start-up): :func:`is_at_head` answers "is there anything to migrate?" with one asyncpg query
and the revision ids written in ``alembic/versions``, so a server whose database is current
never loads them.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg

from gateway.store import system as system_store

if TYPE_CHECKING:
    from alembic.config import Config

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
    from sqlalchemy.engine import make_url

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
    from alembic.config import Config

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
    import alembic.command

    alembic.command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    """Migrate the database at ``database_url`` down to ``revision`` (``"base"``: no tables)."""
    import alembic.command

    alembic.command.downgrade(alembic_config(database_url), revision)


def current_revision(database_url: str) -> str | None:
    """Return the revision the database is at, or ``None`` when it was never migrated."""
    return asyncio.run(_current_revision(to_sqlalchemy_url(database_url)))


def head_revision() -> str:
    """Return the newest revision in ``alembic/versions`` (raises if the history has two heads)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {SCRIPT_LOCATION / 'versions'}")
    return head


async def _current_revision(sqlalchemy_url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    def read(connection: Any) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    engine = create_async_engine(sqlalchemy_url, poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(read)
    finally:
        await engine.dispose()


_REVISION = re.compile(r"^revision(?:\s*:[^=]*)?\s*=\s*[\"']([^\"']+)[\"']", re.MULTILINE)
_DOWN_REVISION = re.compile(
    r"^down_revision(?:\s*:[^=]*)?\s*=\s*(?:[\"']([^\"']+)[\"']|None)", re.MULTILINE
)


def _declared() -> tuple[set[str], set[str]]:
    """Every revision written in ``alembic/versions``, and those named as a ``down_revision``."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (SCRIPT_LOCATION / "versions").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        revision, down = _REVISION.search(text), _DOWN_REVISION.search(text)
        if revision is None or down is None:
            raise RuntimeError(f"{path.name}: no plain revision/down_revision assignment")
        revisions.add(revision.group(1))
        if down.group(1):
            parents.add(down.group(1))
    return revisions, parents


def declared_revisions() -> set[str]:
    """Every revision this checkout can migrate from (no Alembic import)."""
    return _declared()[0]


def declared_head() -> str:
    """The newest revision as written in ``alembic/versions`` (no Alembic import): the one
    revision no other names as its ``down_revision``. Equals :func:`head_revision` for a
    linear history (a test holds them together); raises ``RuntimeError`` otherwise."""
    revisions, parents = _declared()
    heads = revisions - parents
    if len(heads) != 1:
        raise RuntimeError(f"expected one head in {SCRIPT_LOCATION / 'versions'}, found {heads}")
    return heads.pop()


async def is_at_head(database_url: str) -> bool:
    """True when the database at ``database_url`` is already at :func:`declared_head`, so
    :func:`upgrade` would do nothing (one asyncpg connection, no Alembic import)."""
    conn = await asyncpg.connect(database_url)
    try:
        return await system_store.get_alembic_revision(conn) == declared_head()
    finally:
        await conn.close()
