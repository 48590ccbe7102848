"""``users`` and ``agents`` rows (data model: users, agents)."""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.errors import UsernameTakenError
from models import Agent, User


def _user(record: asyncpg.Record) -> User:
    data = dict(record)
    data["preferences"] = data.pop("preferences_json") or {}
    data["llm_keys"] = data.pop("llm_keys_json") or {}
    data.pop("password_hash", None)
    return User.model_validate(data)


def _agent(record: asyncpg.Record) -> Agent:
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


async def get_user(conn: asyncpg.Connection, *, id: str) -> User | None:
    """The user with this id, deleted or not; None when absent."""
    record = await conn.fetchrow("SELECT * FROM users WHERE id = $1", id)
    return _user(record) if record else None


async def get_user_by_username(conn: asyncpg.Connection, *, username: str) -> User | None:
    """The non-deleted user with this username; None when absent."""
    record = await conn.fetchrow(
        "SELECT * FROM users WHERE username = $1 AND deleted_at IS NULL", username
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
    return _agent(record)


async def get_agent(conn: asyncpg.Connection, *, id: str) -> Agent | None:
    """The agent with this id, or None."""
    record = await conn.fetchrow("SELECT * FROM agents WHERE id = $1", id)
    return _agent(record) if record else None


async def get_main_agent(conn: asyncpg.Connection, *, user_id: str) -> Agent | None:
    """The user's main agent (v1: the first one created), or None."""
    record = await conn.fetchrow(
        "SELECT * FROM agents WHERE user_id = $1 ORDER BY id LIMIT 1", user_id
    )
    return _agent(record) if record else None
