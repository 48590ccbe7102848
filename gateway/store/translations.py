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
