"""Where a message went: the peers of its outbox deliveries (for federated edits/deletes)."""

from __future__ import annotations

import asyncpg


async def delivery_targets(conn: asyncpg.Connection, *, message_id: str) -> list[asyncpg.Record]:
    """One row per peer the message itself was (or is being) sent to, not failed for good.

    Columns: ``destination``, ``endpoint``, ``peer_id``, ``sender_did``, ``recipient`` (the
    recipient DID the original delivery named). Rows of later edits/deletes are ignored.
    """
    return await conn.fetch(
        """SELECT DISTINCT ON (peer_id) destination, endpoint, peer_id, sender_did,
                  payload_json->'message'->'metadata'->'confer'->>'recipient' AS recipient
           FROM federation_outbox
           WHERE message_id = $1 AND failed_at IS NULL
             AND payload_json->'message'->>'messageId' = $1
           ORDER BY peer_id, id""",
        message_id,
    )
