"""A group's history from its home, taken quietly into the replica.

When a user or agent of ours joins a group homed elsewhere, the home sends the group's recent
history we lack (:mod:`gateway.services.group_backfill`): ``SendMessage`` calls with
``metadata.confer.history`` (:class:`a2a.confer.ConferHistory`), each signed by the home's
instance DID with ``metadata.confer.sender`` = the message's author (the relay trust rule,
:func:`gateway.services.federation.relayed_author`: never one of our own users) and the home's
id as ``messageId``. Taken only from the group's home, into a replica that exists and has the
named ``recipients`` as participants, or invited into it (held for them until they decide,
:mod:`gateway.services.group_invitations`; 403 ``not_group_member`` otherwise); a recipient who
blocks the home or the author is skipped, and when none is left it is refused (403
``peer_blocked``), as a relay is.

A history message is stored in the replica at the home's position (the ``messageId``), with
the author's original ``createdAt``, once: one we already hold there (by position, or by the
author's inbox row) is not stored again. No ``message.created``, notification, push, agent
task or message request: it is history. It is read for its recipients (their read position
moves forward to it, never back, with no receipt sent), and the last one of a backfill
(``remaining`` 0) moves it on to our latest message up to ``through`` (the home's latest
when they joined, which may be a post of our own users the home does not send back): the
group's history does not count as unread for the member who joined, as at the home
(:func:`gateway.store.group_history.start_read`). The last one also tells the replica's
local members, once: ``message.history`` (``{"conversation_id"}``), after which a client
reads the conversation's messages again.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from a2a.confer import ConferConversation, ConferHistory, ConferMetadata
from a2a.protocol import InvalidParamsError, JSONRPCError, SendMessageParams, agent_text_message
from gateway.clock import Clock
from gateway.db import Transaction, transaction
from gateway.errors import ConferError, NotGroupMemberError
from gateway.ids import is_ulid, new_id
from gateway.realtime.hub import EventHub
from gateway.services import a2a_content, federation, message_requests, unread
from gateway.services.callers import A2ACaller
from gateway.services.identity import Identity
from gateway.services.participants import local_user_ids
from gateway.services.tasks import Recipient
from gateway.store import audit as audit_store
from gateway.store import conversations as conv_store
from gateway.store import federation as federation_store
from gateway.store import group_history as history_store
from gateway.store import groups as groups_store
from gateway.store import message_changes as change_store
from gateway.store import messages as messages_store
from gateway.store.conversations import ParticipantRef
from models import Message
from models.api import MessageCreate

MESSAGE_HISTORY = "message.history"
"""Stream event: the group's home filled in history of the conversation (``{"conversation_id"}``);
a client reads its messages again."""


@dataclass(frozen=True)
class HistoryDeps:
    """What taking history uses: the pool, the event hub, our identity, the clock (no
    ``createdAt`` in the future), the longest text a message may have and the largest file
    (declared size) it may carry."""

    pool: asyncpg.Pool
    hub: EventHub
    identity: Identity
    clock: Clock
    max_chars: int
    max_file_bytes: int


@dataclass(frozen=True)
class _Reader:
    recipient: Recipient
    participant_id: str | None
    """None: a user invited into the group who has not accepted yet (held for them)."""


async def receive(
    deps: HistoryDeps,
    home: A2ACaller,
    author: A2ACaller,
    params: SendMessageParams,
    ip: str | None,
) -> dict[str, Any]:
    """Take one history message (module docstring); ``home`` is the verified signer and
    ``author`` the verified peer of ``metadata.confer.sender``. Returns the ``SendMessage``
    result ``{"message"}`` whose data part says whether it was ``stored``.

    Raises NotGroupMemberError (403) for history not from the group's home or for no
    replica member here, PeerBlockedError (403) when every recipient blocks the home or the
    author, InvalidParamsError (-32602) for content a local client could not post; each
    refusal is audited ``group.history.refused``.
    """
    try:
        claim, content, file = _checked(deps, home, params)
        async with transaction(deps.pool) as tx:
            stored = await _take(deps, tx, home, author, params, claim, content, file)
            await _audit(tx.conn, "group.history.received", home, params, ip, {"stored": stored})
    except (ConferError, JSONRPCError) as exc:
        code = exc.wire_code if isinstance(exc, ConferError) else exc.code
        detail = exc.detail if isinstance(exc, ConferError) else exc.message
        async with deps.pool.acquire() as conn:
            details = {"code": code, "detail": detail[:500]}
            await _audit(conn, "group.history.refused", home, params, ip, details)
        raise
    reply = agent_text_message(
        "Stored." if stored else "Already held.",
        message_id=new_id(),
        context_id=claim.id,
        task_id=new_id(),
        data={"stored": stored, "messageId": params.message.messageId},
    )
    return {"message": reply}


def _checked(
    deps: HistoryDeps, home: A2ACaller, params: SendMessageParams
) -> tuple[ConferConversation, MessageCreate, a2a_content.IncomingFile | None]:
    """The group claimed, the content as a local post and the file part (whose bytes are at
    the home), once the signer is known to be the group's home."""
    claim = ConferMetadata.of(params.message.metadata).conversation
    signer = home.peer.peer.did if home.peer is not None else None
    if (
        claim is None
        or signer is None
        or params.message.contextId != claim.id
        or signer != claim.home
        or signer.count(":") != 2  # an instance DID, did:web:<host>
        or claim.home == deps.identity.did
    ):
        raise NotGroupMemberError("a group's history is taken from the group's home only")
    if not is_ulid(params.message.messageId):
        raise InvalidParamsError("Invalid params: a history message's messageId is the home's id")
    content = a2a_content.received_content(params.message, deps.max_chars)
    file = (
        a2a_content.received_file(params.message, signer, deps.max_file_bytes)
        if content.content_type == "file"
        else None
    )
    return claim, content, file


async def _take(
    deps: HistoryDeps,
    tx: Transaction,
    home: A2ACaller,
    author: A2ACaller,
    params: SendMessageParams,
    claim: ConferConversation,
    content: MessageCreate,
    file: a2a_content.IncomingFile | None,
) -> bool:
    """Store the message in the replica unless it is held already, and read it for its
    recipients; True when it was stored."""
    conn = tx.conn
    assert author.peer is not None and home.peer is not None
    await conv_store.lock_direct_pair(conn, f"replica:{claim.home}:{claim.id}")
    replica = await groups_store.find_replica(conn, home=claim.home, remote_id=claim.id)
    if replica is None:
        raise NotGroupMemberError(f"group {claim.id} has no replica here")
    conversation_id = replica.conversation_id
    confer = ConferMetadata.of(params.message.metadata)
    readers = await _readers(conn, deps.identity, home, author, conversation_id, confer)
    remote_id = params.message.messageId
    held = await history_store.find_placed(
        conn, conversation_id=conversation_id, position=remote_id
    ) or await groups_store.find_group_copy(
        conn, origin_did=author.origin, remote_message_id=remote_id, conversation_id=conversation_id
    )
    stored = held is None
    if held is None:
        message = await _store(deps, conn, author, conversation_id, params, content, file)
        held = message.id
        for reader in readers:
            await federation_store.insert_inbox(
                conn,
                origin_did=author.origin,
                remote_message_id=remote_id,
                message_id=held,
                recipient_did=reader.recipient.did,
                now=deps.clock.now(),
            )
        if file is not None and isinstance(message.content_json, dict):
            await a2a_content.record_received_file(
                conn,
                attachment_id=str(message.content_json["attachment_id"]),
                message=message,
                user_id=readers[0].recipient.user_id,
                file=file,
                origin_did=home.peer.peer.did,
            )
    await _read(deps, tx, conversation_id, readers, confer.history, held)
    return stored


async def _read(
    deps: HistoryDeps,
    tx: Transaction,
    conversation_id: str,
    readers: list[_Reader],
    history: ConferHistory | None,
    held: str,
) -> None:
    """Move the readers' read position forward to our message ``held`` — on the backfill's
    last one, to our latest message up to ``through`` — and, on that last one, tell the
    replica's local members (``message.history``)."""
    conn = tx.conn
    last = history is not None and history.remaining == 0
    read = held
    if last and history is not None and history.through is not None:
        through = await history_store.latest_through(
            conn, conversation_id=conversation_id, position=history.through
        )
        read = through or held
    for reader in readers:
        if reader.participant_id is not None:  # one invited reads it once they accept
            await change_store.advance_read(
                conn, participant_id=reader.participant_id, message_id=read
            )
    tx.call_after(functools.partial(unread.invalidate, deps.hub.ephemeral, conversation_id))
    if last:
        users = await local_user_ids(conn, conversation_id)
        await deps.hub.append(tx, users, MESSAGE_HISTORY, {"conversation_id": conversation_id})


async def _readers(
    conn: asyncpg.Connection,
    identity: Identity,
    home: A2ACaller,
    author: A2ACaller,
    conversation_id: str,
    confer: ConferMetadata,
) -> list[_Reader]:
    """The named recipients who take part in the replica (or are invited into it and have not
    decided yet: the history is kept for them, as the group's messages are,
    :mod:`gateway.services.message_requests`) and block neither the home nor the author; the
    first refusal raised when none is left."""
    assert home.peer is not None
    home_did = home.peer.peer.did
    readers: list[_Reader] = []
    refusal: ConferError | None = None
    named = [confer.recipient] if confer.recipient else []
    for did in dict.fromkeys([*named, *(confer.recipients or [])]):
        try:
            recipient = await federation.recipient_for_did(conn, identity, did)
            who: ParticipantRef = (
                ("own_agent", recipient.agent_id)
                if recipient.agent_id
                else ("user", recipient.user_id)
            )
            row = await conv_store.find_participant(conn, conversation_id=conversation_id, who=who)
            if row is None and (
                recipient.agent_id
                or await message_requests.admission_by_message(
                    conn, conversation_id=conversation_id, user_id=recipient.user_id, home=home_did
                )
                != "held"
            ):
                raise NotGroupMemberError(f"{did} takes no part in the group here")
            await federation.admit(conn, home, recipient)
            await federation.admit(conn, author, recipient)
        except ConferError as exc:
            refusal = refusal or exc
            continue
        readers.append(_Reader(recipient, row.id if row is not None else None))
    if not readers:
        raise refusal or NotGroupMemberError("the history names no member of the group here")
    return readers


async def _store(
    deps: HistoryDeps,
    conn: asyncpg.Connection,
    author: A2ACaller,
    conversation_id: str,
    params: SendMessageParams,
    content: MessageCreate,
    file: a2a_content.IncomingFile | None,
) -> Message:
    """Insert the message as the author's, written when the author wrote it, at the home's
    position (its ``messageId``), as a reply when the message it answers is here."""
    assert author.peer is not None
    peer = author.peer.peer
    confer = ConferMetadata.of(params.message.metadata)
    remote_id = params.message.messageId
    replied = (
        await history_store.find_placed(
            conn, conversation_id=conversation_id, position=confer.inReplyTo
        )
        if confer.inReplyTo
        else None
    )
    fields, _ = a2a_content.with_attachment(a2a_content.stored_fields(content), file)
    message = await messages_store.insert_message(
        conn,
        id=new_id(),
        conversation_id=conversation_id,
        sender_type="peer_agent",
        sender_id=peer.id,
        sender_did=peer.did,
        in_reply_to=replied,
        created_at=_written(confer.createdAt, deps.clock.now()),
        **fields,
    )
    await messages_store.place_message(
        conn, message_id=message.id, conversation_id=conversation_id, position=remote_id
    )
    await conv_store.touch_conversation(conn, conversation_id=conversation_id)
    return message


def _written(created_at: str | None, now: datetime) -> datetime | None:
    """When the author wrote it (``createdAt``), never later than ``now``; None when absent
    or not an ISO 8601 time with an offset."""
    if created_at is None:
        return None
    try:
        written = datetime.fromisoformat(created_at)
    except ValueError:
        return None
    if written.tzinfo is None:
        return None
    return min(written, now)


async def _audit(
    conn: asyncpg.Connection,
    action: str,
    home: A2ACaller,
    params: SendMessageParams,
    ip: str | None,
    details: dict[str, Any],
) -> None:
    claim = ConferMetadata.of(params.message.metadata).conversation
    await audit_store.insert_audit(
        conn,
        action=action,
        details={
            "caller": home.ref,
            "group": claim.id[:255] if claim else None,
            "remote_message_id": params.message.messageId[:128],
            **details,
        },
        ip_address=ip,
    )
