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
"""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg

from a2a.confer import ConferConversation
from did.errors import DIDError
from gateway.errors import NotGroupMemberError
from gateway.services.peers import PeerDirectory
from gateway.services.tasks import Recipient
from gateway.store import conversations as conv_store
from gateway.store import groups as groups_store
from gateway.store import peers as peers_store
from gateway.store.conversations import ParticipantRef
from models import PeerAgentRow

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
    DIDs); a replica names the home's group as the home announced it.
    """
    kind = await groups_store.get_conversation_kind(conn, conversation_id=conversation_id)
    if kind is None or kind[0] != "group":
        return None
    replica = await groups_store.get_replica(conn, conversation_id=conversation_id)
    if replica is not None:
        return ConferConversation(
            id=replica.remote_id, home=replica.home, name=kind[1], members=replica.members
        )
    return ConferConversation(
        id=conversation_id,
        home=instance_did(sender_did),
        name=kind[1],
        members=await groups_store.list_member_dids(conn, conversation_id=conversation_id),
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
    ours in which the recipient and the peer take part. A remote group: its replica, created
    (or its name and members brought up to date) by a message from the home instance; a
    member of another instance may write into an existing replica whose member list names it.
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
        if not from_home:
            raise NotGroupMemberError(f"group {claim.id} is unknown here; its home announces it")
        conversation = await conv_store.insert_conversation(
            conn, type="group", name=claim.name, created_by=recipient.user_id
        )
        conversation_id = conversation.id
        await groups_store.insert_replica(
            conn,
            conversation_id=conversation_id,
            home=claim.home,
            remote_id=claim.id,
            members=claim.members,
        )
    else:
        conversation_id = replica.conversation_id
        if from_home:
            await _follow_home(conn, conversation_id, claim)
    await _join(conn, conversation_id, recipient, peer, members if from_home else [])
    return conversation_id


async def _follow_home(
    conn: asyncpg.Connection, conversation_id: str, claim: ConferConversation
) -> None:
    """Take the home's name and member list: members it no longer lists leave the replica."""
    await groups_store.update_replica_members(
        conn, conversation_id=conversation_id, members=claim.members
    )
    kind = await groups_store.get_conversation_kind(conn, conversation_id=conversation_id)
    if claim.name is not None and kind is not None and kind[1] != claim.name:
        await conv_store.update_conversation(
            conn, conversation_id=conversation_id, name=claim.name, archived=None
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
) -> None:
    """Make the recipient (an agent with its owner observing), the sender and every listed
    member we know as a peer participants of the replica."""
    wanted: list[tuple[ParticipantRef, str]] = [(_member(recipient), "member")]
    if recipient.agent_id:
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
