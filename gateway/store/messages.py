"""``messages`` rows (data model: messages)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from models import ConversationRow, Message

COLUMNS = """id, conversation_id, sender_type, sender_id, sender_did, content_type, content,
              content_json, in_reply_to, thread_root, citations_json, language,
              translation_json, via, created_at"""


def placed(message_id: str) -> str:
    """SQL for the ``position`` of the message whose id is the SQL expression
    ``message_id``: its place in a group replica's order (``message_positions``), else its
    id."""
    return (
        f"COALESCE((SELECT mp.position FROM message_positions mp"
        f" WHERE mp.message_id = {message_id}), {message_id})"
    )


PLACED_COLUMNS = f"{COLUMNS}, {placed('messages.id')} AS position"
"""``COLUMNS`` and the message's ``position`` (:func:`placed`), for a query over ``messages``
unaliased."""


def position_of(message_id: str) -> str:
    """SQL for the ``(position, id)`` of the message whose id is the SQL expression
    ``message_id`` (:func:`placed`), the id breaking ties. Compare two with ``<`` / ``>``
    (row comparison)."""
    return f"({placed(message_id)}, {message_id})"


def after_read(message_id: str, read_id: str, conversation_id: str) -> str:
    """SQL: the message ``message_id`` comes after the read position ``read_id`` (an SQL
    expression, NULL before a first read) in conversation ``conversation_id``'s order — the
    ids' order, or in a group replica the positions' (one order on every instance, so a read
    moves the same unread count everywhere)."""
    return f"""CASE WHEN {read_id} IS NULL THEN true
             WHEN NOT EXISTS (SELECT 1 FROM message_positions pc
                              WHERE pc.conversation_id = {conversation_id})
             THEN {message_id} > {read_id}
             ELSE {position_of(message_id)} > {position_of(read_id)} END"""


def message_from_record(record: asyncpg.Record | dict[str, Any]) -> Message:
    """A ``Message`` from a row selected with ``COLUMNS`` (its ``position`` is its id) or
    ``PLACED_COLUMNS``."""
    data = dict(record)
    data["citations"] = data.pop("citations_json")
    data["translation"] = data.pop("translation_json")
    data.setdefault("position", data["id"])
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
    created_at: datetime | None = None,
    touch: bool = False,
) -> Message:
    """Insert one message; ``thread_root`` is derived from the parent when replying; with
    ``touch``, the conversation's ``updated_at`` moves on in the same statement.

    ``id`` is a candidate: when the conversation already holds a message with an id not below
    it (another process in the same millisecond, a clock stepped back), the message gets the
    next id after that one instead, so ids follow commit order within a conversation.
    ``created_at`` (default: now) is for a message written earlier elsewhere (a group's
    history from its home).
    One statement (:data:`_INSERT_MESSAGE`). Raises LookupError when there is no
    conversation ``conversation_id``.
    """
    record = await conn.fetchrow(
        _INSERT_MESSAGE,
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
        touch,
        created_at,
    )
    if record is None:
        raise LookupError(f"no conversation {conversation_id}")
    return message_from_record(record)


@dataclass(frozen=True)
class PostOutcome:
    """What :func:`insert_post` found and did: the conversation (None when ``user_id`` takes
    no part in it), the poster's ``role``, whether it is ``archived``, whether ``in_reply_to``
    named a visible message of it, the stored ``message`` (None when one of those refused
    it) and, once stored, the conversation's ``participants`` as
    :func:`gateway.store.conversations.list_participants` (``with_requests=True``) gives them
    (empty when refused)."""

    conversation: ConversationRow | None
    role: str | None = None
    archived: bool = False
    reply_ok: bool = True
    message: Message | None = None
    participants: list[dict[str, Any]] = field(default_factory=list)


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_NEXT_AFTER = (
    "(left(rtrim({ulid}, 'Z'), -1)"
    f" || substr('{_CROCKFORD}', strpos('{_CROCKFORD}', right(rtrim({{ulid}}, 'Z'), 1)) + 1, 1)"
    " || repeat('0', 26 - length(rtrim({ulid}, 'Z'))))"
)
"""SQL for :func:`gateway.ids.next_after` of the ULID text ``{ulid}``: the last digit that is
not ``Z`` goes one up, the ``Z``s after it become ``0``."""

_CLAIM_HEAD = (
    """
  INSERT INTO conversation_heads AS h (conversation_id, last_message_id)
  SELECT id, $1 FROM {source}
  ON CONFLICT (conversation_id) DO UPDATE SET last_message_id = CASE
    WHEN h.last_message_id < EXCLUDED.last_message_id THEN EXCLUDED.last_message_id
    ELSE """
    + _NEXT_AFTER.format(ulid="h.last_message_id::text")
    + """::char(26) END
  RETURNING last_message_id"""
)
"""The ``head`` step of a message's one statement: claim the candidate id ``$1`` on the
conversation's head (the CTE ``{source}`` yields its id once its row is locked), or the id
right after the head's when the head is not below it; returns the claimed id. A user's post
claims its id the same way, in migration 0030's function (:data:`_POST`)."""

_POST = f"SELECT * FROM confer_post_message({', '.join(f'${n}' for n in range(1, 14))})"
"""A user's post, then its conversation's participants: two statements of migration 0030's
function, one round trip. The participants are read in a snapshot taken after the post has
waited for the conversation's lock, so none that the lock's holder added is missed (one
statement, with one snapshot from before the wait, would miss it)."""

_INSERT_MESSAGE = f"""
WITH conv AS (
  SELECT id FROM conversations WHERE id = $2 FOR UPDATE
), head AS ({_CLAIM_HEAD.format(source="conv")}
), stored AS (
  INSERT INTO messages (id, conversation_id, sender_type, sender_id, sender_did,
                        content_type, content, content_json, in_reply_to,
                        thread_root, via, citations_json, language, translation_json,
                        created_at)
  SELECT head.last_message_id, $2, $3, $4, $5, $6, $7, $8, $9,
         (SELECT COALESCE(m.thread_root, m.id) FROM messages m WHERE m.id = $9),
         $10, $11, $12, $13, COALESCE($15::timestamptz, NOW())
  FROM head
  RETURNING {COLUMNS}
), touched AS (
  UPDATE conversations
  SET updated_at = GREATEST(clock_timestamp(), updated_at + interval '1 microsecond')
  WHERE id = $2 AND $14 AND EXISTS (SELECT 1 FROM stored)
)
SELECT * FROM stored"""
"""One message in one statement: the conversation's row locked first, then its head (the
order every writer takes them in, so concurrent writers cannot deadlock), the candidate id
``$1`` claimed on the head (or the id right after the head's when the head is not below it),
the message inserted under the claimed id and, when ``$14``, the conversation's
``updated_at`` moved on (as :func:`gateway.store.conversations.touch_conversation` does);
``$15`` is its ``created_at`` (NULL: now)."""


async def insert_post(
    conn: asyncpg.Connection,
    *,
    id: str,
    conversation_id: str,
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
) -> PostOutcome:
    """A user's post, and who takes part in the conversation, in one round trip
    (:data:`_POST`): lock the conversation's row (until the transaction ends) with the
    poster's participant row, check the poster may post (a member, not an observer, the
    conversation open, ``in_reply_to`` one of its visible messages), claim ``id`` on the
    conversation's head, insert the message and bump ``updated_at``; then read the
    participants, as they are once the lock is held.

    ``id`` is a candidate: when the conversation's head (read under the lock, so current)
    is not below it (another post while this one waited for the lock, a clock stepped back)
    the message gets the id right after the head's instead, so ids follow commit order
    within a conversation.
    Nothing is written (and no participant read) when the outcome refuses the post.
    """
    record = await conn.fetchrow(
        _POST,
        id,
        conversation_id,
        "user",
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
    if record is None or record["c_id"] is None:
        return PostOutcome(None)
    conversation = ConversationRow.model_validate({k[2:]: record[k] for k in _CONVERSATION_FIELDS})
    stored = record["id"] is not None
    return PostOutcome(
        conversation,
        role=record["c_role"],
        archived=record["c_archived_at"] is not None,
        reply_ok=record["c_reply_ok"],
        message=message_from_record({k: record[k] for k in _MESSAGE_FIELDS}) if stored else None,
        participants=[dict(p) for p in record["participants"] or ()],
    )


_CONVERSATION_FIELDS = (
    "c_id",
    "c_type",
    "c_name",
    "c_created_by",
    "c_created_at",
    "c_updated_at",
    "c_archived_at",
)
_MESSAGE_FIELDS = tuple(" ".join(COLUMNS.split()).split(", "))


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
    """A visible (not deleted) message by id, with its ``position``, or None."""
    record = await conn.fetchrow(
        f"SELECT {PLACED_COLUMNS} FROM messages WHERE id = $1 AND deleted_at IS NULL", id
    )
    return message_from_record(record) if record else None


async def list_messages(
    conn: asyncpg.Connection, *, conversation_id: str, before: str | None, limit: int
) -> list[Message]:
    """Visible messages, last first in the conversation's order, strictly before the
    message ``before`` when given (or, for a ULID that names no message, strictly below it).

    The order is the ids' (the order of commits here), except in a replica of a group homed
    elsewhere, which is ordered by ``position`` (the home's order, see
    :mod:`gateway.services.group_order`), the id breaking ties (a home that gave two messages
    one position), so a cursor never skips one; the replica's query reads its messages
    through that order instead of the id index."""
    replica = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM message_positions WHERE conversation_id = $1)",
        conversation_id,
    )
    if not replica:
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
    records = await conn.fetch(
        f"""SELECT * FROM (SELECT {PLACED_COLUMNS} FROM messages
                           WHERE conversation_id = $1 AND deleted_at IS NULL) placed
            WHERE $2::char(26) IS NULL OR (position, id) < {position_of("$2::char(26)")}
            ORDER BY position DESC, id DESC LIMIT $3""",
        conversation_id,
        before,
        limit,
    )
    return [message_from_record(r) for r in records]


async def place_message(
    conn: asyncpg.Connection, *, message_id: str, conversation_id: str, position: str
) -> bool:
    """Record ``position`` (a ULID) as the place of ``message_id`` in ``conversation_id``'s
    order, once: False when the message already has a place (nothing changes)."""
    placed = await conn.fetchval(
        """INSERT INTO message_positions (message_id, conversation_id, position)
           VALUES ($1, $2, $3) ON CONFLICT (message_id) DO NOTHING RETURNING 1""",
        message_id,
        conversation_id,
        position,
    )
    return placed is not None


async def count_unread(
    conn: asyncpg.Connection, *, conversation_id: str, participant_id: str, user_id: str
) -> int:
    """Visible messages from others after the participant's read position (all if none), in
    the conversation's order (:func:`after_read`)."""
    read = "(SELECT message_id FROM conversation_reads WHERE participant_id = $2)"
    count = await conn.fetchval(
        f"""SELECT count(*) FROM messages m
            WHERE m.conversation_id = $1 AND m.deleted_at IS NULL AND m.sender_id <> $3
              AND {after_read("m.id", read, "$1")}""",
        conversation_id,
        participant_id,
        user_id,
    )
    return int(count)
