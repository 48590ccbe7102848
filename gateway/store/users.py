"""``users`` and ``agents`` rows (data model: users, agents)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from gateway.errors import EmailTakenError, PhoneTakenError, UsernameTakenError
from models import Agent, User


def _user(record: asyncpg.Record) -> User:
    data = dict(record)
    data["preferences"] = data.pop("preferences_json") or {}
    data["llm_keys"] = data.pop("llm_keys_json") or {}
    data.pop("password_hash", None)
    return User.model_validate(data)


def agent_from_record(record: asyncpg.Record) -> Agent:
    """An ``agents`` row as the data model's ``Agent`` (JSON columns under their API names)."""
    data = dict(record)
    data["model_config"] = data.pop("model_config_json") or None
    data["policies"] = data.pop("policies_json") or None
    data["capabilities"] = data.pop("capabilities_json") or []
    for column in ("created_at", "updated_at"):  # not part of the Agent interface
        data.pop(column, None)
    return Agent.model_validate(data)


async def insert_user(
    conn: asyncpg.Connection,
    *,
    id: str,
    username: str,
    did: str,
    password_hash: str,
    display_name: str | None,
    preferences: dict[str, Any],
) -> User:
    """Insert a user. Raises UsernameTakenError when the username or DID exists."""
    try:
        record = await conn.fetchrow(
            """INSERT INTO users (id, username, did, password_hash, display_name,
                                  preferences_json)
               VALUES ($1, $2, $3, $4, $5, $6) RETURNING *""",
            id,
            username,
            did,
            password_hash,
            display_name,
            preferences,
        )
    except asyncpg.UniqueViolationError as exc:
        raise UsernameTakenError(f"the username {username!r} is taken") from exc
    assert record is not None
    return _user(record)


async def get_user(conn: asyncpg.Connection, *, id: str, lock: bool = False) -> User | None:
    """The user with this id, deleted or not; None when absent. ``lock`` holds the row
    (``FOR UPDATE``) until the transaction ends, for a read-modify-write of its columns."""
    sql = "SELECT * FROM users WHERE id = $1" + (" FOR UPDATE" if lock else "")
    record = await conn.fetchrow(sql, id)
    return _user(record) if record else None


async def get_session_user(
    conn: asyncpg.Connection, *, session_id: str, user_id: str, now: datetime
) -> User | None:
    """The user (deleted or not) of session ``session_id`` while it is live for ``user_id``
    (exists, not expired at ``now``); None once it has ended.

    The same statement records the session's activity (``last_active_at``), at most once a
    minute so authentication stays read-mostly: a request costs one round trip.
    """
    record = await conn.fetchrow(
        """WITH live AS (
             SELECT id, last_active_at FROM sessions
             WHERE id = $1 AND user_id = $2 AND expires_at > $3),
           touched AS (
             UPDATE sessions s SET last_active_at = $3
             FROM live
             WHERE s.id = live.id
               AND (live.last_active_at IS NULL
                    OR live.last_active_at < $3::timestamptz - interval '60 seconds'))
           SELECT u.* FROM users u WHERE u.id = $2 AND EXISTS (SELECT 1 FROM live)""",
        session_id,
        user_id,
        now,
    )
    return _user(record) if record else None


async def get_user_by_username(conn: asyncpg.Connection, *, username: str) -> User | None:
    """The non-deleted user with this username; None when absent."""
    record = await conn.fetchrow(
        "SELECT * FROM users WHERE username = $1 AND deleted_at IS NULL", username
    )
    return _user(record) if record else None


async def get_user_by_email(conn: asyncpg.Connection, *, email: str) -> User | None:
    """The non-deleted user with this (stored lower-cased) e-mail address; None when absent."""
    record = await conn.fetchrow(
        "SELECT * FROM users WHERE email = $1 AND deleted_at IS NULL", email
    )
    return _user(record) if record else None


async def get_credentials(
    conn: asyncpg.Connection, *, username: str
) -> tuple[str, str | None] | None:
    """``(user_id, password_hash)`` of a non-deleted user, or None."""
    record = await conn.fetchrow(
        "SELECT id, password_hash FROM users WHERE username = $1 AND deleted_at IS NULL",
        username,
    )
    return (record["id"], record["password_hash"]) if record else None


async def insert_agent(
    conn: asyncpg.Connection,
    *,
    id: str,
    user_id: str,
    did: str,
    name: str,
    primary_language: str,
    model_config: dict[str, Any],
    policies: dict[str, Any],
) -> Agent:
    """Insert an agent owned by ``user_id`` (style, capabilities: the schema's defaults)."""
    record = await conn.fetchrow(
        """INSERT INTO agents (id, user_id, did, name, primary_language, model_config_json,
                               policies_json)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *""",
        id,
        user_id,
        did,
        name,
        primary_language,
        model_config,
        policies,
    )
    assert record is not None
    return agent_from_record(record)


async def get_agent(conn: asyncpg.Connection, *, id: str, lock: bool = False) -> Agent | None:
    """The agent with this id, or None. ``lock`` holds the row (``FOR UPDATE``) until the
    transaction ends, for a read-modify-write of its settings."""
    sql = "SELECT * FROM agents WHERE id = $1" + (" FOR UPDATE" if lock else "")
    record = await conn.fetchrow(sql, id)
    return agent_from_record(record) if record else None


async def get_main_agent(conn: asyncpg.Connection, *, user_id: str) -> Agent | None:
    """The user's main agent (v1: the first one created), or None."""
    record = await conn.fetchrow(
        "SELECT * FROM agents WHERE user_id = $1 ORDER BY id LIMIT 1", user_id
    )
    return agent_from_record(record) if record else None


_UPDATABLE = ("display_name", "avatar_url", "email", "phone", "preferences_json")


async def update_user(
    conn: asyncpg.Connection, *, id: str, changes: dict[str, Any], now: Any
) -> User:
    """Set the given columns (from ``display_name, avatar_url, email, phone,
    preferences_json``). Raises EmailTakenError / PhoneTakenError on a unique violation."""
    columns = [c for c in changes if c in _UPDATABLE]
    assignments = ", ".join(f"{c} = ${i + 3}" for i, c in enumerate(columns))
    sql = f"UPDATE users SET updated_at = $2{', ' if columns else ''}{assignments} "
    try:
        record = await conn.fetchrow(
            sql + "WHERE id = $1 RETURNING *", id, now, *(changes[c] for c in columns)
        )
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name == "users_phone_key":
            raise PhoneTakenError() from exc
        raise EmailTakenError() from exc
    assert record is not None
    return _user(record)


async def get_password_hash(conn: asyncpg.Connection, *, id: str) -> str | None:
    """The stored argon2 hash of a user (None when the user or the hash is absent)."""
    value = await conn.fetchval("SELECT password_hash FROM users WHERE id = $1", id)
    return str(value) if value is not None else None


async def update_password_hash(
    conn: asyncpg.Connection, *, id: str, password_hash: str, expected: str | None = None
) -> bool:
    """Replace the password hash; with ``expected``, only if it is still that hash."""
    status = await conn.execute(
        """UPDATE users SET password_hash = $2
           WHERE id = $1 AND ($3::text IS NULL OR password_hash = $3)""",
        id,
        password_hash,
        expected,
    )
    return bool(status.endswith(" 1"))


async def soft_delete_user(conn: asyncpg.Connection, *, id: str, now: Any) -> None:
    """Mark deleted and scrub secrets and contact data; the username (and DID) stay reserved."""
    await conn.execute(
        """UPDATE users SET deleted_at = $2, updated_at = $2, password_hash = NULL,
                  email = NULL, phone = NULL, avatar_url = NULL, llm_keys_json = '{}'
           WHERE id = $1""",
        id,
        now,
    )


async def set_llm_key(
    conn: asyncpg.Connection, *, id: str, provider: str, envelope: str, now: Any
) -> None:
    """Store one provider's encrypted key in ``users.llm_keys_json``."""
    await conn.execute(
        """UPDATE users SET updated_at = $4,
                  llm_keys_json = coalesce(llm_keys_json, '{}')
                                  || jsonb_build_object($2::text, $3::text)
           WHERE id = $1""",
        id,
        provider,
        envelope,
        now,
    )


async def delete_llm_key(conn: asyncpg.Connection, *, id: str, provider: str, now: Any) -> bool:
    """Remove one provider's key; False when there was none."""
    status = await conn.execute(
        """UPDATE users SET llm_keys_json = llm_keys_json - $2::text, updated_at = $3
           WHERE id = $1 AND llm_keys_json ? $2::text""",
        id,
        provider,
        now,
    )
    return bool(status.endswith(" 1"))


async def list_all_llm_keys(conn: asyncpg.Connection) -> list[tuple[str, dict[str, str]]]:
    """``(user_id, llm_keys_json)`` of every user holding a key, rows locked FOR UPDATE."""
    records = await conn.fetch(
        """SELECT id, llm_keys_json FROM users
           WHERE llm_keys_json IS NOT NULL AND llm_keys_json <> '{}' ORDER BY id FOR UPDATE"""
    )
    return [(r["id"], dict(r["llm_keys_json"])) for r in records]


async def replace_llm_keys(conn: asyncpg.Connection, *, id: str, keys: dict[str, str]) -> None:
    """Overwrite a user's ``llm_keys_json`` (re-encryption; ``updated_at`` untouched)."""
    await conn.execute("UPDATE users SET llm_keys_json = $2 WHERE id = $1", id, keys)


async def list_agents(conn: asyncpg.Connection, *, user_id: str) -> list[Agent]:
    """The user's agents, oldest (the main one) first."""
    records = await conn.fetch("SELECT * FROM agents WHERE user_id = $1 ORDER BY id", user_id)
    return [agent_from_record(r) for r in records]


_AGENT_COLUMNS = {
    "name": "name",
    "description": "description",
    "avatar_url": "avatar_url",
    "primary_language": "primary_language",
    "style": "style",
    "model_config": "model_config_json",
    "policies": "policies_json",
    "capabilities": "capabilities_json",
    "is_public": "is_public",
}


async def update_agent(
    conn: asyncpg.Connection, *, id: str, changes: dict[str, Any], now: Any
) -> Agent:
    """Set agent fields (API names, see ``_AGENT_COLUMNS``) and ``updated_at``."""
    columns = [(_AGENT_COLUMNS[k], v) for k, v in changes.items() if k in _AGENT_COLUMNS]
    assignments = "".join(f", {c} = ${i + 3}" for i, (c, _) in enumerate(columns))
    record = await conn.fetchrow(
        f"UPDATE agents SET updated_at = $2{assignments} WHERE id = $1 RETURNING *",
        id,
        now,
        *(v for _, v in columns),
    )
    assert record is not None
    return agent_from_record(record)


ACTIVE_OWNER = """EXISTS (SELECT 1 FROM users owner WHERE owner.id = {user_id}
                     AND owner.deleted_at IS NULL)
       AND NOT EXISTS (SELECT 1 FROM disabled_users d WHERE d.user_id = {user_id})"""
"""SQL condition: the account ``{user_id}`` (a column) is neither deleted nor disabled."""


async def account_active(conn: asyncpg.Connection, *, user_id: str) -> bool:
    """True when the user exists, is not deleted and not disabled by an admin."""
    condition = ACTIVE_OWNER.format(user_id="$1")
    return bool(await conn.fetchval(f"SELECT {condition}", user_id))


async def get_allow_offline_response(conn: asyncpg.Connection, *, user_id: str) -> bool:
    """The user's ``preferences.privacy.allow_offline_response`` (False when unset)."""
    value = await conn.fetchval(
        """SELECT (preferences_json -> 'privacy' ->> 'allow_offline_response')::boolean
           FROM users WHERE id = $1""",
        user_id,
    )
    return bool(value)


async def get_foreign_user_did(conn: asyncpg.Connection, *, instance_did: str) -> str | None:
    """One user DID that is not under ``instance_did`` (deleted users included), or None."""
    did: str | None = await conn.fetchval(
        "SELECT did FROM users WHERE did NOT LIKE $1 || ':%' LIMIT 1", instance_did
    )
    return did


async def list_stored_llm_keys(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    """Every stored LLM key: ``id`` (the user), ``provider``, ``value`` (the envelope
    ``gcm1.<kid>.…``), ordered by user and provider."""
    records: list[asyncpg.Record] = await conn.fetch(
        """SELECT u.id, k.key AS provider, k.value
           FROM users u, jsonb_each_text(u.llm_keys_json) k
           WHERE u.llm_keys_json IS NOT NULL
           ORDER BY u.id, k.key"""
    )
    return records
