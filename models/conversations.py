"""Conversations, their participants and archived threads.

Source: the data model spec, tables ``conversations``, ``conversation_participants``, ``threads``.

Row types mirror their table: one field per column, same name; a nullable column is
``X | None = None``, a ``NOT NULL`` column is required even when the database has a default.
"""

from __future__ import annotations

from typing import Literal

from pydantic import JsonValue

from .base import ConferModel, Timestamp, Ulid

ConversationType = Literal["direct_user_agent", "direct_user_user", "direct_agent_agent", "group"]
"""``conversations.type`` (CHECK ``ck_conversations_type``).

The spec's column is ``VARCHAR(16)``: ``direct_user_agent`` and ``direct_agent_agent`` are valid
here but do not fit in the database until the column is widened.
"""

ParticipantType = Literal["user", "own_agent", "peer_agent"]
"""``conversation_participants.participant_type``.

CHECK ``ck_conversation_participants_participant_type``.
"""

ParticipantRole = Literal["member", "admin", "observer"]
"""``conversation_participants.role``, default ``'member'``.

CHECK ``ck_conversation_participants_role``.
"""


class ConversationRow(ConferModel):
    """Table ``conversations``: a direct one (user↔agent, user↔user, agent↔agent) or a group."""

    id: Ulid
    type: ConversationType
    name: str | None = None
    created_by: Ulid
    created_at: Timestamp
    updated_at: Timestamp
    archived_at: Timestamp | None = None


class ParticipantRow(ConferModel):
    """Table ``conversation_participants``: a user, own agent or peer agent in a conversation.

    Which of ``user_id`` / ``agent_id`` / ``peer_id`` is set follows ``participant_type``.
    ``notification`` defaults to ``'all'`` (its values are not enumerated by the spec).
    """

    id: Ulid
    conversation_id: Ulid
    participant_type: ParticipantType
    user_id: Ulid | None = None
    agent_id: Ulid | None = None
    peer_id: Ulid | None = None
    role: ParticipantRole | None = None
    joined_at: Timestamp
    last_read_at: Timestamp | None = None
    notification: str | None = None


class ThreadRow(ConferModel):
    """Table ``threads``: a long topic kept on record, rooted at ``root_message_id``.

    Created when a group of messages amounts to "a design decision that has been cited";
    ``participants_json`` is not given a shape by the spec.
    """

    id: Ulid
    conversation_id: Ulid
    root_message_id: Ulid
    title: str | None = None
    summary: str | None = None
    tags: list[str] | None = None
    participants_json: JsonValue | None = None
    created_at: Timestamp
    closed_at: Timestamp | None = None
