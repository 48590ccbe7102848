"""SQL for ``message_translations`` (migration 0007)."""

from __future__ import annotations

from typing import Any

import asyncpg

from models.translation import MessageTranslation

_COLUMNS = "id, message_id, translation_json, requested_by, created_at"


def _row(record: asyncpg.Record, *, reused: bool) -> MessageTranslation:
    data = dict(record)
    data["translation"] = data.pop("translation_json")
    return MessageTranslation.model_validate({**data, "reused": reused})


async def find_translation(
    conn: asyncpg.Connection, *, message_id: str, target: str, source_sha256: str
) -> MessageTranslation | None:
    """The stored translation of this text of the message into ``target``, if any."""
    record = await conn.fetchrow(
        f"""SELECT {_COLUMNS} FROM message_translations
            WHERE message_id = $1 AND target_language = $2 AND source_sha256 = $3""",
        message_id,
        target,
        source_sha256,
    )
    return _row(record, reused=True) if record else None


async def insert_translation(
    conn: asyncpg.Connection,
    *,
    id: str,
    message_id: str,
    target: str,
    source_sha256: str,
    translation: dict[str, Any],
    requested_by: str,
) -> MessageTranslation | None:
    """Store a translation; None when an equal one was stored concurrently (then find it)."""
    record = await conn.fetchrow(
        f"""INSERT INTO message_translations
              (id, message_id, target_language, source_sha256, translation_json, requested_by)
            VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT ON CONSTRAINT uq_message_translations DO NOTHING
            RETURNING {_COLUMNS}""",
        id,
        message_id,
        target,
        source_sha256,
        translation,
        requested_by,
    )
    return _row(record, reused=False) if record else None


# --- automatic translation wishes: ``conversation_auto_translations`` ---


async def upsert_auto_translation(
    conn: asyncpg.Connection, *, conversation_id: str, user_id: str, language: str
) -> dict[str, Any]:
    """Set the user's wish for the conversation (restarting ``since``):
    ``{"conversation_id", "language", "since"}``."""
    record = await conn.fetchrow(
        """INSERT INTO conversation_auto_translations (conversation_id, user_id, language)
           VALUES ($1, $2, $3)
           ON CONFLICT (conversation_id, user_id)
           DO UPDATE SET language = EXCLUDED.language, created_at = NOW()
           RETURNING conversation_id, language, created_at AS since""",
        conversation_id,
        user_id,
        language,
    )
    return dict(record)


async def get_auto_translation(
    conn: asyncpg.Connection, *, conversation_id: str, user_id: str
) -> dict[str, Any] | None:
    """The user's wish ``{"conversation_id", "language", "since"}``, or None."""
    record = await conn.fetchrow(
        """SELECT conversation_id, language, created_at AS since
           FROM conversation_auto_translations WHERE conversation_id = $1 AND user_id = $2""",
        conversation_id,
        user_id,
    )
    return dict(record) if record else None


async def delete_auto_translation(
    conn: asyncpg.Connection, *, conversation_id: str, user_id: str
) -> None:
    """Drop the user's wish for the conversation (no error when there is none)."""
    await conn.execute(
        """DELETE FROM conversation_auto_translations
           WHERE conversation_id = $1 AND user_id = $2""",
        conversation_id,
        user_id,
    )


async def list_pending_auto_translations(
    conn: asyncpg.Connection, *, limit: int
) -> list[dict[str, Any]]:
    """Messages waiting for an automatic translation, oldest first:
    ``{"user_id", "language", "conversation_id", "message_id"}``.

    Pending means: in a conversation the user still takes part in, created since the wish, a
    visible text message not sent by that user, with no translation into the wished language
    of its current text (``source_sha256``).
    """
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
