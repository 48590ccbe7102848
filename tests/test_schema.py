"""The migrations build exactly the spec's schema (data model spec), plus the CHECKs the spec
states.

``tests/fixtures/data_model.sql`` is the spec's SQL, copied verbatim. One database is built from
it, another by ``gateway.migrations``; their catalogs (columns, types, nullability, defaults,
keys, indexes) must be identical. The only allowed difference is the eight ``ck_<table>_<column>``
CHECK constraints of migration 0001, whose values must be the ``Literal`` aliases of ``models``.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import asyncpg
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.engine import make_url
from ulid import ULID

import models
from gateway import migrations
from gateway.embedded import with_database

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_PATH = ROOT / "tests" / "fixtures" / "data_model.sql"
SEED_PATH = ROOT.parent / "shared" / "seeds" / "002_588a61bde5c62329.txt"
FIXTURE_SQL = FIXTURE_PATH.read_text(encoding="utf-8")

# Every CREATE TABLE / CREATE INDEX statement of the spec; none contains a ";" of its own.
STATEMENT = re.compile(r"^CREATE (?:TABLE|INDEX)\b[^;]*;", re.MULTILINE)
SPEC_TABLES = tuple(re.findall(r"^CREATE TABLE (\w+)", FIXTURE_SQL, re.MULTILINE))

# (table, column) → the Literal alias whose values the CHECK ck_<table>_<column> allows.
CHECKED_COLUMNS: dict[tuple[str, str], Any] = {
    ("conversations", "type"): models.ConversationType,
    ("conversation_participants", "participant_type"): models.ParticipantType,
    ("conversation_participants", "role"): models.ParticipantRole,
    ("messages", "sender_type"): models.SenderType,
    ("messages", "content_type"): models.ContentType,
    ("permissions", "level"): models.PermissionLevel,
    ("permissions", "decision"): models.PermissionDecision,
    ("permissions", "decision_scope"): models.DecisionScope,
}


# --- the fixture is the spec -------------------------------------------------------------------


def test_fixture_is_the_spec_sql() -> None:
    if not SEED_PATH.exists():
        pytest.skip(f"data model spec not found at {SEED_PATH}; cannot compare the fixture with it")
    seed_statements = STATEMENT.findall(SEED_PATH.read_text(encoding="utf-8"))
    fixture_statements = STATEMENT.findall(FIXTURE_SQL)
    assert seed_statements, f"no CREATE statement found in {SEED_PATH}"
    for index, (seed, fixture) in enumerate(zip(seed_statements, fixture_statements, strict=False)):
        assert fixture == seed, (
            f"statement {index + 1} of {FIXTURE_PATH.name} differs from the spec"
        )
    assert len(fixture_statements) == len(seed_statements), (
        f"{FIXTURE_PATH.name} has {len(fixture_statements)} statements, "
        f"the spec {len(seed_statements)}"
    )


def test_fixture_holds_only_create_statements() -> None:
    leftover = STATEMENT.sub("", FIXTURE_SQL).strip()
    assert leftover == "", f"{FIXTURE_PATH.name} holds more than CREATE statements: {leftover!r}"


def test_fixture_creates_every_table_of_the_data_model() -> None:
    assert SPEC_TABLES == (
        "users",
        "agents",
        "peer_agents",
        "peer_contacts",
        "conversations",
        "conversation_participants",
        "messages",
        "permissions",
        "project_memory",
        "threads",
        "sessions",
        "attachments",
        "audit_log",
    )


# --- catalog snapshots -------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # format_type(): "character(26)", "character varying(64)", "text[]" …
    not_null: bool
    default: str | None  # pg_get_expr() of the default, whitespace-normalised


@dataclass(frozen=True)
class ForeignKey:
    columns: tuple[str, ...]
    ref_table: str
    ref_columns: tuple[str, ...]
    on_update: str  # pg_constraint.confupdtype: "a" = NO ACTION …
    on_delete: str
    match: str


@dataclass
class Table:
    """What the catalog says about one table; constraints are compared by columns, not names."""

    columns: list[Column] = field(default_factory=list)
    primary_key: tuple[str, ...] | None = None
    unique: set[tuple[str, ...]] = field(default_factory=set)
    foreign_keys: set[ForeignKey] = field(default_factory=set)
    indexes: set[str] = field(default_factory=set)  # pg_get_indexdef() without "public."
    # CHECK constraint name → (its columns, pg_get_constraintdef())
    checks: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)


Catalog = dict[str, Table]

COLUMNS_SQL = """
SELECT c.relname AS table_name, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
       a.attnotnull AS not_null, pg_get_expr(d.adbin, d.adrelid) AS default
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attnum
"""

CONSTRAINTS_SQL = """
SELECT c.relname AS table_name, con.conname AS name, con.contype::text AS kind,
       ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
             ORDER BY k.ord) AS columns,
       ref.relname AS ref_table,
       ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum
             ORDER BY k.ord) AS ref_columns,
       con.confupdtype::text AS on_update, con.confdeltype::text AS on_delete,
       con.confmatchtype::text AS match_type, pg_get_constraintdef(con.oid) AS definition
FROM pg_constraint con
JOIN pg_class c ON c.oid = con.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_class ref ON ref.oid = con.confrelid
WHERE n.nspname = 'public' AND con.contype IN ('p', 'u', 'f', 'c')
"""

INDEXES_SQL = """
SELECT tablename AS table_name, indexdef FROM pg_indexes WHERE schemaname = 'public'
"""


def _normalise(sql: str | None) -> str | None:
    return None if sql is None else " ".join(sql.split())


async def read_catalog(conn: asyncpg.Connection) -> Catalog:
    """Snapshot the tables of schema ``public`` from pg_catalog."""
    catalog: Catalog = {}
    for row in await conn.fetch(COLUMNS_SQL):
        column = Column(row["name"], row["type"], row["not_null"], _normalise(row["default"]))
        catalog.setdefault(row["table_name"], Table()).columns.append(column)
    for row in await conn.fetch(CONSTRAINTS_SQL):
        table, columns = catalog[row["table_name"]], tuple(row["columns"])
        if row["kind"] == "p":
            table.primary_key = columns
        elif row["kind"] == "u":
            table.unique.add(columns)
        elif row["kind"] == "f":
            table.foreign_keys.add(
                ForeignKey(
                    columns,
                    row["ref_table"],
                    tuple(row["ref_columns"]),
                    row["on_update"],
                    row["on_delete"],
                    row["match_type"],
                )
            )
        else:
            table.checks[row["name"]] = (columns, row["definition"])
    for row in await conn.fetch(INDEXES_SQL):
        catalog[row["table_name"]].indexes.add(re.sub(r"\bpublic\.", "", row["indexdef"]))
    return catalog


def table_differences(name: str, spec: Table, migrated: Table) -> list[str]:
    """Every way ``migrated`` differs from ``spec`` except CHECK constraints, one line each."""
    differences: list[str] = []
    spec_names = [column.name for column in spec.columns]
    migrated_names = [column.name for column in migrated.columns]
    if migrated_names != spec_names:
        differences.append(f"{name}: columns {migrated_names} != spec {spec_names}")
    migrated_columns = {column.name: column for column in migrated.columns}
    for column in spec.columns:
        other = migrated_columns.get(column.name)
        for attribute in ("type", "not_null", "default"):
            want, got = getattr(column, attribute), getattr(other, attribute, None)
            if other is not None and got != want:
                differences.append(f"{name}.{column.name}: {attribute} {got!r} != spec {want!r}")
    if migrated.primary_key != spec.primary_key:
        differences.append(f"{name}: primary key {migrated.primary_key} != spec {spec.primary_key}")
    for attribute in ("unique", "foreign_keys", "indexes"):
        want, got = getattr(spec, attribute), getattr(migrated, attribute)
        differences += [
            f"{name}: {attribute} missing {item}" for item in sorted(want - got, key=str)
        ]
        differences += [
            f"{name}: {attribute} not in spec {item}" for item in sorted(got - want, key=str)
        ]
    return differences


@asynccontextmanager
async def connection(url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(url)
    try:
        yield conn
    finally:
        await conn.close()


@asynccontextmanager
async def scratch_database(admin_dsn: str) -> AsyncIterator[str]:
    """Create an empty database on the test server; drop it afterwards."""
    name = f"confer_s_{uuid.uuid4().hex[:12]}"
    async with connection(admin_dsn) as admin:
        await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(admin_dsn, name)
    finally:
        async with connection(admin_dsn) as admin:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def public_relations(url: str) -> set[str]:
    """Names of every table, index, sequence … in schema ``public``."""
    async with connection(url) as conn:
        rows = await conn.fetch(
            "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public'"
        )
    return {row["relname"] for row in rows}


async def catalog_of_sql(admin_dsn: str, sql: str) -> Catalog:
    """The catalog of a scratch database built by running ``sql``."""
    async with scratch_database(admin_dsn) as url, connection(url) as conn:
        await conn.execute(sql)
        return await read_catalog(conn)


@pytest.fixture(scope="module")
async def spec_catalog(pg_admin_dsn: str) -> Catalog:
    """The catalog of a database built from the spec's SQL."""
    return await catalog_of_sql(pg_admin_dsn, FIXTURE_SQL)


@pytest.fixture(scope="module")
async def catalog_0001(pg_admin_dsn: str) -> Catalog:
    """The catalog of a database migrated to revision 0001."""
    async with scratch_database(pg_admin_dsn) as url:
        await asyncio.to_thread(migrations.upgrade, url, "0001")
        async with connection(url) as conn:
            return await read_catalog(conn)


# --- the migrated schema is the spec -----------------------------------------------------------


def test_migration_0001_creates_exactly_the_spec_tables(
    spec_catalog: Catalog, catalog_0001: Catalog
) -> None:
    assert set(spec_catalog) == set(SPEC_TABLES)
    assert set(catalog_0001) == set(SPEC_TABLES) | {"alembic_version"}


@pytest.mark.parametrize("table", SPEC_TABLES)
def test_migration_0001_table_matches_spec(
    table: str, spec_catalog: Catalog, catalog_0001: Catalog
) -> None:
    differences = table_differences(table, spec_catalog[table], catalog_0001[table])
    assert not differences, "\n".join(differences)


# The one documented deviation from the spec at head (migration 0002): the spec's own
# conversation types 'direct_user_agent' (17) and 'direct_agent_agent' (18) do not fit its
# VARCHAR(16), so 0002 widens the column to VARCHAR(32).
HEAD_DEVIATIONS = ("conversations.type: type",)


async def test_head_keeps_the_spec_tables(spec_catalog: Catalog, database_url: str) -> None:
    """Later migrations may add tables but leave the spec's tables as they are (but one)."""
    async with connection(database_url) as conn:
        head = await read_catalog(conn)
        widened = await conn.fetchval(
            """SELECT character_maximum_length FROM information_schema.columns
               WHERE table_name = 'conversations' AND column_name = 'type'"""
        )
    assert widened == 32
    missing = set(SPEC_TABLES) - set(head)
    assert not missing, f"tables of the spec missing at head: {sorted(missing)}"
    differences = [
        line
        for table in SPEC_TABLES
        for line in table_differences(table, spec_catalog[table], head[table])
        if not line.startswith(HEAD_DEVIATIONS)
    ]
    assert not differences, "\n".join(differences)


# (spec text, replacement, the start of the difference line the comparison must report)
MUTATIONS = [
    ("username     VARCHAR(64)", "username     VARCHAR(65)", "users.username: type"),
    ("DEFAULT 'zh'", "DEFAULT 'en'", "agents.primary_language: default"),
    ("endpoint        TEXT NOT NULL", "endpoint        TEXT", "peer_agents.endpoint: not_null"),
    ("UNIQUE (user_id, peer_id)", "UNIQUE (user_id, alias)", "peer_contacts: unique"),
    ("ON sessions (user_id)", "ON sessions (device_id)", "sessions: indexes"),
    (
        "in_reply_to      CHAR(26) REFERENCES messages(id)",
        "in_reply_to      CHAR(26) REFERENCES messages(id) ON DELETE CASCADE",
        "messages: foreign_keys",
    ),
    ("  ip_address      INET,\n", "", "audit_log: columns"),
]


async def test_the_comparison_notices_every_kind_of_difference(
    pg_admin_dsn: str, spec_catalog: Catalog
) -> None:
    """Guard against a comparison that compares nothing: mutate the spec SQL, expect reports."""
    mutated_sql = FIXTURE_SQL
    for old, new, _ in MUTATIONS:
        assert FIXTURE_SQL.count(old) == 1, f"mutation target {old!r} is not unique in the spec"
        mutated_sql = mutated_sql.replace(old, new)
    mutated = await catalog_of_sql(pg_admin_dsn, mutated_sql)
    reported = [
        line
        for table in SPEC_TABLES
        for line in table_differences(table, spec_catalog[table], mutated[table])
    ]
    for _, _, expected in MUTATIONS:
        assert any(line.startswith(expected) for line in reported), (
            f"no {expected!r} among {reported}"
        )
    assert not [line for line in reported if line.startswith(("threads", "conversations"))]


# --- the CHECK constraints, the only addition to the spec --------------------------------------


def test_spec_sql_has_no_check_constraints(spec_catalog: Catalog) -> None:
    checks = {name: table.checks for name, table in spec_catalog.items() if table.checks}
    assert not checks, f"the spec SQL has no CHECK constraints, yet the catalog shows {checks}"


def test_migration_0001_adds_the_enumeration_checks(catalog_0001: Catalog) -> None:
    found = {
        (table, name): check
        for table, shape in catalog_0001.items()
        for name, check in shape.checks.items()
    }
    expected = {(table, f"ck_{table}_{column}") for table, column in CHECKED_COLUMNS}
    assert set(found) == expected
    for (table, column), alias in CHECKED_COLUMNS.items():
        columns, definition = found[(table, f"ck_{table}_{column}")]
        assert columns == (column,), f"ck_{table}_{column} covers {columns}"
        allowed = tuple(re.findall(r"'([^']*)'", definition))
        assert allowed == get_args(alias), (
            f"ck_{table}_{column} allows {allowed}, models has {get_args(alias)}"
        )


def _new_id() -> str:
    return str(ULID())


async def _seed_user_and_conversation(conn: asyncpg.Connection) -> tuple[str, str]:
    user_id, conversation_id = _new_id(), _new_id()
    await conn.execute(
        "INSERT INTO users (id, username, did) VALUES ($1, $2, $3)",
        user_id,
        f"alice-{user_id}",
        f"did:web:example.test:users:alice-{user_id}",
    )
    await conn.execute(
        "INSERT INTO conversations (id, type, created_by) VALUES ($1, 'group', $2)",
        conversation_id,
        user_id,
    )
    return user_id, conversation_id


def _valid_row(table: str, user_id: str, conversation_id: str) -> dict[str, str]:
    """A row of ``table`` that satisfies every constraint."""
    rows = {
        "conversations": {"type": "group", "created_by": user_id},
        "conversation_participants": {
            "conversation_id": conversation_id,
            "participant_type": "user",
            "user_id": user_id,
        },
        "messages": {
            "conversation_id": conversation_id,
            "sender_type": "user",
            "sender_id": user_id,
        },
        "permissions": {"user_id": user_id, "action": "read", "scope_json": "{}", "level": "L2"},
    }
    return {"id": _new_id(), **rows[table]}


async def _insert(conn: asyncpg.Connection, table: str, row: dict[str, str]) -> None:
    placeholders = ", ".join(f"${i}" for i in range(1, len(row) + 1))
    await conn.execute(
        f"INSERT INTO {table} ({', '.join(row)}) VALUES ({placeholders})", *row.values()
    )


@pytest.mark.parametrize(("table", "column"), list(CHECKED_COLUMNS))
async def test_check_rejects_a_value_outside_the_spec(
    table: str, column: str, database_url: str
) -> None:
    async with connection(database_url) as conn:
        user_id, conversation_id = await _seed_user_and_conversation(conn)
        bogus = {**_valid_row(table, user_id, conversation_id), column: "bogus"}
        with pytest.raises(asyncpg.CheckViolationError) as caught:
            await _insert(conn, table, bogus)
    assert caught.value.constraint_name == f"ck_{table}_{column}"


# The spec declares conversations.type VARCHAR(16), yet lists 'direct_user_agent' (17 characters)
# and 'direct_agent_agent' (18) as its values. The migration keeps the spec's type; widening the
# column is a change to the contract. Strict: once the column holds every value, this XPASSes and
# fails, so the marker gets removed.
@pytest.mark.parametrize(("table", "column"), list(CHECKED_COLUMNS))
async def test_check_accepts_every_spec_value(table: str, column: str, database_url: str) -> None:
    async with connection(database_url) as conn:
        user_id, conversation_id = await _seed_user_and_conversation(conn)
        for value in get_args(CHECKED_COLUMNS[(table, column)]):
            row = {**_valid_row(table, user_id, conversation_id), column: value}
            await _insert(conn, table, row)


# --- upgrade, downgrade, revisions -------------------------------------------------------------


def test_head_revision_is_the_script_directory_head() -> None:
    script = ScriptDirectory.from_config(migrations.alembic_config())
    assert migrations.head_revision() == script.get_current_head()


def test_declared_head_is_alembics_head() -> None:
    """The start-up check reads revision ids without Alembic: it must agree with Alembic."""
    assert migrations.declared_head() == migrations.head_revision()


async def test_current_revision_follows_upgrades(empty_database: str) -> None:
    assert await asyncio.to_thread(migrations.current_revision, empty_database) is None
    assert not await migrations.is_at_head(empty_database)
    await asyncio.to_thread(migrations.upgrade, empty_database, "0001")
    assert await asyncio.to_thread(migrations.current_revision, empty_database) == "0001"
    assert not await migrations.is_at_head(empty_database)
    await asyncio.to_thread(migrations.upgrade, empty_database)
    head = ScriptDirectory.from_config(migrations.alembic_config()).get_current_head()
    assert await asyncio.to_thread(migrations.current_revision, empty_database) == head
    assert await migrations.is_at_head(empty_database)


async def test_downgrade_to_base_leaves_an_empty_schema_and_upgrade_works_again(
    empty_database: str,
) -> None:
    await asyncio.to_thread(migrations.upgrade, empty_database)
    await asyncio.to_thread(migrations.downgrade, empty_database, "base")
    assert await public_relations(empty_database) == {"alembic_version", "alembic_version_pkc"}
    assert await asyncio.to_thread(migrations.current_revision, empty_database) is None

    await asyncio.to_thread(migrations.upgrade, empty_database)
    assert set(SPEC_TABLES) <= await public_relations(empty_database)
    assert await asyncio.to_thread(migrations.current_revision, empty_database) == (
        migrations.head_revision()
    )


# --- database URLs -----------------------------------------------------------------------------


def _asyncpg_connect_args(sqlalchemy_url: str) -> dict[str, Any]:
    """The keyword arguments SQLAlchemy's asyncpg dialect would pass to ``asyncpg.connect``."""
    _, kwargs = PGDialect_asyncpg().create_connect_args(make_url(sqlalchemy_url))
    return dict(kwargs)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "postgresql://postgres@127.0.0.1:5432/confer",
            {"user": "postgres", "host": "127.0.0.1", "port": 5432, "database": "confer"},
        ),
        (
            "postgresql://postgres:@/confer?host=/srv/confer/.data/pg",
            {"user": "postgres", "host": "/srv/confer/.data/pg", "database": "confer"},
        ),
        (
            "postgresql://postgres:@/confer?host=%2Fsrv%2Fconfer%2F.data%2Fpg",
            {"user": "postgres", "host": "/srv/confer/.data/pg", "database": "confer"},
        ),
        (
            "postgres://bob:p%40ss@db.example:6543/confer?sslmode=require",
            {
                "user": "bob",
                "password": "p@ss",
                "host": "db.example",
                "port": 6543,
                "database": "confer",
                "ssl": "require",
            },
        ),
    ],
)
def test_database_urls_reach_asyncpg_unchanged(url: str, expected: dict[str, Any]) -> None:
    converted = migrations.to_sqlalchemy_url(url)
    assert converted.startswith("postgresql+asyncpg://")
    assert _asyncpg_connect_args(converted) == expected
    assert migrations.to_sqlalchemy_url(converted) == converted
    # alembic's Config is a ConfigParser: the URL must survive its "%" interpolation.
    config = migrations.alembic_config(url)
    assert config.get_main_option("sqlalchemy.url") == converted


def test_non_postgres_urls_are_refused() -> None:
    with pytest.raises(ValueError, match="not a PostgreSQL URL"):
        migrations.to_sqlalchemy_url("mysql://root@localhost/confer")
