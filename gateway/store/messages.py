"""``messages`` rows (data model: messages)."""

from __future__ import annotations

from typing import Any

import asyncpg

from models import Message

_COLUMNS = """id, conversation_id, sender_type, sender_id, sender_did, content_type, content,
              content_json, in_reply_to, thread_root, citations_json, language,
              translation_json, via, created_at"""


def _message(record: asyncpg.Record) -> Message:
    data = dict(record)
    data["citations"] = data.pop("citations_json")
    data["translation"] = data.pop("translation_json")
    return Message.model_validate(data)


async def insert_message(
    conn: asyncpg.Connection,
    *,
    id: str,
    conversation_id: str,
    sender_type: str,
    sender_id: str,
    sender_did: str | None,
    content: str,
    content_type: str = "text",
    content_json: Any = None,
    in_reply_to: str | None = None,
    via: str | None = None,
) -> Message:
    """Insert one message; ``thread_root`` is derived from the parent when replying."""
    record = await conn.fetchrow(
        f"""INSERT INTO messages (id, conversation_id, sender_type, sender_id, sender_did,
                                  content_type, content, content_json, in_reply_to,
                                  thread_root, via)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,
                    (SELECT COALESCE(m.thread_root, m.id) FROM messages m WHERE m.id = $9),
                    $10)
            RETURNING {_COLUMNS}""",
        id,
        conversation_id,
        sender_type,
        sender_id,
        sender_did,
        content_type,
        content,
        content_json,
        in_reply_to,
        via,
    )
    assert record is not None
    return _message(record)


async def message_in_conversation(
    conn: asyncpg.Connection, *, message_id: str, conversation_id: str
) -> bool:
    """True when a visible message ``message_id`` belongs to ``conversation_id``."""
    found = await conn.fetchval(
        """SELECT 1 FROM messages
           WHERE id = $1 AND conversation_id = $2 AND deleted_at IS NULL""",
        message_id,
        conversation_id,
    )
    return found is not None


async def get_message(conn: asyncpg.Connection, *, id: str) -> Message | None:
    """A visible (not deleted) message by id, or None."""
    record = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM messages WHERE id = $1 AND deleted_at IS NULL", id
    )
    return _message(record) if record else None


async def list_messages(
    conn: asyncpg.Connection, *, conversation_id: str, before: str | None, limit: int
) -> list[Message]:
    """Visible messages, newest first, strictly older than the ULID ``before`` when given."""
    records = await conn.fetch(
        f"""SELECT {_COLUMNS} FROM messages
            WHERE conversation_id = $1 AND deleted_at IS NULL
              AND ($2::char(26) IS NULL OR id < $2)
            ORDER BY id DESC LIMIT $3""",
        conversation_id,
        before,
        limit,
    )
    return [_message(r) for r in records]
