"""``messages`` rows (data model: messages)."""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.ids import next_after
from models import Message

COLUMNS = """id, conversation_id, sender_type, sender_id, sender_did, content_type, content,
              content_json, in_reply_to, thread_root, citations_json, language,
              translation_json, via, created_at"""


def message_from_record(record: asyncpg.Record) -> Message:
    """A ``Message`` from a row selected with ``COLUMNS``."""
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
    content: str | None,
    content_type: str = "text",
    content_json: Any = None,
    in_reply_to: str | None = None,
    via: str | None = None,
    citations: Any = None,
    language: str | None = None,
    translation: Any = None,
) -> Message:
    """Insert one message; ``thread_root`` is derived from the parent when replying.

    ``id`` is a candidate: when the conversation already holds a message with an id not below
    it (another process in the same millisecond, a clock stepped back), the message gets the
    next id after that one instead, so ids follow commit order within a conversation.
    """
    id = await _claim_message_id(conn, conversation_id=conversation_id, candidate=id)
    record = await conn.fetchrow(
        f"""INSERT INTO messages (id, conversation_id, sender_type, sender_id, sender_did,
                                  content_type, content, content_json, in_reply_to,
                                  thread_root, via, citations_json, language, translation_json)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,
                    (SELECT COALESCE(m.thread_root, m.id) FROM messages m WHERE m.id = $9),
                    $10, $11, $12, $13)
            RETURNING {COLUMNS}""",
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
        citations,
        language,
        translation,
    )
    assert record is not None
    return message_from_record(record)


async def _claim_message_id(
    conn: asyncpg.Connection, *, conversation_id: str, candidate: str
) -> str:
    """Lock the conversation's head row and return an id above its last message id.

    The conversation row is locked first, so every writer takes the locks in the same order
    (conversations, then conversation_heads) and concurrent writers cannot deadlock.
    """
    await conn.execute("SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE", conversation_id)
    record = await conn.fetchrow(
        """INSERT INTO conversation_heads (conversation_id, last_message_id) VALUES ($1, $2)
           ON CONFLICT (conversation_id) DO UPDATE SET conversation_id = EXCLUDED.conversation_id
           RETURNING last_message_id, (xmax = 0) AS inserted""",
        conversation_id,
        candidate,
    )
    assert record is not None
    if record["inserted"]:
        return candidate
    chosen = (
        candidate
        if candidate > record["last_message_id"]
        else next_after(record["last_message_id"])
    )
    await conn.execute(
        "UPDATE conversation_heads SET last_message_id = $2 WHERE conversation_id = $1",
        conversation_id,
        chosen,
    )
    return chosen


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
        f"SELECT {COLUMNS} FROM messages WHERE id = $1 AND deleted_at IS NULL", id
    )
    return message_from_record(record) if record else None


async def list_messages(
    conn: asyncpg.Connection, *, conversation_id: str, before: str | None, limit: int
) -> list[Message]:
    """Visible messages, newest first, strictly older than the ULID ``before`` when given."""
    records = await conn.fetch(
        f"""SELECT {COLUMNS} FROM messages
            WHERE conversation_id = $1 AND deleted_at IS NULL
              AND ($2::char(26) IS NULL OR id < $2)
            ORDER BY id DESC LIMIT $3""",
        conversation_id,
        before,
        limit,
    )
    return [message_from_record(r) for r in records]


async def count_unread(
    conn: asyncpg.Connection, *, conversation_id: str, participant_id: str, user_id: str
) -> int:
    """Visible messages from others after the participant's read position (all if none)."""
    count = await conn.fetchval(
        """SELECT count(*) FROM messages m
           WHERE m.conversation_id = $1 AND m.deleted_at IS NULL AND m.sender_id <> $3
             AND m.id > COALESCE(
               (SELECT message_id FROM conversation_reads WHERE participant_id = $2), '')""",
        conversation_id,
        participant_id,
        user_id,
    )
    return int(count)
