"""Federated groups: the group a message belongs to, on the way out and on the way in.

A group has one home instance (where it was created), which owns its name and member list.
Every message of a group carries the group's identity in ``metadata.confer.conversation``
(:class:`a2a.confer.ConferConversation`: the home's conversation id, which is also the
``contextId``, the home's instance DID, the name and the member DIDs). An instance with
members of a remote group keeps a replica: a local ``group`` conversation recorded in
``group_replicas`` under ``(home, id)``.

The rule that keeps conversations apart: a message without a group claim never lands in a
group (a ``contextId`` naming a group is ignored, :func:`gateway.services.direct
.peer_conversation`), and a message with one never lands in a direct conversation — it goes
into the named group when the sender is a member, or is refused (:class:`NotGroupMemberError`).
Only a sender of the home instance may create a replica or change its name and member list.

Membership events: every membership change at the home (create, join, leave, kick, role,
rename, archive) is announced to each member instance once, signed by the home instance DID,
carrying the group's whole state after it (:func:`home_state`) and its version (the number of
changes so far); a replica takes that state as it is when it is newer than the one it holds
(:func:`apply_home_state`): name, archived, member list, the roles of its participants.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from a2a.confer import ConferConversation
from did.errors import DIDError
from gateway.errors import NotGroupMemberError
from gateway.services import message_requests
from gateway.services.peers import PeerDirectory
from gateway.services.tasks import Recipient
from gateway.store import conversations as conv_store
from gateway.store import federation as federation_store
from gateway.store import group_history as history_store
from gateway.store import groups as groups_store
from gateway.store import instance as instance_store
from gateway.store import peers as peers_store
from gateway.store import users as users_store
from gateway.store.conversations import ParticipantRef
from models import ParticipantRole, PeerAgentRow
from models.base import clean_name

MAX_RESOLVED_MEMBERS = 32
"""How many unknown member DIDs one group message may make us resolve (a bound on the work
a peer's member list can cause)."""


def instance_did(did: str) -> str:
    """The instance DID a user's or agent's DID lives under (``did:web:<host>:users:<name>``
    → ``did:web:<host>``, see :mod:`gateway.services.identity`)."""
    head, _, _ = did.rpartition(":")
    return head.rpartition(":")[0] or did


def _member(recipient: Recipient) -> ParticipantRef:
    return ("own_agent", recipient.agent_id) if recipient.agent_id else ("user", recipient.user_id)


async def outbound_claim(
    conn: asyncpg.Connection, *, conversation_id: str, sender_did: str
) -> ConferConversation | None:
    """The group identity a message of ``conversation_id`` carries, or None for a direct one.

    A home group names itself (our conversation id, our instance DID, its participants'
    DIDs, the version of that state); a replica names the home's group as the home
    announced it.
    """
    kind = await groups_store.get_conversation_kind(conn, conversation_id=conversation_id)
    if kind is None or kind[0] != "group":
        return None
    replica = await groups_store.get_replica(conn, conversation_id=conversation_id)
    if replica is not None:
        return ConferConversation(
            id=replica.remote_id, home=replica.home, name=kind[1], members=replica.members
        )
    instance = await instance_store.get_instance(conn)
    return ConferConversation(
        id=conversation_id,
        home=instance.did if instance is not None else instance_did(sender_did),
        name=kind[1],
        members=await groups_store.list_member_dids(conn, conversation_id=conversation_id),
        version=await groups_store.get_version(conn, conversation_id=conversation_id),
    )


async def resolve_members(
    pool: asyncpg.Pool, peers: PeerDirectory, claim: ConferConversation, here: str
) -> None:
    """Fetch the DID documents of the claim's remote members we do not know yet (at most
    :data:`MAX_RESOLVED_MEMBERS`), so the replica can include them and replies reach them.
    Best effort: a member that cannot be resolved is left out."""
    remote = [d for d in dict.fromkeys(claim.members) if not d.startswith(here + ":")]
    async with pool.acquire() as conn:
        known = await groups_store.list_known_peer_dids(conn, dids=remote)
    unknown = [d for d in remote if d not in known][:MAX_RESOLVED_MEMBERS]

    async def one(did: str) -> None:
        with contextlib.suppress(DIDError):
            await peers.resolve(did)

    await asyncio.gather(*(one(d) for d in unknown))


async def group_conversation(
    conn: asyncpg.Connection, recipient: Recipient, peer: PeerAgentRow, claim: ConferConversation
) -> str:
    """The local conversation of the group a peer's message claims, for ``recipient``.

    Our own group (``claim.home`` is us): the one ``claim.id`` names, when it is a group of
    ours in which the recipient and the peer take part. A remote group: its replica, which
    only a membership event of its home creates (its name and members are brought up to
    date by a message from the home instance); a member of another instance may write into
    an existing replica whose member list names it.
    Raises NotGroupMemberError otherwise; nothing falls back to a direct conversation.
    """
    here = instance_did(recipient.did)
    if claim.home == here:
        kind = await groups_store.get_conversation_kind(conn, conversation_id=claim.id)
        if (
            kind is None
            or kind[0] != "group"
            or await groups_store.get_replica(conn, conversation_id=claim.id) is not None
            or not await conv_store.both_take_part(
                conn, conversation_id=claim.id, member=_member(recipient), peer_id=peer.id
            )
        ):
            raise NotGroupMemberError(f"{peer.did} is not a member of group {claim.id}")
        return claim.id
    from_home = peer.did.startswith(claim.home + ":")
    await conv_store.lock_direct_pair(conn, f"replica:{claim.home}:{claim.id}")
    replica = await groups_store.find_replica(conn, home=claim.home, remote_id=claim.id)
    members = replica.members if replica is not None and not from_home else claim.members
    if peer.did not in members or recipient.did not in members:
        raise NotGroupMemberError(f"{peer.did} is not a member of group {claim.id}")
    if replica is None:
        # Only the home's signed membership event makes a replica (gateway.services
        # .group_events, where being added by a stranger waits for consent): a message
        # claiming a group nobody announced would otherwise put anyone's post in a new
        # "group" past the recipient's message requests.
        raise NotGroupMemberError(f"group {claim.id} is unknown here; its home announces it")
    conversation_id = replica.conversation_id
    if from_home and await _not_older(conn, conversation_id, claim):
        await _follow_home(conn, conversation_id, claim)
    admission = await message_requests.admission_by_message(
        conn, conversation_id=conversation_id, user_id=recipient.user_id, home=claim.home
    )
    if admission == "refused" or (admission == "held" and recipient.agent_id):
        raise NotGroupMemberError(f"{recipient.did} takes no part in group {claim.id} here")
    await _join(
        conn, conversation_id, recipient, peer, members if from_home else [], admission == "joins"
    )
    return conversation_id


MAX_GROUP_NAME_CHARS = 255
"""The longest group name kept (a local group's limit, ``conversations.name``)."""


def group_name(claim: ConferConversation) -> str | None:
    """The name a home's group ``claim`` gives, cleaned like a local group name
    (:func:`models.base.clean_name`: no control, bidi or zero-width characters, whitespace
    collapsed) and cut to :data:`MAX_GROUP_NAME_CHARS`; None when it names none or nothing
    is left (the replica keeps its name)."""
    shown = clean_name(claim.name)
    return shown[:MAX_GROUP_NAME_CHARS].rstrip() if shown else None


async def _new_replica(conn: asyncpg.Connection, claim: ConferConversation, created_by: str) -> str:
    """Create the local conversation mirroring the home's group ``claim``; returns its id."""
    conversation = await conv_store.insert_conversation(
        conn, type="group", name=group_name(claim), created_by=created_by
    )
    await groups_store.insert_replica(
        conn,
        conversation_id=conversation.id,
        home=claim.home,
        remote_id=claim.id,
        members=claim.members,
        roles=claim.roles,
    )
    return conversation.id


async def _not_older(
    conn: asyncpg.Connection, conversation_id: str, claim: ConferConversation
) -> bool:
    """Whether a message's group claim is at least as new as the state the replica holds (a
    claim without a version is taken as it comes)."""
    if claim.version is None:
        return True
    return claim.version >= await groups_store.get_version(conn, conversation_id=conversation_id)


async def _follow_home(
    conn: asyncpg.Connection, conversation_id: str, claim: ConferConversation
) -> None:
    """Take the home's name and member list: members it no longer lists leave the replica."""
    await groups_store.update_replica_members(
        conn, conversation_id=conversation_id, members=claim.members
    )
    kind = await groups_store.get_conversation_kind(conn, conversation_id=conversation_id)
    name = group_name(claim)
    if name is not None and kind is not None and kind[1] != name:
        await conv_store.update_conversation(
            conn, conversation_id=conversation_id, name=name, archived=None
        )
    listed = set(claim.members)
    for p in await conv_store.list_participants(conn, conversation_id=conversation_id):
        if p["did"] and p["did"] not in listed and p["role"] != "observer":
            await conv_store.delete_participant(conn, participant_id=p["id"])


async def _join(
    conn: asyncpg.Connection,
    conversation_id: str,
    recipient: Recipient,
    peer: PeerAgentRow,
    members: list[str],
    with_recipient: bool = True,
) -> None:
    """Make the recipient (an agent with its owner observing; not ``with_recipient``: one
    held apart), the sender and every listed member we know as a peer participants of the
    replica."""
    wanted: list[tuple[ParticipantRef, str]] = []
    if with_recipient:
        wanted.append((_member(recipient), "member"))
    if with_recipient and recipient.agent_id:
        wanted.append((("user", recipient.user_id), "observer"))
    wanted.append((("peer_agent", peer.id), "member"))
    here = instance_did(recipient.did)
    for did in members:
        if did != peer.did and not did.startswith(here + ":"):
            known = await peers_store.get_peer_by_did(conn, did=did)
            if known is not None:
                wanted.append((("peer_agent", known.id), "member"))
    for who, role in wanted:
        if await conv_store.find_participant(conn, conversation_id=conversation_id, who=who):
            continue
        await conv_store.insert_participant(
            conn, conversation_id=conversation_id, who=who, role=role
        )


_NOT_MEMBER: dict[str, ParticipantRole] = {"admin": "admin", "observer": "observer"}
"""The roles a membership event names (a member not named is a ``member``)."""


async def home_state(
    conn: asyncpg.Connection, *, conversation_id: str, home: str
) -> ConferConversation:
    """The whole state of our group ``conversation_id`` as a membership event carries it:
    name, member DIDs, each member's role, whether it is archived and the version of this
    state (``home`` is our instance DID)."""
    kind = await groups_store.get_conversation_kind(conn, conversation_id=conversation_id)
    roles = await groups_store.list_member_roles(conn, conversation_id=conversation_id)
    return ConferConversation(
        id=conversation_id,
        home=home,
        name=kind[1] if kind else None,
        members=[did for did, _ in roles],
        roles={did: _NOT_MEMBER[role] for did, role in roles if role in _NOT_MEMBER},
        archived=await groups_store.get_archived(conn, conversation_id=conversation_id),
        version=await groups_store.get_version(conn, conversation_id=conversation_id),
    )


@dataclass(frozen=True)
class Applied:
    """What :func:`apply_home_state` did: the replica (None when no local member is listed
    and none was there), the local users who take part now and those who were removed."""

    conversation_id: str | None
    users: list[str]
    removed_users: list[str]
    created: bool
    stale: bool = False
    """The event's version was not newer than the one the replica holds: nothing changed."""
    held: int = 0
    """The version of the state the replica held before (0: none recorded)."""
    invited: frozenset[str] = frozenset()
    """Local users the state listed who were held apart and whose invitation opens now
    (:func:`gateway.services.message_requests.hold_invited`)."""
    listed: frozenset[str] = frozenset()
    """Every local user the state lists (themselves, or an agent of theirs)."""
    home: str = ""
    """The group's home (its instance DID)."""


async def _local_refs(
    conn: asyncpg.Connection, here: str, did: str
) -> list[tuple[ParticipantRef, str | None]]:
    """The participant refs a local member DID stands for: a user, or an agent and its owner
    (observing); empty for an unknown or inactive one."""
    _, _, rest = did.partition(here + ":")
    kind, _, name = rest.partition(":")
    if kind == "users":
        user = await users_store.get_user_by_username(conn, username=name)
        if user is not None and await users_store.account_active(conn, user_id=user.id):
            return [(("user", user.id), None)]
    elif kind == "agents":
        agent = await users_store.get_agent(conn, id=name)
        if agent is not None and await users_store.account_active(conn, user_id=agent.user_id):
            return [(("own_agent", agent.id), None), (("user", agent.user_id), "observer")]
    return []


async def apply_home_state(
    conn: asyncpg.Connection,
    here: str,
    claim: ConferConversation,
    home_peer: str | None = None,
    *,
    requests_default: bool = True,
) -> Applied:
    """Make our replica of the home's group what ``claim`` (a membership event's state) says.

    Creates the replica when a member of ours is listed and there is none yet; sets its name
    and archived flag; adds every listed local member (an agent with its owner observing) and
    every listed remote member we know as a peer, with the role the home gives it; removes
    the participants the home no longer lists (their owners' observer rows with them). Only
    the home instance may call this for its groups (the caller checks the signer). Runs in
    the caller's transaction.

    A state with a ``version`` is taken only when it is newer than the version the replica
    holds (``stale`` otherwise, nothing changed): events may arrive late or twice, and each
    carries the whole state, so skipping versions loses nothing. A state without one (a home
    that does not count) is taken as it comes.

    A local user who blocked the home (``home_peer``, the home instance's ``peer_agents``
    id) is not added by it, nor their agents: a blocked home cannot pull anyone into its
    groups. A local user who takes no part yet and does not know the home is held apart as
    an invitation (:func:`gateway.services.message_requests.hold_invited`, with
    ``requests_default`` for those who never set ``privacy.message_requests``): the replica
    exists for them, they are not added (``invited`` names those whose request the caller
    opens). Who already takes part follows the home's state (a removal still removes).
    """
    await conv_store.lock_direct_pair(conn, f"replica:{claim.home}:{claim.id}")
    replica = await groups_store.find_replica(conn, home=claim.home, remote_id=claim.id)
    held = 0
    if replica is not None and claim.version is not None:
        held = await groups_store.get_version(conn, conversation_id=replica.conversation_id)
        if claim.version <= held:
            return Applied(replica.conversation_id, [], [], False, stale=True, held=held)
    roles = claim.roles or {}
    wanted: dict[ParticipantRef, str] = {}
    owner_of: dict[ParticipantRef, str] = {}  # a local ref → the user it belongs to
    listed: dict[str, set[str]] = {}  # a local user → the DIDs of theirs the state lists
    for did in dict.fromkeys(claim.members):
        if did.startswith(here + ":"):
            refs = await _local_refs(conn, here, did)
            for ref, role in refs:
                wanted.setdefault(ref, role or roles.get(did, "member"))
                owner_of[ref] = next(r[1] for r, _ in refs if r[0] == "user")
                listed.setdefault(owner_of[ref], set()).add(did)
        elif (peer := await peers_store.get_peer_by_did(conn, did=did)) is not None:
            wanted[("peer_agent", peer.id)] = roles.get(did, "member")
    local_users = [ref[1] for ref in wanted if ref[0] == "user"]
    blocked = (
        await groups_store.list_blocking_users(conn, peer_id=home_peer, user_ids=local_users)
        if home_peer is not None and local_users
        else set()
    )
    local_users = [u for u in local_users if u not in blocked]
    current = (
        await conv_store.list_participants(conn, conversation_id=replica.conversation_id)
        if replica is not None
        else []
    )
    taking_part = {p["user_id"] for p in current if p["user_id"]}
    before = set(replica.members) if replica is not None else set()
    holding, invited = await message_requests.hold_invited(
        conn,
        conversation_id=replica.conversation_id if replica is not None else None,
        newcomers={u: not listed[u] & before for u in local_users if u not in taking_part},
        home=claim.home,
        default=requests_default,
    )
    if replica is None:
        if not local_users:
            return Applied(None, [], [], False)
        conversation_id = await _new_replica(conn, claim, local_users[0])
    else:
        conversation_id = replica.conversation_id
        await groups_store.update_replica_members(
            conn, conversation_id=conversation_id, members=claim.members, roles=roles
        )
    name = group_name(claim)
    if name is not None or claim.archived is not None:
        await conv_store.update_conversation(
            conn, conversation_id=conversation_id, name=name, archived=claim.archived
        )
    removed: list[str] = []
    for p in current:
        ref = _participant_ref(p)
        if ref not in wanted:
            await conv_store.delete_participant(conn, participant_id=p["id"])
            if p["user_id"]:
                removed.append(p["user_id"])
            continue
        if p["role"] != wanted[ref]:
            await conv_store.update_participant(conn, participant_id=p["id"], role=wanted[ref])
        del wanted[ref]
    for ref, role in wanted.items():
        if owner_of.get(ref) in blocked or owner_of.get(ref) in holding:
            continue  # they blocked the home, or it invited them: it does not add them
        added = await conv_store.insert_participant(
            conn, conversation_id=conversation_id, who=ref, role=role
        )
        if ref[0] == "peer_agent" and replica is not None:
            # a member of another instance joins with the history read, as the home starts
            # them (and their own instance, taking the backfill): their unread agrees here
            await history_store.start_read(
                conn, participant_id=added.id, conversation_id=conversation_id
            )
    if claim.version is not None:
        await groups_store.set_version(conn, conversation_id=conversation_id, version=claim.version)
    return Applied(
        conversation_id,
        [u for u in local_users if u not in holding],
        removed,
        replica is None,
        held=held,
        invited=frozenset(invited),
        listed=frozenset(listed),
        home=claim.home,
    )


def _participant_ref(p: dict[str, Any]) -> ParticipantRef:
    kind = p["participant_type"]
    column = {"user": "user_id", "own_agent": "agent_id", "peer_agent": "peer_id"}[kind]
    return (kind, p[column])


INSTANCE_ENDPOINT = "/a2a"
"""The path of a Confer instance's own A2A endpoint (the ``#a2a`` service of its instance DID
document), where a group's traffic for that instance goes: one request per instance."""


@dataclass(frozen=True)
class InstanceDestination:
    """One request of a group message for one instance: its ``/a2a`` ``endpoint``, a peer of
    it (``peer_id``, for the outbox row), who signs (``signer``: the author, or our instance
    when we relay a remote author's message) and the ``recipients`` there (member DIDs)."""

    peer_id: str
    endpoint: str
    signer: str
    recipients: tuple[str, ...]


def _origin(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc}"


async def group_destinations(
    conn: asyncpg.Connection,
    *,
    conversation_id: str,
    author_did: str,
    conversation_type: str | None = None,
    peers: Sequence[Mapping[str, Any]] | None = None,
) -> list[InstanceDestination] | None:
    """Where a group message of ``author_did`` goes, once per instance; None for a conversation
    that is no group (or a replica whose home we have not heard from: it is sent per member,
    as before membership events).

    ``conversation_type`` and ``peers`` (the peer participants in join order, each with
    ``peer_id``, ``did`` and ``endpoint``) are what the caller already read in its
    transaction; given, they are not read again.

    A replica sends to the home only (its ``/a2a``, with the home's members as recipients):
    the home stores, orders and relays it. A home group sends to every member instance but
    the author's; a local author signs, a remote author's message is relayed signed by our
    instance DID (docs/federation.md, "Relaying").
    """
    if conversation_type is None:
        kind = await groups_store.get_conversation_kind(conn, conversation_id=conversation_id)
        conversation_type = kind[0] if kind is not None else None
    if conversation_type != "group":
        return None
    if peers is None:
        peers = await federation_store.list_peer_destinations(conn, conversation_id=conversation_id)
    if not peers:  # no member elsewhere: nowhere to send, home or replica
        return []
    replica = await groups_store.get_replica(conn, conversation_id=conversation_id)
    if replica is not None:
        home = await peers_store.get_peer_by_did(conn, did=replica.home)
        if home is None:
            return None
        there = tuple(p["did"] for p in peers if p["did"].startswith(replica.home + ":"))
        if not there:
            return None
        return [InstanceDestination(home.id, home.endpoint, author_did, there)]
    instance = await instance_store.get_instance(conn)
    here = instance.did if instance is not None else instance_did(author_did)
    signer = author_did if author_did.startswith(here + ":") else here
    author_home = instance_did(author_did)
    by_origin: dict[str, list[Mapping[str, Any]]] = {}
    for p in peers:
        if instance_did(p["did"]) != author_home:
            by_origin.setdefault(_origin(p["endpoint"]), []).append(p)
    return [
        InstanceDestination(
            rows[0]["peer_id"],
            origin + INSTANCE_ENDPOINT,
            signer,
            tuple(r["did"] for r in rows),
        )
        for origin, rows in by_origin.items()
    ]
