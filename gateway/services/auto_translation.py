"""Automatic translation per conversation: a participant asks for every new message in their
language (docs/agents.md).

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
from gateway.services.translation import Translator, translate_message
from gateway.store import conversations as conv_store
from gateway.store import translations as translations_store
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
        return await translations_store.upsert_auto_translation(
            conn, conversation_id=conversation_id, user_id=user.id, language=language
        )


async def get_language(pool: asyncpg.Pool, user: User, conversation_id: str) -> dict[str, Any]:
    """The setting, or ``language: None`` when off. Raises ConversationNotFoundError."""
    async with pool.acquire() as conn:
        await _require_member(conn, user, conversation_id)
        found = await translations_store.get_auto_translation(
            conn, conversation_id=conversation_id, user_id=user.id
        )
    return found or {"conversation_id": conversation_id, "language": None}


async def clear_language(pool: asyncpg.Pool, user: User, conversation_id: str) -> None:
    """Turn automatic translation off (idempotent). Raises ConversationNotFoundError."""
    async with pool.acquire() as conn:
        await _require_member(conn, user, conversation_id)
        await translations_store.delete_auto_translation(
            conn, conversation_id=conversation_id, user_id=user.id
        )


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


async def translate_pending(
    translator: Translator, hub: EventHub, failures: dict[tuple[str, str], int]
) -> int:
    """Translate up to 50 pending messages (oldest first) and send each participant a
    ``message.translated`` event through ``hub``, appended in the transaction that stores the
    translation; returns how many were translated.

    ``failures`` counts failed attempts per (message, language) across calls; after
    :data:`MAX_FAILURES` a message is skipped by this process.
    """
    async with translator.pool.acquire() as conn:
        work = await translations_store.list_pending_auto_translations(conn, limit=50)
    done = 0
    for item in work:
        key = (item["message_id"], item["language"])
        if failures.get(key, 0) >= MAX_FAILURES:
            continue
        async with translator.pool.acquire() as conn:
            user = await users_store.get_user(conn, id=item["user_id"])
        if user is None:
            continue
        conversation_id = item["conversation_id"]
        try:
            await translate_message(
                translator,
                user,
                conversation_id,
                item["message_id"],
                item["language"],
                announce=functools.partial(_announce, hub, user.id, conversation_id),
            )
        except ConferError:
            failures[key] = failures.get(key, 0) + 1
            continue
        done += 1
    return done
