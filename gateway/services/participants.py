"""Groups and membership: create a group, add/remove/leave, roles, rename/archive, settings.

Rules (docs/conversations.md): only participants see a conversation (everyone else gets 404); admins
add and remove participants, change roles, rename and archive; anyone may leave (the earliest member
becomes admin when the last admin leaves); participants are only added to or removed from
groups. Every change is one transaction that also appends a ``participant.changed`` or
``conversation.changed`` event to each local member's stream (and to a removed user's).
"""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.db import Transaction, transaction
from gateway.errors import (
    AlreadyParticipantError,
    ConversationNotFoundError,
    GroupTooLargeError,
    LastAdminError,
    NotAGroupError,
    NotConversationAdminError,
    ParticipantNotFoundError,
    ValidationFailedError,
)
from gateway.realtime.hub import EventHub
from gateway.services.conversations import (
    check_agent_reachable,
    conversation_public,
    resolve_participant,
    resolve_participants,
)
from gateway.services.identity import Identity
from gateway.services.peers import PeerDirectory
from gateway.store import conversations as conv_store
from gateway.store import peers as peers_store
from models import ConversationRow, ParticipantRow, User
from models.api import (
    ConversationCreate,
    ConversationPublic,
    ConversationUpdate,
    MembershipUpdate,
    ParticipantCreate,
    ParticipantUpdate,
)

CONVERSATION_CHANGED = "conversation.changed"
PARTICIPANT_CHANGED = "participant.changed"


async def require_membership(
    conn: asyncpg.Connection, *, conversation_id: str, user: User, lock: bool = False
) -> tuple[ConversationRow, ParticipantRow]:
    """The conversation and the user's participant row; ConversationNotFoundError (404)
    for non-participants. ``lock`` serialises membership changes of the conversation."""
    if lock:
        await conv_store.lock_conversation(conn, conversation_id=conversation_id)
    membership = await conv_store.get_membership(
        conn, conversation_id=conversation_id, user_id=user.id
    )
    conversation = await conv_store.get_conversation_for_user(
        conn, conversation_id=conversation_id, user_id=user.id
    )
    if membership is None or conversation is None:
        raise ConversationNotFoundError(f"no conversation {conversation_id}")
    return conversation, membership


def _require_admin(membership: ParticipantRow) -> None:
    if membership.role != "admin":
        raise NotConversationAdminError("only admins of this conversation may do that")


async def _local_user_ids(conn: asyncpg.Connection, conversation_id: str) -> list[str]:
    rows = await conv_store.list_participants(conn, conversation_id=conversation_id)
    return [r["user_id"] for r in rows if r["user_id"]]


async def _announce(
    tx: Transaction,
    hub: EventHub,
    conversation_id: str,
    change: str,
    participant: dict[str, Any],
    extra_users: tuple[str, ...] = (),
) -> None:
    users = [*await _local_user_ids(tx.conn, conversation_id), *extra_users]
    data = {"conversation_id": conversation_id, "change": change, "participant": participant}
    await hub.append(tx, users, PARTICIPANT_CHANGED, data)


def _participant_json(row: ParticipantRow, did: str | None) -> dict[str, Any]:
    return {
        "id": row.id,
        "participant_type": row.participant_type,
        "did": did,
        "role": row.role,
    }


async def create_group(
    pool: asyncpg.Pool,
    hub: EventHub,
    identity: Identity,
    peers: PeerDirectory,
    user: User,
    data: ConversationCreate,
    *,
    max_members: int,
) -> ConversationPublic:
    """Create a group with the caller as admin and ``participant_dids`` as members.

    Raises GroupTooLargeError (422) when the group would have more than ``max_members``
    participants (the caller included), before any DID is resolved; remote DIDs are resolved
    with bounded concurrency (:func:`~gateway.services.conversations.resolve_participants`).
    """
    dids = list(dict.fromkeys(data.participant_dids))
    if user.did in dids:
        dids.remove(user.did)
    if len(dids) + 1 > max_members:
        raise GroupTooLargeError(
            f"a group has at most {max_members} participants, you included; "
            f"this one would have {len(dids) + 1}"
        )
    refs = await resolve_participants(pool, identity, peers, dids)
    async with transaction(pool) as tx:
        conn = tx.conn
        for ref in refs:
            await check_agent_reachable(conn, user, ref)
        conversation = await conv_store.insert_conversation(
            conn, type="group", name=data.name, created_by=user.id
        )
        await conv_store.insert_participant(
            conn, conversation_id=conversation.id, who=("user", user.id), role="admin"
        )
        for ref in refs:
            await conv_store.insert_participant(conn, conversation_id=conversation.id, who=ref)
            if ref[0] == "peer_agent":
                await peers_store.upsert_contact(
                    conn, user_id=user.id, peer_id=ref[1], alias=None, added_via="conversation"
                )
        public = await conversation_public(conn, conversation, viewer=user)
        users = await _local_user_ids(conn, conversation.id)
        shared = public.model_dump(mode="json", exclude={"membership"})
        await hub.append(tx, users, CONVERSATION_CHANGED, shared)
    return public


async def add_participant(
    pool: asyncpg.Pool,
    hub: EventHub,
    identity: Identity,
    peers: PeerDirectory,
    user: User,
    conversation_id: str,
    data: ParticipantCreate,
    *,
    max_members: int,
) -> ConversationPublic:
    """Add a user, agent or peer agent to a group (admins only); GroupTooLargeError (422) when
    it already has ``max_members`` participants."""
    ref = await resolve_participant(pool, identity, peers, data.did)
    async with transaction(pool) as tx:
        conn = tx.conn
        conversation, membership = await require_membership(
            conn, conversation_id=conversation_id, user=user, lock=True
        )
        _require_admin(membership)
        if conversation.type != "group":
            raise NotAGroupError("participants can only be added to a group")
        await check_agent_reachable(conn, user, ref)
        if await conv_store.find_participant(conn, conversation_id=conversation_id, who=ref):
            raise AlreadyParticipantError(f"{data.did} already takes part")
        members = await conv_store.list_participants(conn, conversation_id=conversation_id)
        if len(members) >= max_members:
            raise GroupTooLargeError(f"a group has at most {max_members} participants")
        row = await conv_store.insert_participant(
            conn, conversation_id=conversation_id, who=ref, role=data.role
        )
        await _announce(tx, hub, conversation_id, "added", _participant_json(row, data.did))
        public = await conversation_public(conn, conversation, viewer=user)
    return public


async def remove_participant(
    pool: asyncpg.Pool, hub: EventHub, user: User, conversation_id: str, participant_id: str
) -> None:
    """Remove a participant from a group (admins only; removing oneself is leaving)."""
    async with transaction(pool) as tx:
        conn = tx.conn
        conversation, membership = await require_membership(
            conn, conversation_id=conversation_id, user=user, lock=True
        )
        if participant_id != membership.id:
            _require_admin(membership)
        if conversation.type != "group":
            raise NotAGroupError("participants can only be removed from a group")
        row = await conv_store.get_participant(
            conn, conversation_id=conversation_id, participant_id=participant_id
        )
        if row is None:
            raise ParticipantNotFoundError(f"no participant {participant_id}")
        await _leave(tx, hub, conversation_id, row, "removed")


async def leave_conversation(
    pool: asyncpg.Pool, hub: EventHub, user: User, conversation_id: str
) -> None:
    """The caller leaves the conversation; it disappears from their list (404 afterwards)."""
    async with transaction(pool) as tx:
        conn = tx.conn
        _, membership = await require_membership(
            conn, conversation_id=conversation_id, user=user, lock=True
        )
        await _leave(tx, hub, conversation_id, membership, "left")


async def _leave(
    tx: Transaction, hub: EventHub, conversation_id: str, row: ParticipantRow, change: str
) -> None:
    await conv_store.delete_participant(tx.conn, participant_id=row.id)
    await conv_store.promote_oldest_member(tx.conn, conversation_id=conversation_id)
    gone = (row.user_id,) if row.user_id else ()
    await _announce(tx, hub, conversation_id, change, _participant_json(row, None), gone)


async def update_participant_role(
    pool: asyncpg.Pool,
    hub: EventHub,
    user: User,
    conversation_id: str,
    participant_id: str,
    data: ParticipantUpdate,
) -> None:
    """Change a participant's role (admins only).

    Raises NotConversationAdminError (403) for a caller who is not an admin,
    ParticipantNotFoundError (404), and LastAdminError (409) when the change would leave the
    conversation without an admin (leaving is different: the earliest member is promoted).
    """
    async with transaction(pool) as tx:
        conn = tx.conn
        _, membership = await require_membership(
            conn, conversation_id=conversation_id, user=user, lock=True
        )
        _require_admin(membership)
        row = await conv_store.get_participant(
            conn, conversation_id=conversation_id, participant_id=participant_id
        )
        if row is None:
            raise ParticipantNotFoundError(f"no participant {participant_id}")
        if row.role == "admin" and data.role != "admin":
            members = await conv_store.list_participants(conn, conversation_id=conversation_id)
            if not any(m["role"] == "admin" and m["id"] != row.id for m in members):
                raise LastAdminError(
                    "this is the group's only admin: make someone else an admin first"
                )
        row = await conv_store.update_participant(conn, participant_id=row.id, role=data.role)
        await conv_store.promote_oldest_member(conn, conversation_id=conversation_id)
        await _announce(tx, hub, conversation_id, "role", _participant_json(row, None))


async def update_conversation(
    pool: asyncpg.Pool, hub: EventHub, user: User, conversation_id: str, data: ConversationUpdate
) -> ConversationPublic:
    """Rename and/or (un)archive (admins only); members get ``conversation.changed``."""
    if data.name is None and data.archived is None:
        raise ValidationFailedError("nothing to change: send name and/or archived")
    async with transaction(pool) as tx:
        conn = tx.conn
        _, membership = await require_membership(
            conn, conversation_id=conversation_id, user=user, lock=True
        )
        _require_admin(membership)
        row = await conv_store.update_conversation(
            conn, conversation_id=conversation_id, name=data.name, archived=data.archived
        )
        public = await conversation_public(conn, row, viewer=user)
        users = await _local_user_ids(conn, conversation_id)
        shared = public.model_dump(mode="json", exclude={"membership"})
        await hub.append(tx, users, CONVERSATION_CHANGED, shared)
    return public


async def update_membership(
    pool: asyncpg.Pool, user: User, conversation_id: str, data: MembershipUpdate
) -> ConversationPublic:
    """Set the caller's own notification setting for the conversation."""
    async with transaction(pool) as tx:
        conn = tx.conn
        conversation, membership = await require_membership(
            conn, conversation_id=conversation_id, user=user
        )
        await conv_store.update_participant(
            conn, participant_id=membership.id, notification=data.notification
        )
        return await conversation_public(conn, conversation, viewer=user)
