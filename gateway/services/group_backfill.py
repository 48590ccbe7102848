"""A group's history for the instance of a member who joins it: queued at the home.

A replica holds the messages its instance received while it had members. So when the home
adds a user or agent of another instance to one of its groups, it queues for that instance,
in the transaction of the change and right behind its membership event (the same outbox
lane, so the event is applied first), the history that instance lacks
(:func:`gateway.store.group_history.list_backfill`): of the group's latest
``CONFER_GROUP_BACKFILL_MESSAGES`` messages, those neither written by that instance's own
users and agents (it kept them) nor already sent to it (an original send delivered or still
pending; deleted messages are never sent) — but the latest of them always, held there or
not, whose ``through`` (the group's latest message) tells the instance where the history
ends. Each is the message as a relay carries it
(:mod:`gateway.services.outbound`): its content parts and members, a file part for a file
whose bytes are here, the home's id as ``messageId`` (the replica places it there, see
:mod:`gateway.services.group_order`), ``metadata.confer.sender`` = its author, signed by our
instance DID (so the delivery worker packs them into batches), with the group's claim, the
joining members as ``recipients`` and ``metadata.confer.history`` (:class:`a2a.confer
.ConferHistory`: how many follow, and ``through``). The replica stores it quietly
(:mod:`gateway.services.group_history`).

A member added here starts with the group's history read
(:func:`gateway.store.group_history.start_read`), and the replica reads the history it
receives for the member the same way, so ``unread`` agrees on both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from a2a.confer import ConferConversation, ConferHistory, ConferMetadata, send_message_params
from gateway.services import groups
from gateway.services.a2a_content import outbound_file, outbound_metadata, outbound_parts
from gateway.store import attachments as attachments_store
from gateway.store import federation as federation_store
from gateway.store import group_history as history_store
from models import Message


async def queue_backfill(
    conn: asyncpg.Connection,
    *,
    conversation_id: str,
    home: str,
    members: Sequence[str],
    limit: int,
) -> int:
    """Queue our group's history for the instances of ``members`` (DIDs just added; local
    ones have none to get), at most ``limit`` messages each; returns how many rows. Runs in
    the transaction of the change, after its membership event was queued; ``home`` is our
    instance DID, which signs."""
    if limit <= 0 or not members:
        return 0
    joined = set(members)
    peers = await federation_store.list_peer_destinations(conn, conversation_id=conversation_id)
    instances: dict[str, list[Mapping[str, Any]]] = {}  # origin → its joining members' peers
    for p in peers:
        if p["did"] in joined:
            parts = urlsplit(p["endpoint"])
            instances.setdefault(f"{parts.scheme}://{parts.netloc}", []).append(p)
    queued = 0
    for origin, rows in instances.items():
        queued += await _queue_for(conn, conversation_id, home, origin, rows, limit)
    return queued


async def _queue_for(
    conn: asyncpg.Connection,
    conversation_id: str,
    home: str,
    origin: str,
    rows: list[Mapping[str, Any]],
    limit: int,
) -> int:
    """The history one instance (at ``origin``) lacks, for its joining members ``rows``."""
    destination = urlsplit(origin).netloc.lower()
    backfill = await history_store.list_backfill(
        conn,
        conversation_id=conversation_id,
        limit=limit,
        instance=groups.instance_did(rows[0]["did"]),
        destination=destination,
    )
    history = backfill.messages
    if not history:
        return 0
    claim = await groups.outbound_claim(conn, conversation_id=conversation_id, sender_did=home)
    assert claim is not None, "a home group names itself"
    recipients = [r["did"] for r in rows]
    for n, message in enumerate(history):
        await federation_store.insert_outbox(
            conn,
            destination=destination,
            endpoint=origin + groups.INSTANCE_ENDPOINT,
            sender_did=home,
            peer_id=rows[0]["peer_id"],
            message_id=message.id,
            payload=await _params(
                conn,
                message,
                claim,
                recipients,
                ConferHistory(remaining=len(history) - 1 - n, through=backfill.through),
            ),
            lane=conversation_id,
        )
    return len(history)


async def _params(
    conn: asyncpg.Connection,
    message: Message,
    claim: ConferConversation,
    recipients: list[str],
    history: ConferHistory,
) -> dict[str, Any]:
    """The ``SendMessage`` of one history message (module docstring)."""
    parts = outbound_parts(message)
    carried = None
    if message.content_type == "file":
        attachment = await attachments_store.get_message_attachment(conn, message_id=message.id)
        carried = outbound_file(attachment) if attachment is not None else None
    if carried is not None:
        parts.append(carried[0])
    return send_message_params(
        message_id=message.id,
        context_id=claim.id,
        text=message.content or "",
        parts=parts,
        confer=ConferMetadata(
            file=carried[1] if carried else None,
            sender=message.sender_did,
            recipient=recipients[0],
            recipients=recipients,
            createdAt=message.created_at.isoformat(),
            inReplyTo=message.in_reply_to,
            conversation=claim,
            history=history,
            **outbound_metadata(message),
        ),
    )
