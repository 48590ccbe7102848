"""A group's history for an instance a member joined from (``gateway.services.group_backfill``
at the home, ``gateway.services.group_history`` at the replica)."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from gateway.store.messages import COLUMNS, message_from_record, placed
from models import Message


@dataclass(frozen=True)
class Backfill:
    """What an instance gets of a group's history: the ``messages`` to send, oldest first,
    and ``through``, the id of the group's latest message (None for a group without one)."""

    messages: list[Message]
    through: str | None


async def list_backfill(
    conn: asyncpg.Connection,
    *,
    conversation_id: str,
    limit: int,
    instance: str,
    destination: str,
) -> Backfill:
    """Of the latest ``limit`` visible messages of our group ``conversation_id`` that have an
    author DID, those the instance ``instance`` (an instance DID, at ``destination``, its
    ``host[:port]``) lacks: none of its own users' or agents' (it kept them), none whose
    original send to it is delivered or still pending (an edit or delete row does not count;
    a send that failed for good does) — except the latest of the others, always sent: it
    tells the instance where the history ends."""
    records = await conn.fetch(
        f"""SELECT latest.*,
                   starts_with(latest.sender_did, $3 || ':') AS own,
                   EXISTS (
                     SELECT 1 FROM federation_outbox o
                     WHERE o.message_id = latest.id AND o.destination = $4
                       AND o.failed_at IS NULL
                       AND o.payload_json->'message'->>'messageId' = latest.id) AS sent
            FROM (SELECT {COLUMNS} FROM messages
                  WHERE conversation_id = $1 AND deleted_at IS NULL AND sender_did IS NOT NULL
                  ORDER BY id DESC LIMIT $2) latest
            ORDER BY latest.id""",
        conversation_id,
        limit,
        instance,
        destination,
    )
    others = [r for r in records if not r["own"]]
    keep = [r for r in others if not r["sent"] or r is others[-1]]
    return Backfill(
        [
            message_from_record({k: v for k, v in r.items() if k not in ("own", "sent")})
            for r in keep
        ],
        records[-1]["id"] if records else None,
    )


async def start_read(
    conn: asyncpg.Connection, *, participant_id: str, conversation_id: str
) -> None:
    """Set a new participant's read position to the conversation's latest visible message, in
    its order (a group replica's positions, else the ids): its history is not unread for
    them. Nothing when it has none or the participant has a read position already."""
    await conn.execute(
        f"""INSERT INTO conversation_reads (participant_id, message_id)
            SELECT $1, id FROM messages
            WHERE conversation_id = $2 AND deleted_at IS NULL
            ORDER BY {placed("messages.id")} DESC, id DESC LIMIT 1
            ON CONFLICT (participant_id) DO NOTHING""",
        participant_id,
        conversation_id,
    )


async def find_placed(
    conn: asyncpg.Connection, *, conversation_id: str, position: str
) -> str | None:
    """Our message of the replica ``conversation_id`` at the home's ``position`` (a message
    the home sent us, or our member's post the home placed there), deleted or not; None when
    there is none."""
    value = await conn.fetchval(
        """SELECT message_id FROM message_positions
           WHERE conversation_id = $1 AND position = $2 LIMIT 1""",
        conversation_id,
        position,
    )
    return str(value) if value is not None else None


async def latest_through(
    conn: asyncpg.Connection, *, conversation_id: str, position: str
) -> str | None:
    """Our latest visible message of the replica ``conversation_id`` at a position not after
    ``position`` (a home's id), or None."""
    value = await conn.fetchval(
        f"""SELECT id FROM messages
            WHERE conversation_id = $1 AND deleted_at IS NULL
              AND {placed("messages.id")} <= $2
            ORDER BY {placed("messages.id")} DESC, id DESC LIMIT 1""",
        conversation_id,
        position,
    )
    return str(value) if value is not None else None
