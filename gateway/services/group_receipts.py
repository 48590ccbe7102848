"""Read receipts in a federated group: to the home, which applies them and relays them.

A group's messages are ordered by its home (:mod:`gateway.services.groups`), so its read
receipts travel like its messages (docs/federation.md, "Read receipts in groups"):

- **Out** (:func:`queue_receipt`, in the read's transaction): a member's read of a group
  becomes one ``SendMessage`` per destination instance, signed by the reader, with
  ``metadata.confer.read = {"messageId"}`` and the group's ``conversation`` (``id``,
  ``home``): from a replica to the home only; from the home to every member instance but the
  reader's. The message named is the read position itself, in the destination's own terms:
  the id that instance gave the message when it sent it (the home knows it from its inbox),
  else the home's id (which every replica received it under).
- **In at the home** (:func:`receive`): the reader must take part in the group (a peer
  participant of it) and the message named must be a message of that group; the reader's
  read position moves forward (never back), the message's ``read_by`` gains the reader, the
  local members get the ``receipt`` event, and the receipt is relayed once to every other
  member instance, signed by the home's instance DID with ``sender`` = the reader.
- **In at a replica**: from the group's home only — signed by a member living there, or
  relayed by the home instance for a member listed in the group — never for one of our own
  users; applied the same way to the replica.

A receipt that names a message the receiver does not have (or the reader already read past)
changes nothing and is answered as a success (``data.applied`` false), so the outbox does not
retry it; receipts of direct conversations are :mod:`gateway.services.federated_receipts`'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from a2a.confer import (
    ConferChange,
    ConferConversation,
    ConferMetadata,
    control_parts,
    send_message_params,
)
from a2a.protocol import InvalidParamsError, SendMessageParams, agent_text_message
from did.errors import DIDError
from gateway.db import Transaction, transaction
from gateway.errors import NotGroupMemberError
from gateway.ids import is_ulid, new_id
from gateway.realtime.hub import EventHub
from gateway.services import groups
from gateway.services.callers import A2ACaller
from gateway.services.federated_receipts import RECEIPT, advance_peer_read
from gateway.services.identity import Identity
from gateway.services.peers import PeerDirectory
from gateway.store import audit as audit_store
from gateway.store import conversations as conv_store
from gateway.store import federation as federation_store
from gateway.store import groups as groups_store
from gateway.store import peers as peers_store
from gateway.tracing import trace_context
from models import PeerAgentRow


@dataclass(frozen=True)
class ReceiptDeps:
    """What an inbound group receipt needs: the pool, the event hub, our identity and the peer
    directory (to resolve a relayed reader we do not know yet)."""

    pool: asyncpg.Pool
    hub: EventHub
    identity: Identity
    peers: PeerDirectory


async def queue_receipt(
    conn: asyncpg.Connection, *, conversation_id: str, reader_did: str, up_to: str
) -> int | None:
    """Queue ``reader_did``'s read of the group ``conversation_id`` up to our message
    ``up_to`` for the group's instances (module docstring); returns how many rows, or None
    when the conversation is no federated group (the direct path applies). Runs in the
    caller's transaction."""
    destinations = await groups.group_destinations(
        conn, conversation_id=conversation_id, author_did=reader_did
    )
    if destinations is None:
        return None
    replica = await groups_store.get_replica(conn, conversation_id=conversation_id)
    if replica is not None:
        claim = ConferConversation(id=replica.remote_id, home=replica.home)
    else:
        home = await groups.outbound_claim(
            conn, conversation_id=conversation_id, sender_did=reader_did
        )
        assert home is not None  # group_destinations found a group
        claim = ConferConversation(id=conversation_id, home=home.home)
    trace = trace_context()
    for d in destinations:
        # A replica names the message as the home sent it; the home as each instance did.
        there = None if replica is not None else groups.instance_did(d.recipients[0])
        named = await groups_store.get_remote_term(conn, message_id=up_to, origin_instance=there)
        await federation_store.insert_outbox(
            conn,
            destination=urlsplit(d.endpoint).netloc.lower(),
            endpoint=d.endpoint,
            sender_did=d.signer,
            peer_id=d.peer_id,
            message_id=None,  # a receipt is no delivery of the message it names
            payload=send_message_params(
                message_id=new_id(),
                context_id=claim.id,
                text="",  # no text part: control_parts
                confer=ConferMetadata(
                    sender=reader_did,
                    recipient=d.recipients[0],
                    recipients=list(d.recipients),
                    conversation=claim,
                    read=ConferChange(messageId=named or up_to),
                ),
                parts=control_parts("read"),
            ),
            trace_context=trace or None,
        )
    return len(destinations)


async def receive(
    deps: ReceiptDeps, caller: A2ACaller, params: SendMessageParams, ip: str | None
) -> dict[str, Any]:
    """Apply a group's read receipt, at the home or at a replica (module docstring); the
    ``SendMessage`` result ``{"message": …}`` with ``data.applied``.

    The caller checked the ``sender`` first: its signer's own DID, or a reader the group's
    home relays (:func:`relayed_by_home`). Raises InvalidParamsError (-32602) for a
    malformed receipt, NotGroupMemberError (403) when the reader takes no part in the group,
    the group is unknown here or the relay speaks for one of our users.
    """
    confer = ConferMetadata.of(params.message.metadata)
    claim, read = confer.conversation, confer.read
    if (
        "read" in confer.malformed
        or read is None
        or claim is None
        or caller.peer is None
        or params.message.contextId != claim.id
    ):
        raise InvalidParamsError(
            "Invalid params: a group's receipt needs message.metadata.confer.read and "
            ".conversation naming its contextId, from a signed peer"
        )
    signer = caller.peer.peer
    reader_did = confer.sender or signer.did
    relayed = reader_did != signer.did
    if relayed and (
        claim.home == deps.identity.did
        or deps.identity.local_subject(reader_did) is not None
        or reader_did.startswith(deps.identity.did + ":")
    ):
        raise NotGroupMemberError(f"{signer.did} may not relay a receipt of {reader_did}")
    reader = await _reader(deps, reader_did) if relayed else signer
    async with transaction(deps.pool) as tx:
        if claim.home == deps.identity.did:
            applied = await _at_home(tx, deps.hub, signer, claim, read.messageId)
        else:
            applied = await _at_replica(tx, deps.hub, signer, reader, claim, read.messageId)
        await audit_store.insert_audit(
            tx.conn,
            action="federation.inbound",
            details={
                "method": "SendMessage/read",
                "caller": caller.ref,
                "reader": reader_did[:512],
                "group": claim.id[:255],
                "message_id": read.messageId[:64],
                "applied": applied,
            },
            ip_address=ip,
        )
    reply = agent_text_message(
        "Receipt applied." if applied else "Nothing to change.",
        message_id=new_id(),
        context_id=claim.id,
        task_id=new_id(),
        data={"applied": applied, "messageId": read.messageId},
    )
    return {"message": reply}


def relayed_by_home(caller: A2ACaller, params: SendMessageParams, here: str) -> bool:
    """Whether ``params`` is a group's receipt its home relays for another ``sender``: signed
    by the claimed group's home instance itself (an instance DID, ``did:web:<host>``), which
    is not us. Such a receipt may name a reader other than its signer (docs/federation.md,
    "Relaying"); :func:`receive` then checks the reader."""
    confer = ConferMetadata.of(params.message.metadata)
    claim = confer.conversation
    if caller.peer is None or claim is None or confer.read is None:
        return False
    signer = caller.peer.peer.did
    return signer == claim.home and signer.count(":") == 2 and claim.home != here


async def _at_home(
    tx: Transaction, hub: EventHub, reader: PeerAgentRow, claim: ConferConversation, named: str
) -> bool:
    conn = tx.conn
    kind = await groups_store.get_conversation_kind(conn, conversation_id=claim.id)
    if (
        kind is None
        or kind[0] != "group"
        or await groups_store.get_replica(conn, conversation_id=claim.id) is not None
        or await conv_store.find_participant(
            conn, conversation_id=claim.id, who=("peer_agent", reader.id)
        )
        is None
    ):
        raise NotGroupMemberError(f"{reader.did} is not a member of group {claim.id}")
    message_id = await _apply(tx, hub, reader, claim.id, named)
    if message_id is None:
        return False
    await queue_receipt(conn, conversation_id=claim.id, reader_did=reader.did, up_to=message_id)
    return True


async def _at_replica(
    tx: Transaction,
    hub: EventHub,
    signer: PeerAgentRow,
    reader: PeerAgentRow | None,
    claim: ConferConversation,
    named: str,
) -> bool:
    replica = await groups_store.find_replica(tx.conn, home=claim.home, remote_id=claim.id)
    from_home = signer.did == claim.home or signer.did.startswith(claim.home + ":")
    if replica is None or not from_home:
        raise NotGroupMemberError(f"{signer.did} does not announce group {claim.id} here")
    if reader is None or reader.did not in replica.members:
        return False  # a member we could not resolve, or one the home no longer lists
    return await _apply(tx, hub, reader, replica.conversation_id, named) is not None


async def _reader(deps: ReceiptDeps, did: str) -> PeerAgentRow | None:
    """The relayed reader's peer row (resolved when we do not know it yet), or None."""
    async with deps.pool.acquire() as conn:
        known = await peers_store.get_peer_by_did(conn, did=did)
    if known is not None:
        return known
    try:
        return await deps.peers.resolve(did)
    except DIDError:
        return None


async def _apply(
    tx: Transaction, hub: EventHub, reader: PeerAgentRow, conversation_id: str, named: str
) -> str | None:
    """Move ``reader``'s read position in ``conversation_id`` to the message it ``named`` and
    tell the local members; our id of that message, or None when there is no such message
    or nothing moved."""
    if not is_ulid(named):
        return None
    conn = tx.conn
    message_id = await groups_store.find_named_message(
        conn, conversation_id=conversation_id, named=named
    )
    if message_id is None:
        return None
    receipt = await advance_peer_read(
        conn, peer=reader, conversation_id=conversation_id, message_id=message_id
    )
    if receipt is None:
        return None
    rows = await conv_store.list_participants(conn, conversation_id=conversation_id)
    await hub.append(tx, [r["user_id"] for r in rows if r["user_id"]], RECEIPT, receipt)
    return message_id
