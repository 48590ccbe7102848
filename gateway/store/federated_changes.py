"""Where a message went: the peers of its outbox deliveries (for federated edits/deletes)."""

from __future__ import annotations

import asyncpg

from gateway.store import events as events_store


async def delivery_targets(conn: asyncpg.Connection, *, message_id: str) -> list[asyncpg.Record]:
    """One row per peer the message itself was (or is being) sent to, not failed for good.

    Columns: ``destination``, ``endpoint``, ``peer_id``, ``sender_did``, ``recipient`` (the
    recipient DID the original delivery named) and ``author`` (the ``sender`` it named: not
    its signer when a group's home sent it for its author). Rows of later edits/deletes are
    ignored.
    """
    records: list[asyncpg.Record] = await conn.fetch(
        """SELECT DISTINCT ON (peer_id) destination, endpoint, peer_id, sender_did,
                  payload_json->'message'->'metadata'->'confer'->>'recipient' AS recipient,
                  payload_json->'message'->'metadata'->'confer'->>'sender' AS author
           FROM federation_outbox
           WHERE message_id = $1 AND failed_at IS NULL
             AND payload_json->'message'->>'messageId' = $1
           ORDER BY peer_id, id""",
        message_id,
    )
    return records


async def replace_held_text(
    conn: asyncpg.Connection, *, task_id: str, permission_id: str, owner_id: str, text: str
) -> None:
    """A held (consent-pending) message was edited: the task history, the permission's scope
    (and its ``permission.requested`` events) and the owner's ``permission_request`` notice
    carry the new text."""
    await conn.execute(
        """UPDATE a2a_tasks SET history_json = jsonb_set(history_json, '{0,parts}',
                  jsonb_build_array(jsonb_build_object('text', $2::text)))
           WHERE id = $1 AND jsonb_array_length(history_json) > 0""",
        task_id,
        text,
    )
    await conn.execute(
        "UPDATE permissions SET scope_json = jsonb_set(scope_json, '{text}', to_jsonb($2::text))"
        " WHERE id = $1",
        permission_id,
        text[:1000],
    )
    await events_store.rewrite_events(
        conn,
        user_ids=[owner_id],
        types=["permission.requested"],
        data_id=permission_id,
        type_sql="x.type",
        data_sql="jsonb_set(x.data_json, '{scope_json,text}', to_jsonb($4::text))",
        args=(text[:1000],),
    )
    await conn.execute(
        r"""UPDATE messages
            SET content = regexp_replace(content, '^(.*? asks to \S+ \(L[123]\): ).*$', '\1')
                          || left($2::text, 200)
            WHERE sender_id = $1 AND content_type = 'permission_request'
              AND deleted_at IS NULL""",
        permission_id,
        text,
    )


async def erase_held_text(
    conn: asyncpg.Connection, *, task_id: str, permission_id: str, owner_id: str
) -> list[asyncpg.Record]:
    """A held message was deleted: erase its text from the task history, the permission's
    scope and its ``permission.requested`` events. Returns the ``(id, conversation_id)`` of
    the visible notices to tombstone."""
    await conn.execute(
        """UPDATE a2a_tasks SET history_json = (
                  SELECT COALESCE(jsonb_agg(jsonb_set(h, '{parts}', '[]')), '[]')
                  FROM jsonb_array_elements(history_json) AS h)
           WHERE id = $1""",
        task_id,
    )
    await conn.execute(
        "UPDATE permissions SET scope_json = scope_json - 'text' WHERE id = $1", permission_id
    )
    await events_store.rewrite_events(
        conn,
        user_ids=[owner_id],
        types=["permission.requested"],
        data_id=permission_id,
        type_sql="x.type",
        data_sql="x.data_json #- '{scope_json,text}'",
    )
    records: list[asyncpg.Record] = await conn.fetch(
        """SELECT id, conversation_id FROM messages
           WHERE sender_id = $1 AND content_type = 'permission_request' AND deleted_at IS NULL""",
        permission_id,
    )
    return records
