"""Edits, soft deletes, threads, idempotency keys and read positions of messages."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from gateway.store import events as events_store
from gateway.store.messages import PLACED_COLUMNS as _COLUMNS
from gateway.store.messages import message_from_record as _message
from gateway.store.messages import position_of
from gateway.store.search import forget_message_embeddings
from models import Message
from models.api import MessageListed


async def lock_message(
    conn: asyncpg.Connection, *, conversation_id: str, message_id: str
) -> asyncpg.Record | None:
    """Lock a message row (deleted or not) of the conversation; None when there is none."""
    return await conn.fetchrow(
        """SELECT id, sender_id, deleted_at, content, content_json, updated_at, created_at
           FROM messages WHERE id = $1 AND conversation_id = $2 FOR UPDATE""",
        message_id,
        conversation_id,
    )


async def current_version(conn: asyncpg.Connection, *, message_id: str) -> int:
    """The message's current version: 1 + the number of stored previous versions."""
    return int(
        await conn.fetchval(
            "SELECT count(*) + 1 FROM message_versions WHERE message_id = $1", message_id
        )
    )


async def insert_version(
    conn: asyncpg.Connection,
    *,
    message_id: str,
    version: int,
    content: str | None,
    content_json: Any,
    created_at: datetime,
) -> None:
    """Keep a previous version of an edited message."""
    await conn.execute(
        """INSERT INTO message_versions (message_id, version, content, content_json, created_at)
           VALUES ($1, $2, $3, $4, $5)""",
        message_id,
        version,
        content,
        content_json,
        created_at,
    )


async def update_content(
    conn: asyncpg.Connection, *, message_id: str, content: str | None, content_json: Any
) -> Message:
    """Replace a visible message's content (the caller holds its row lock).

    Its embeddings go too, and the message-embedding indexer is told to embed the new text.
    """
    record = await conn.fetchrow(
        f"""UPDATE messages SET content = $2, content_json = $3, updated_at = NOW()
            WHERE id = $1 AND deleted_at IS NULL RETURNING {_COLUMNS}""",
        message_id,
        content,
        content_json,
    )
    assert record is not None
    await forget_message_embeddings(conn, message_id=message_id, reembed=True)
    return _message(record)


async def soft_delete(conn: asyncpg.Connection, *, message_id: str) -> datetime:
    """Mark deleted and erase the content everywhere it is kept (row, previous versions,
    stored translations, embeddings, the inbound A2A task's history, delivered outbox
    payloads) and mark its inbox rows as de-duplication only
    (``federation_inbox.message_deleted_at``)."""
    deleted_at = await conn.fetchval(
        """UPDATE messages SET deleted_at = NOW(), updated_at = NOW(), content = NULL,
             content_json = NULL, citations_json = NULL, translation_json = NULL
           WHERE id = $1 RETURNING deleted_at""",
        message_id,
    )
    await conn.execute("DELETE FROM message_versions WHERE message_id = $1", message_id)
    await conn.execute("DELETE FROM message_translations WHERE message_id = $1", message_id)
    await forget_message_embeddings(conn, message_id=message_id, reembed=False)
    # the copies federation keeps: the A2A task that carried it in, the outbox rows that
    # carried it out (undelivered rows still go, the delete follows them)
    await conn.execute(
        "UPDATE a2a_tasks SET history_json = '[]'::jsonb WHERE message_id = $1", message_id
    )
    await conn.execute(
        """UPDATE federation_outbox
           SET payload_json = jsonb_set(payload_json, '{message,parts}', '[{"text": ""}]'::jsonb)
                 #- '{message,metadata,confer,citations}'
                 #- '{message,metadata,confer,translation}'
           WHERE message_id = $1 AND delivered_at IS NOT NULL
             AND payload_json #> '{message,parts}' IS NOT NULL""",
        message_id,
    )
    # the peer's id of it now only de-duplicates: the retention worker may drop that row
    await conn.execute(
        "UPDATE federation_inbox SET message_deleted_at = $2 WHERE message_id = $1",
        message_id,
        deleted_at,
    )
    return deleted_at  # type: ignore[no-any-return]


async def listed(conn: asyncpg.Connection, messages: list[Message]) -> list[MessageListed]:
    """``messages`` with their current ``version`` and ``edited_at`` (``updated_at`` of one
    with a previous version, else None), in the same order; one query for the page."""
    if not messages:
        return []
    rows = await conn.fetch(
        """SELECT m.id, m.updated_at,
                  (SELECT count(*) FROM message_versions v WHERE v.message_id = m.id) AS edits
           FROM messages m WHERE m.id = ANY($1::text[])""",
        [m.id for m in messages],
    )
    edits = {r["id"]: (int(r["edits"]), r["updated_at"]) for r in rows}
    result = []
    for message in messages:
        count, updated_at = edits.get(message.id, (0, None))
        result.append(
            MessageListed(
                **message.model_dump(by_alias=True),
                version=count + 1,
                edited_at=updated_at if count else None,
            )
        )
    return result


async def list_versions(conn: asyncpg.Connection, *, message_id: str) -> list[asyncpg.Record]:
    """Previous versions, oldest first."""
    records: list[asyncpg.Record] = await conn.fetch(
        """SELECT version, content, content_json, created_at FROM message_versions
           WHERE message_id = $1 ORDER BY version""",
        message_id,
    )
    return records


async def get_details(conn: asyncpg.Connection, *, message_id: str) -> asyncpg.Record | None:
    """``updated_at``, ``delivered_at`` and ``read_by_json`` of a visible message."""
    return await conn.fetchrow(
        """SELECT updated_at, delivered_at, read_by_json FROM messages
           WHERE id = $1 AND deleted_at IS NULL""",
        message_id,
    )


async def list_thread(
    conn: asyncpg.Connection, *, conversation_id: str, root_id: str, after: str | None, limit: int
) -> list[Message]:
    """The visible root and replies of a thread, oldest first, after the id ``after``."""
    records = await conn.fetch(
        f"""SELECT {_COLUMNS} FROM messages
            WHERE conversation_id = $1 AND deleted_at IS NULL
              AND (id = $2 OR thread_root = $2) AND ($3::char(26) IS NULL OR id > $3)
            ORDER BY id LIMIT $4""",
        conversation_id,
        root_id,
        after,
        limit,
    )
    return [_message(r) for r in records]


async def get_idempotent(
    conn: asyncpg.Connection, *, user_id: str, key: str
) -> asyncpg.Record | None:
    """The (request_hash, message_id) stored for an Idempotency-Key, if any."""
    return await conn.fetchrow(
        "SELECT request_hash, message_id FROM message_idempotency WHERE user_id = $1 AND key = $2",
        user_id,
        key,
    )


async def insert_idempotent(
    conn: asyncpg.Connection, *, user_id: str, key: str, request_hash: str, message_id: str
) -> None:
    """Remember which message a key produced."""
    await conn.execute(
        """INSERT INTO message_idempotency (user_id, key, request_hash, message_id)
           VALUES ($1, $2, $3, $4)""",
        user_id,
        key,
        request_hash,
        message_id,
    )


async def advance_read(conn: asyncpg.Connection, *, participant_id: str, message_id: str) -> bool:
    """Move the read position forward to ``message_id`` (in the conversation's order: a group
    replica's positions, else the ids); False when it already was past it."""
    status: str = await conn.execute(
        f"""INSERT INTO conversation_reads (participant_id, message_id) VALUES ($1, $2)
            ON CONFLICT (participant_id) DO UPDATE SET message_id = EXCLUDED.message_id
            WHERE {position_of("conversation_reads.message_id")}
                  < {position_of("EXCLUDED.message_id")}""",
        participant_id,
        message_id,
    )
    return status.endswith(" 1")


async def mark_read(
    conn: asyncpg.Connection, *, participant_id: str, message_id: str, user_id: str
) -> datetime:
    """Set the participant's ``last_read_at`` (strictly increasing: it versions the read
    position for the unread cache) and add the reader to the message's ``read_by_json``
    (once). Returns ``last_read_at``."""
    read_at = await conn.fetchval(
        """UPDATE conversation_participants
           SET last_read_at = GREATEST(clock_timestamp(),
                                       last_read_at + interval '1 microsecond')
           WHERE id = $1 RETURNING last_read_at""",
        participant_id,
    )
    await conn.execute(
        """UPDATE messages SET read_by_json = COALESCE(read_by_json, '[]'::jsonb)
             || jsonb_build_array(
                  jsonb_build_object('user_id', $2::text, 'read_at', $3::timestamptz))
           WHERE id = $1 AND NOT COALESCE(read_by_json, '[]'::jsonb)
             @> jsonb_build_array(jsonb_build_object('user_id', $2::text))""",
        message_id,
        user_id,
        read_at,
    )
    return read_at  # type: ignore[no-any-return]


async def mark_delivered(conn: asyncpg.Connection, *, message_ids: list[str]) -> None:
    """Set ``delivered_at`` on the messages that do not have it yet."""
    await conn.execute(
        """UPDATE messages SET delivered_at = NOW()
           WHERE id = ANY($1::text[]) AND delivered_at IS NULL""",
        message_ids,
    )


async def scrub_events(
    conn: asyncpg.Connection, *, user_ids: list[str], message_id: str, tombstone: dict[str, Any]
) -> None:
    """Rewrite the stored stream events of ``user_ids`` that carried a message into its
    tombstone (:func:`gateway.store.events.rewrite_events`)."""
    await events_store.rewrite_events(
        conn,
        user_ids=user_ids,
        types=["message.created", "message.edited"],
        data_id=message_id,
        type_sql="'message.deleted'",
        data_sql="$4::jsonb",
        args=(tombstone,),
    )


async def drop_pending_deliveries(conn: asyncpg.Connection, *, message_id: str) -> None:
    """Drop federation deliveries of a deleted message that have not been sent (or leased)."""
    await conn.execute(
        """DELETE FROM federation_outbox
           WHERE message_id = $1 AND delivered_at IS NULL AND failed_at IS NULL
             AND (leased_until IS NULL OR leased_until < NOW())""",
        message_id,
    )
