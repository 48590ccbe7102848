"""Automatic translation per conversation: a participant asks for every new message in their
language (issue 6).

The wish is a row of ``conversation_auto_translations`` (migration 0007). The worker
(:func:`gateway.workers.auto_translation.run_auto_translator`) finds messages of those
conversations created since the wish, not sent by the participant and not yet translated for
their current text, translates each with the participant's agent ``translation`` model through
:func:`gateway.services.translation.translate_message` (so results are the same linked, reused
variants), and sends the participant a ``message.translated`` event. Because the work list is
computed from the tables, nothing is lost across restarts.
"""

from __future__ import annotations

import functools
from typing import Any

import asyncpg

from gateway.db import Transaction
from gateway.errors import ConferError, ConversationNotFoundError
from gateway.realtime.hub import EventHub
from gateway.state import AppState
from gateway.store import conversations as conv_store
from gateway.store import users as users_store
from models import User
from models.translation import MessageTranslation

MESSAGE_TRANSLATED = "message.translated"
MAX_FAILURES = 3  # per (message, language) and process; then that message is skipped


async def _require_member(conn: asyncpg.Connection, user: User, conversation_id: str) -> None:
    found = await conv_store.get_conversation_for_user(
        conn, conversation_id=conversation_id, user_id=user.id
    )
    if found is None:
        raise ConversationNotFoundError(f"no conversation {conversation_id}")


async def set_language(
    pool: asyncpg.Pool, user: User, conversation_id: str, language: str
) -> dict[str, Any]:
    """Turn automatic translation on (or change its language); returns the setting
    ``{"conversation_id", "language", "since"}``. Raises ConversationNotFoundError."""
    async with pool.acquire() as conn:
        await _require_member(conn, user, conversation_id)
        record = await conn.fetchrow(
            """INSERT INTO conversation_auto_translations (conversation_id, user_id, language)
               VALUES ($1, $2, $3)
               ON CONFLICT (conversation_id, user_id)
               DO UPDATE SET language = EXCLUDED.language, created_at = NOW()
               RETURNING conversation_id, language, created_at AS since""",
            conversation_id,
            user.id,
            language,
        )
    return dict(record)


async def get_language(pool: asyncpg.Pool, user: User, conversation_id: str) -> dict[str, Any]:
    """The setting, or ``language: None`` when off. Raises ConversationNotFoundError."""
    async with pool.acquire() as conn:
        await _require_member(conn, user, conversation_id)
        record = await conn.fetchrow(
            """SELECT conversation_id, language, created_at AS since
               FROM conversation_auto_translations WHERE conversation_id = $1 AND user_id = $2""",
            conversation_id,
            user.id,
        )
    return dict(record) if record else {"conversation_id": conversation_id, "language": None}


async def clear_language(pool: asyncpg.Pool, user: User, conversation_id: str) -> None:
    """Turn automatic translation off (idempotent). Raises ConversationNotFoundError."""
    async with pool.acquire() as conn:
        await _require_member(conn, user, conversation_id)
        await conn.execute(
            """DELETE FROM conversation_auto_translations
               WHERE conversation_id = $1 AND user_id = $2""",
            conversation_id,
            user.id,
        )


async def pending(conn: asyncpg.Connection, limit: int) -> list[dict[str, Any]]:
    """Messages waiting for an automatic translation, oldest first:
    ``{"user_id", "language", "conversation_id", "message_id"}``."""
    records = await conn.fetch(
        """SELECT s.user_id, s.language, m.conversation_id, m.id AS message_id
           FROM conversation_auto_translations s
           JOIN conversation_participants p
             ON p.conversation_id = s.conversation_id AND p.user_id = s.user_id
           JOIN messages m ON m.conversation_id = s.conversation_id
           WHERE m.created_at >= s.created_at AND m.deleted_at IS NULL
             AND m.content_type = 'text' AND coalesce(m.content, '') <> ''
             AND NOT (m.sender_type = 'user' AND m.sender_id = s.user_id)
             AND NOT EXISTS (
               SELECT 1 FROM message_translations t
               WHERE t.message_id = m.id AND t.target_language = s.language
                 AND t.source_sha256 = encode(sha256(convert_to(m.content, 'UTF8')), 'hex'))
           ORDER BY m.id LIMIT $1""",
        limit,
    )
    return [dict(r) for r in records]


async def _announce(
    hub: EventHub,
    user_id: str,
    conversation_id: str,
    tx: Transaction,
    result: MessageTranslation,
) -> None:
    """``message.translated`` to the participant, in the transaction storing the translation."""
    data = {"conversation_id": conversation_id, **result.model_dump(mode="json")}
    await hub.append(tx, [user_id], MESSAGE_TRANSLATED, data)


async def translate_pending(state: AppState, failures: dict[tuple[str, str], int]) -> int:
    """Translate what :func:`pending` lists and notify each participant; returns how many.

    ``failures`` counts failed attempts per (message, language) across calls; after
    :data:`MAX_FAILURES` a message is skipped by this process.
    """
    from gateway.services.translation import translate_message  # the one translation path

    async with state.pool.acquire() as conn:
        work = await pending(conn, 50)
    done = 0
    for item in work:
        key = (item["message_id"], item["language"])
        if failures.get(key, 0) >= MAX_FAILURES:
            continue
        async with state.pool.acquire() as conn:
            user = await users_store.get_user(conn, id=item["user_id"])
        if user is None:
            continue
        conversation_id = item["conversation_id"]
        try:
            await translate_message(
                state,
                user,
                conversation_id,
                item["message_id"],
                item["language"],
                announce=functools.partial(_announce, state.hub, user.id, conversation_id),
            )
        except ConferError:
            failures[key] = failures.get(key, 0) + 1
            continue
        done += 1
    return done
