"""Groups and membership: create a group, add/remove/leave, roles, rename/archive, settings.

Rules (docs/conversations.md): only participants see a conversation (everyone else gets 404); admins
add and remove participants, change roles, rename and archive; anyone may leave (the earliest member
becomes admin when the last admin leaves); participants are only added to or removed from
groups. Every change is one transaction that also appends a ``participant.changed`` or
``conversation.changed`` event to each local member's stream (and to a removed user's).

Across instances (docs/federation.md, "Groups across instances"): a group's home instance
owns its membership. A change of a home group is announced, in its transaction, to every
member instance as a signed membership event (:class:`~gateway.services.outbound.Membership`);
the acting member is an :class:`Actor` — a local user, or a member of another instance whose
request its replica forwarded (:mod:`gateway.services.group_events`), under the same rules. A
change asked on a replica is made by the home (:class:`~gateway.services.group_home.HomeLink`)
and the replica takes the state the home answers (:func:`take_home_state`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg

from a2a.confer import ConferConversation, ConferMembership
from gateway.db import Transaction, transaction
from gateway.errors import (
    AlreadyParticipantError,
    ConversationNotFoundError,
    GroupHomeUnreachableError,
    GroupTooLargeError,
    LastAdminError,
    NotAGroupError,
    NotConversationAdminError,
    NotGroupMemberError,
    ParticipantNotFoundError,
    ValidationFailedError,
)
from gateway.realtime.hub import EventHub
from gateway.services import group_backfill, groups, message_requests, outbound
from gateway.services.conversations import (
    check_agent_reachable,
    conversation_public,
    resolve_participant,
    resolve_participants,
)
from gateway.services.group_home import HomeLink
from gateway.services.identity import Identity
from gateway.services.peers import PeerDirectory
from gateway.store import conversations as conv_store
from gateway.store import group_history as history_store
from gateway.store import groups as groups_store
from gateway.store import peers as peers_store
from gateway.store.groups import ReplicaRow
from models import ConversationRow, ParticipantRow, PeerAgentRow, User
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


@dataclass(frozen=True)
class GroupDeps:
    """What group changes use: the pool, the event hub, our identity (its DID signs our
    groups' membership events), the peer directory (resolves added DIDs), the link to other
    instances' groups (None: a replica's changes are refused as unreachable), the member
    cap ``CONFER_MAX_GROUP_MEMBERS``, how much history a joining member's instance gets
    (``CONFER_GROUP_BACKFILL_MESSAGES``, :mod:`gateway.services.group_backfill`) and
    ``CONFER_MESSAGE_REQUESTS_DEFAULT`` (whether an unknown home's invitation is held as a
    request for a user who never said)."""

    pool: asyncpg.Pool
    hub: EventHub
    identity: Identity
    peers: PeerDirectory
    home: HomeLink | None
    max_members: int
    backfill_messages: int = 0
    requests_default: bool = True


@dataclass(frozen=True)
class Actor:
    """Who changes a group: a local ``user``, or at the home a ``peer`` (a member of another
    instance, its request signed by it); ``did`` is theirs."""

    did: str
    user: User | None = None
    peer: PeerAgentRow | None = None


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


async def _acting(
    conn: asyncpg.Connection, conversation_id: str, actor: Actor
) -> tuple[ConversationRow, ParticipantRow]:
    """The conversation and the actor's participant row, the conversation locked: a local
    user who is no participant gets ConversationNotFoundError (404), a peer
    NotGroupMemberError."""
    if actor.user is not None:
        return await require_membership(
            conn, conversation_id=conversation_id, user=actor.user, lock=True
        )
    assert actor.peer is not None
    await conv_store.lock_conversation(conn, conversation_id=conversation_id)
    conversation = await groups_store.get_conversation(conn, conversation_id=conversation_id)
    row = await conv_store.find_participant(
        conn, conversation_id=conversation_id, who=("peer_agent", actor.peer.id)
    )
    if conversation is None or row is None:
        raise NotGroupMemberError(f"{actor.did} is not a member of group {conversation_id}")
    return conversation, row


def _require_admin(membership: ParticipantRow) -> None:
    if membership.role != "admin":
        raise NotConversationAdminError("only admins of this conversation may do that")


async def local_user_ids(conn: asyncpg.Connection, conversation_id: str) -> list[str]:
    """The ids of the local users taking part in ``conversation_id`` (whose streams hear of
    it), in join order."""
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
    users = [*await local_user_ids(tx.conn, conversation_id), *extra_users]
    data = {"conversation_id": conversation_id, "change": change, "participant": participant}
    await hub.append(tx, users, PARTICIPANT_CHANGED, data)


def _participant_json(row: ParticipantRow, did: str | None) -> dict[str, Any]:
    return {
        "id": row.id,
        "participant_type": row.participant_type,
        "did": did,
        "role": row.role,
    }


async def _announce_home(
    tx: Transaction,
    identity: Identity,
    conversation_id: str,
    event: ConferMembership,
    also: tuple[tuple[str, str], ...] = (),
    backfill: int = 0,
) -> None:
    """Queue the membership event of our group ``conversation_id`` for its member instances
    (and, ``also``, a removed member's); nothing for a replica (its home announces). A
    ``join`` queues, behind it, up to ``backfill`` messages of history for the joining
    member's instance (:mod:`gateway.services.group_backfill`)."""
    if await groups_store.get_replica(tx.conn, conversation_id=conversation_id) is not None:
        return
    membership = outbound.Membership(conversation_id, identity.did, event, also)
    await outbound.queue_for_peers(tx.conn, membership)
    if event.event == "join" and event.member is not None:
        await group_backfill.queue_backfill(
            tx.conn,
            conversation_id=conversation_id,
            home=identity.did,
            members=(event.member,),
            limit=backfill,
        )


async def _announce_conversation(
    tx: Transaction, hub: EventHub, conversation: ConversationRow, viewer: User | None
) -> ConversationPublic:
    """``conversation.changed`` to every local member; returns the conversation as ``viewer``
    sees it."""
    public = await conversation_public(tx.conn, conversation, viewer=viewer)
    users = await local_user_ids(tx.conn, conversation.id)
    shared = public.model_dump(mode="json", exclude={"membership"})
    await hub.append(tx, users, CONVERSATION_CHANGED, shared)
    return public


async def create_group(deps: GroupDeps, user: User, data: ConversationCreate) -> ConversationPublic:
    """Create a group with the caller as admin and ``participant_dids`` as members; its
    member instances hear of it at once (a ``create`` membership event).

    Raises GroupTooLargeError (422) when the group would have more than ``max_members``
    participants (the caller included), before any DID is resolved; remote DIDs are resolved
    with bounded concurrency (:func:`~gateway.services.conversations.resolve_participants`).
    """
    max_members = deps.max_members
    dids = list(dict.fromkeys(data.participant_dids))
    if user.did in dids:
        dids.remove(user.did)
    if len(dids) + 1 > max_members:
        raise GroupTooLargeError(
            f"a group has at most {max_members} participants, you included; "
            f"this one would have {len(dids) + 1}"
        )
    refs = await resolve_participants(deps.pool, deps.identity, deps.peers, dids)
    async with transaction(deps.pool) as tx:
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
        public = await _announce_conversation(tx, deps.hub, conversation, user)
        await _announce_home(
            tx, deps.identity, conversation.id, ConferMembership(event="create", by=user.did)
        )
    return public


async def _replica(deps: GroupDeps, conversation_id: str, user: User) -> ReplicaRow | None:
    """The replica row when ``conversation_id`` mirrors a group homed elsewhere (its changes
    are the home's to make), else None; ConversationNotFoundError (404) for a non-member."""
    async with deps.pool.acquire() as conn:
        await require_membership(conn, conversation_id=conversation_id, user=user)
        return await groups_store.get_replica(conn, conversation_id=conversation_id)


async def _forward(
    deps: GroupDeps, user: User, replica: ReplicaRow, request: ConferMembership
) -> None:
    """Have the home make ``request`` for ``user`` and take the state it answers."""
    if deps.home is None:
        raise GroupHomeUnreachableError("this process cannot reach other instances' groups")
    state = await deps.home.forward(user.did, replica, request)
    await take_home_state(deps, state, by=user.did)


async def take_home_state(
    deps: GroupDeps,
    claim: ConferConversation,
    home_peer: str | None = None,
    by: str | None = None,
) -> groups.Applied:
    """Make our replica what the home's ``claim`` says (:func:`groups.apply_home_state`) and
    tell the local members (:func:`announce_applied`). Returns what was done
    (``conversation_id`` None when none of our members is listed and there was no replica;
    ``stale`` when the claim's version was not newer than the replica's: nothing told).
    ``home_peer`` is the home's ``peer_agents`` id when its signed event brought the claim:
    local users who blocked it are not added. Local users it lists who do not know the home
    are invited instead, by ``by`` (who made the change; else the home itself)."""
    await groups.resolve_members(deps.pool, deps.peers, claim, deps.identity.did)
    async with transaction(deps.pool) as tx:
        applied = await groups.apply_home_state(
            tx.conn, deps.identity.did, claim, home_peer, requests_default=deps.requests_default
        )
        if applied.conversation_id is None or applied.stale:
            return applied
        await announce_applied(tx, deps.hub, applied, by or claim.home)
    return applied


async def announce_applied(
    tx: Transaction, hub: EventHub, applied: groups.Applied, inviter: str
) -> None:
    """Tell the local users what :func:`groups.apply_home_state` did to a replica: the
    invitations it opened (sent by ``inviter``, :mod:`gateway.services.message_requests`) or
    withdrew, ``conversation.changed`` to its members, ``participant.changed`` (``removed``)
    to those who no longer take part."""
    assert applied.conversation_id is not None
    conversation = await groups_store.get_conversation(
        tx.conn, conversation_id=applied.conversation_id
    )
    assert conversation is not None
    await message_requests.withdraw_invitations(
        tx, hub, conversation_id=conversation.id, listed=set(applied.listed)
    )
    if applied.invited:
        await message_requests.open_invitations(
            tx,
            hub,
            conversation_id=conversation.id,
            user_ids=set(applied.invited),
            sender_did=inviter,
            group_name=conversation.name,
            group_home=applied.home,
        )
    await _announce_conversation(tx, hub, conversation, None)
    if applied.removed_users:
        data = {"conversation_id": conversation.id, "change": "removed", "participant": None}
        await hub_append_removed(tx, hub, applied.removed_users, data)


async def hub_append_removed(
    tx: Transaction, hub: EventHub, users: list[str], data: dict[str, Any]
) -> None:
    """``participant.changed`` to local users the home removed from a replica."""
    await hub.append(tx, users, PARTICIPANT_CHANGED, data)


async def _public_for(deps: GroupDeps, conversation_id: str, user: User) -> ConversationPublic:
    async with deps.pool.acquire() as conn:
        conversation = await conv_store.get_conversation_for_user(
            conn, conversation_id=conversation_id, user_id=user.id
        )
        if conversation is None:
            raise ConversationNotFoundError(f"no conversation {conversation_id}")
        return await conversation_public(conn, conversation, viewer=user)


async def add_participant(
    deps: GroupDeps, user: User, conversation_id: str, data: ParticipantCreate
) -> ConversationPublic:
    """Add a user, agent or peer agent to a group (admins only); GroupTooLargeError (422) when
    it already has ``max_members`` participants. On a replica, the home adds it."""
    replica = await _replica(deps, conversation_id, user)
    if replica is not None:
        request = ConferMembership(event="join", member=data.did, role=data.role)
        await _forward(deps, user, replica, request)
        return await _public_for(deps, conversation_id, user)
    return await add_member(deps, Actor(user.did, user=user), conversation_id, data)


async def add_member(
    deps: GroupDeps, actor: Actor, conversation_id: str, data: ParticipantCreate
) -> ConversationPublic:
    """Add ``data.did`` to our group ``conversation_id`` as ``actor`` (an admin)."""
    ref = await resolve_participant(deps.pool, deps.identity, deps.peers, data.did)
    async with transaction(deps.pool) as tx:
        conn = tx.conn
        conversation, membership = await _acting(conn, conversation_id, actor)
        _require_admin(membership)
        if conversation.type != "group":
            raise NotAGroupError("participants can only be added to a group")
        if actor.user is not None:
            await check_agent_reachable(conn, actor.user, ref)
        if await conv_store.find_participant(conn, conversation_id=conversation_id, who=ref):
            raise AlreadyParticipantError(f"{data.did} already takes part")
        members = await conv_store.list_participants(conn, conversation_id=conversation_id)
        if len(members) >= deps.max_members:
            raise GroupTooLargeError(f"a group has at most {deps.max_members} participants")
        row = await conv_store.insert_participant(
            conn, conversation_id=conversation_id, who=ref, role=data.role
        )
        # the history is not unread for a new member (docs/federation.md, "History for …")
        await history_store.start_read(conn, participant_id=row.id, conversation_id=conversation_id)
        await _announce(tx, deps.hub, conversation_id, "added", _participant_json(row, data.did))
        event = ConferMembership(event="join", member=data.did, role=data.role, by=actor.did)
        await _announce_home(
            tx, deps.identity, conversation_id, event, backfill=deps.backfill_messages
        )
        public = await conversation_public(conn, conversation, viewer=actor.user)
    return public


async def remove_participant(
    deps: GroupDeps, user: User, conversation_id: str, participant_id: str
) -> None:
    """Remove a participant from a group (admins only; removing oneself is leaving). On a
    replica, the home removes them."""
    replica = await _replica(deps, conversation_id, user)
    if replica is None:
        return await remove_member(
            deps, Actor(user.did, user=user), conversation_id, participant_id
        )
    did = await _participant_did(deps, conversation_id, participant_id)
    leaving = did == user.did
    request = (
        ConferMembership(event="leave") if leaving else ConferMembership(event="kick", member=did)
    )
    await _forward(deps, user, replica, request)
    return None


async def _participant_did(deps: GroupDeps, conversation_id: str, participant_id: str) -> str:
    """The DID of participant ``participant_id`` of the conversation (ParticipantNotFoundError
    when there is none, or it has no DID)."""
    async with deps.pool.acquire() as conn:
        did = await groups_store.get_participant_did(conn, participant_id=participant_id)
        row = await conv_store.get_participant(
            conn, conversation_id=conversation_id, participant_id=participant_id
        )
    if row is None or did is None:
        raise ParticipantNotFoundError(f"no participant {participant_id}")
    return did


async def remove_member(
    deps: GroupDeps, actor: Actor, conversation_id: str, participant_id: str
) -> None:
    """Remove participant ``participant_id`` of our group as ``actor`` (an admin, or the
    participant itself: leaving)."""
    async with transaction(deps.pool) as tx:
        conn = tx.conn
        conversation, membership = await _acting(conn, conversation_id, actor)
        if participant_id != membership.id:
            _require_admin(membership)
        if conversation.type != "group":
            raise NotAGroupError("participants can only be removed from a group")
        row = await conv_store.get_participant(
            conn, conversation_id=conversation_id, participant_id=participant_id
        )
        if row is None:
            raise ParticipantNotFoundError(f"no participant {participant_id}")
        change = "left" if row.id == membership.id else "removed"
        await _leave(tx, deps, conversation_id, row, change, actor)


async def leave_conversation(deps: GroupDeps, user: User, conversation_id: str) -> None:
    """The caller leaves the conversation; it disappears from their list (404 afterwards).
    On a replica, the home makes them leave (and the replica then drops them)."""
    replica = await _replica(deps, conversation_id, user)
    if replica is not None:
        await _forward(deps, user, replica, ConferMembership(event="leave"))
        return
    await leave_as(deps, Actor(user.did, user=user), conversation_id)


async def leave_as(deps: GroupDeps, actor: Actor, conversation_id: str) -> None:
    """``actor`` leaves our conversation ``conversation_id``."""
    async with transaction(deps.pool) as tx:
        _, membership = await _acting(tx.conn, conversation_id, actor)
        await _leave(tx, deps, conversation_id, membership, "left", actor)


async def _leave(
    tx: Transaction,
    deps: GroupDeps,
    conversation_id: str,
    row: ParticipantRow,
    change: str,
    actor: Actor,
) -> None:
    did = await groups_store.get_participant_did(tx.conn, participant_id=row.id)
    await conv_store.delete_participant(tx.conn, participant_id=row.id)
    await conv_store.promote_oldest_member(tx.conn, conversation_id=conversation_id)
    gone = (row.user_id,) if row.user_id else ()
    await _announce(tx, deps.hub, conversation_id, change, _participant_json(row, None), gone)
    also: tuple[tuple[str, str], ...] = ()
    if row.peer_id is not None:
        peer = await peers_store.get_peer(tx.conn, id=row.peer_id)
        also = ((peer.id, peer.endpoint),) if peer is not None else ()
    event = ConferMembership(
        event="leave" if change == "left" else "kick", member=did, by=actor.did
    )
    await _announce_home(tx, deps.identity, conversation_id, event, also)


async def update_participant_role(
    deps: GroupDeps,
    user: User,
    conversation_id: str,
    participant_id: str,
    data: ParticipantUpdate,
) -> None:
    """Change a participant's role (admins only). On a replica, the home changes it."""
    replica = await _replica(deps, conversation_id, user)
    if replica is None:
        actor = Actor(user.did, user=user)
        return await change_role(deps, actor, conversation_id, participant_id, data)
    did = await _participant_did(deps, conversation_id, participant_id)
    await _forward(deps, user, replica, ConferMembership(event="role", member=did, role=data.role))
    return None


async def change_role(
    deps: GroupDeps,
    actor: Actor,
    conversation_id: str,
    participant_id: str,
    data: ParticipantUpdate,
) -> None:
    """Give participant ``participant_id`` of our conversation ``data.role``, as ``actor``
    (an admin).

    Raises NotConversationAdminError (403) for an actor who is not an admin,
    ParticipantNotFoundError (404), and LastAdminError (409) when the change would leave the
    conversation without an admin (leaving is different: the earliest member is promoted).
    """
    async with transaction(deps.pool) as tx:
        conn = tx.conn
        _, membership = await _acting(conn, conversation_id, actor)
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
        await _announce(tx, deps.hub, conversation_id, "role", _participant_json(row, None))
        did = await groups_store.get_participant_did(conn, participant_id=row.id)
        event = ConferMembership(event="role", member=did, role=data.role, by=actor.did)
        await _announce_home(tx, deps.identity, conversation_id, event)


async def update_conversation(
    deps: GroupDeps, user: User, conversation_id: str, data: ConversationUpdate
) -> ConversationPublic:
    """Rename and/or (un)archive (admins only); members get ``conversation.changed``. On a
    replica, the home makes the change."""
    if data.name is None and data.archived is None:
        raise ValidationFailedError("nothing to change: send name and/or archived")
    replica = await _replica(deps, conversation_id, user)
    if replica is None:
        return await change_conversation(deps, Actor(user.did, user=user), conversation_id, data)
    request = ConferMembership(
        event="rename" if data.name is not None else "archive",
        name=data.name,
        archived=data.archived,
    )
    await _forward(deps, user, replica, request)
    return await _public_for(deps, conversation_id, user)


async def change_conversation(
    deps: GroupDeps, actor: Actor, conversation_id: str, data: ConversationUpdate
) -> ConversationPublic:
    """Rename and/or (un)archive our conversation ``conversation_id`` as ``actor`` (an
    admin)."""
    async with transaction(deps.pool) as tx:
        conn = tx.conn
        _, membership = await _acting(conn, conversation_id, actor)
        _require_admin(membership)
        row = await conv_store.update_conversation(
            conn, conversation_id=conversation_id, name=data.name, archived=data.archived
        )
        public = await _announce_conversation(tx, deps.hub, row, actor.user)
        event = ConferMembership(
            event="rename" if data.name is not None else "archive",
            name=data.name,
            archived=data.archived,
            by=actor.did,
        )
        await _announce_home(tx, deps.identity, conversation_id, event)
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
