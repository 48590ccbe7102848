"""One outbound pipeline: a stored change becomes one outbox row per remote destination.

Whatever leaves this instance for a peer goes through :func:`queue_for_peers`, inside the
transaction that stored it (so the delivery is queued exactly when the change commits):

- a :class:`Post` — a user's message, an agent's answer, or the agent's answer to a request
  held for consent — goes to every peer agent of its conversation, or to one named peer; a
  group's message carries the group's identity and the home's group id as its ``contextId``
  and goes once per instance (:func:`gateway.services.groups.group_destinations`: from a
  replica to the home only; from the home to every other member instance, a remote author's
  message relayed signed by our instance), naming that instance's members in
  ``metadata.confer.recipients``;
- a :class:`Change` — an edit or a delete — follows the original to the peers it was sent to
  (signed as the original was: by our instance for its author, as a group's history is);
- a :class:`Receipt` — a local member read a conversation — goes to each peer whose messages
  the read reached, naming (by the peer's own id) its latest message read; in a group, where
  the group's messages go instead (:func:`gateway.services.group_receipts.queue_receipt`);
- a :class:`Membership` — a membership change of a group homed here — goes once to each
  instance with members (and to a removed member's), signed by our instance DID and carrying
  the group's whole state after the change (:func:`gateway.services.groups.home_state`).

Each row's payload is an A2A ``SendMessage`` request built by :func:`a2a.confer.send_message_params`
from a typed :class:`a2a.confer.ConferMetadata`, its content mapped onto parts by
:mod:`gateway.services.a2a_content` (a ``file`` message adds a file part pointing at its
attachment, with its declared size and SHA-256). The delivery worker
(:mod:`gateway.workers.delivery`) signs and posts the rows, in order per destination and
conversation (the row's ``lane``), so a change never overtakes the message it changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from a2a.confer import (
    ConferChange,
    ConferConversation,
    ConferFile,
    ConferMembership,
    ConferMetadata,
    control_parts,
    message_parts,
    send_message_params,
)
from gateway.ids import new_id
from gateway.services import group_receipts, groups
from gateway.services.a2a_content import outbound_file, outbound_metadata, outbound_parts
from gateway.store import attachments as attachments_store
from gateway.store import federated_changes as changes_store
from gateway.store import federation as federation_store
from gateway.store import groups as groups_store
from gateway.store import tasks as tasks_store
from gateway.tracing import trace_context
from models import Message, PeerAgentRow

DELETED_TEXT = "(deleted)"
"""The text part of a delete (A2A requires a non-empty ``parts``; receivers ignore it)."""

RECEIPT_TEXT = "(read)"
"""The text part of a read receipt (receivers ignore it)."""


@dataclass(frozen=True)
class Post:
    """A stored message for the peers.

    ``to`` None sends it to every peer agent of the conversation, in each peer's terms (the
    ``contextId`` the peer last used there, and the peer's own id of the replied message);
    ``to`` one peer sends it to that peer only. ``context_id`` / ``in_reply_to`` override
    those terms (an answer to a held request uses the request's); ``task_id`` and
    ``decision`` mark the agent's answer to a held request. ``conversation_type`` and
    ``peers`` (the conversation's peer participants in join order, with ``peer_id``, ``did``
    and ``endpoint``), when the caller read them in the same transaction, are not read again.
    """

    message: Message
    sender_name: str | None
    to: PeerAgentRow | None = None
    context_id: str | None = None
    in_reply_to: str | None = None
    task_id: str | None = None
    decision: str | None = None
    conversation_type: str | None = None
    peers: Sequence[Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class Change:
    """An edit (``version`` is the new version, ``text`` the new text) or a delete
    (``version`` None) of the message ``message_id`` already sent to peers.

    ``author`` and ``group`` mark a change a group's home relays for a remote member: it goes
    where the home relayed the message, naming the author as ``sender`` and the group.
    """

    message_id: str
    conversation_id: str
    version: int | None = None
    text: str = DELETED_TEXT
    author: str | None = None
    group: ConferConversation | None = None
    content_json: Any = None

    @classmethod
    def edit(cls, message: Message, version: int) -> Change:
        """``message`` edited, now at ``version`` (its text and ``content_json`` travel)."""
        return cls(
            message.id,
            message.conversation_id,
            version,
            message.content or "",
            content_json=message.content_json,
        )

    @classmethod
    def delete(cls, message_id: str, conversation_id: str) -> Change:
        """The message ``message_id`` deleted."""
        return cls(message_id, conversation_id)


@dataclass(frozen=True)
class Receipt:
    """``reader_did`` read ``conversation_id`` up to our message ``up_to`` (inclusive)."""

    conversation_id: str
    reader_did: str
    up_to: str


@dataclass(frozen=True)
class Membership:
    """``event`` happened to our group ``conversation_id``; ``home`` is our instance DID,
    which signs the event. ``also`` are ``(peer_id, endpoint)`` of members who no longer take
    part (a kick, a leave) and must hear of it too."""

    conversation_id: str
    home: str
    event: ConferMembership
    also: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class _Destination:
    peer_id: str
    endpoint: str
    sender_did: str
    recipient: str | None
    # a receipt's: our copy of the peer's latest message read, and the peer's id of it
    message_id: str | None = None
    remote_id: str | None = None
    # a group message's: every member of the destination instance it is for
    recipients: tuple[str, ...] = ()
    # a change's: the author the original named, when our instance signed it for them
    author: str | None = None


Item = Post | Change | Receipt | Membership


async def queue_for_peers(conn: asyncpg.Connection, item: Item) -> int:
    """Queue ``item`` in the outbox for every remote destination; returns how many rows.

    Runs inside the caller's transaction (``conn``); the rows wake the delivery workers when
    it commits. A delete should be queued after the message's pending deliveries were dropped,
    so peers that never got the message are not told. Each row keeps the current trace context
    (the request that queued it, when tracing is on) for its delivery's span.
    """
    if isinstance(item, Membership):
        return await _queue_membership(conn, item)
    if isinstance(item, Receipt):  # a group's receipts go where its messages go
        queued = await group_receipts.queue_receipt(
            conn, conversation_id=item.conversation_id, reader_did=item.reader_did, up_to=item.up_to
        )
        if queued is not None:
            return queued
    destinations = await _destinations(conn, item)
    if not destinations:
        return 0
    trace = trace_context()
    shared = await _post_shared(conn, item, destinations[0])
    for d in destinations:
        if isinstance(item, Receipt):
            assert d.message_id is not None
            message_id = d.message_id
        else:
            message_id = item.message.id if isinstance(item, Post) else item.message_id
        await federation_store.insert_outbox(
            conn,
            destination=urlsplit(d.endpoint).netloc.lower(),
            endpoint=d.endpoint,
            sender_did=d.sender_did,
            peer_id=d.peer_id,
            message_id=message_id,
            payload=await _params(conn, item, d, shared),
            trace_context=trace or None,
            lane=item.message.conversation_id if isinstance(item, Post) else item.conversation_id,
        )
    return len(destinations)


async def _queue_membership(conn: asyncpg.Connection, item: Membership) -> int:
    """One outbox row per member instance (by the origin of its members' endpoints); the
    change counts one more version of the group's state, which the event carries."""
    await groups_store.next_version(conn, conversation_id=item.conversation_id)
    peers = await federation_store.list_peer_destinations(
        conn, conversation_id=item.conversation_id
    )
    instances: dict[str, str] = {}  # origin → a peer of it (the row's peer_id)
    for peer_id, endpoint in [*((p["peer_id"], p["endpoint"]) for p in peers), *item.also]:
        parts = urlsplit(endpoint)
        instances.setdefault(f"{parts.scheme}://{parts.netloc}", peer_id)
    if not instances:
        return 0
    state = await groups.home_state(conn, conversation_id=item.conversation_id, home=item.home)
    for origin, peer_id in instances.items():
        await federation_store.insert_outbox(
            conn,
            destination=urlsplit(origin).netloc.lower(),
            endpoint=origin + groups.INSTANCE_ENDPOINT,
            sender_did=item.home,
            peer_id=peer_id,
            message_id=None,
            payload=send_message_params(
                message_id=new_id(),  # an event is a message of its own
                context_id=item.conversation_id,
                text="",  # no text part: control_parts
                confer=ConferMetadata(sender=item.home, conversation=state, membership=item.event),
                parts=control_parts("membership"),
            ),
            lane=item.conversation_id,
        )
    return len(instances)


async def _destinations(
    conn: asyncpg.Connection, item: Post | Change | Receipt
) -> list[_Destination]:
    if isinstance(item, Receipt):
        read = await federation_store.list_receipt_targets(
            conn, conversation_id=item.conversation_id, up_to=item.up_to
        )
        return [
            _Destination(
                r["peer_id"],
                r["endpoint"],
                item.reader_did,
                r["did"],
                r["message_id"],
                r["remote_id"],
            )
            for r in read
        ]
    if isinstance(item, Change):
        targets = await changes_store.delivery_targets(conn, message_id=item.message_id)
        return [
            _Destination(
                t["peer_id"],
                t["endpoint"],
                t["sender_did"],
                t["recipient"],
                author=t["author"] if t["author"] != t["sender_did"] else None,
            )
            for t in targets
        ]
    sender = item.message.sender_did
    assert sender is not None, "only a user's or an agent's message goes to peers"
    if item.to is not None:
        return [_Destination(item.to.id, item.to.endpoint, sender, item.to.did)]
    instances = await groups.group_destinations(
        conn,
        conversation_id=item.message.conversation_id,
        author_did=sender,
        conversation_type=item.conversation_type,
        peers=item.peers,
    )
    if instances is not None:
        return [
            _Destination(i.peer_id, i.endpoint, i.signer, i.recipients[0], recipients=i.recipients)
            for i in instances
        ]
    peers = item.peers
    if peers is None:
        peers = await federation_store.list_peer_destinations(
            conn, conversation_id=item.message.conversation_id
        )
    return [_Destination(p["peer_id"], p["endpoint"], sender, p["did"]) for p in peers]


@dataclass(frozen=True)
class _PostShared:
    """What a post's payload carries to every destination alike, looked up once per post."""

    group: ConferConversation | None
    file_part: dict[str, Any] | None
    file: ConferFile | None


async def _post_shared(
    conn: asyncpg.Connection, item: Item, first: _Destination
) -> _PostShared | None:
    """The group claim and the file part of a :class:`Post` (None for other items)."""
    if not isinstance(item, Post):
        return None
    message = item.message
    group = None
    if item.conversation_type in (None, "group"):  # a known direct one has no group to read
        group = await groups.outbound_claim(
            conn, conversation_id=message.conversation_id, sender_did=first.sender_did
        )
    carried = None
    if message.content_type == "file":
        attachment = await attachments_store.get_message_attachment(conn, message_id=message.id)
        carried = outbound_file(attachment) if attachment is not None else None
    return _PostShared(group, carried[0] if carried else None, carried[1] if carried else None)


async def _params(
    conn: asyncpg.Connection,
    item: Post | Change | Receipt,
    d: _Destination,
    shared: _PostShared | None,
) -> dict[str, Any]:
    if isinstance(item, Receipt):
        assert d.remote_id is not None
        return send_message_params(
            message_id=new_id(),  # a receipt is a message of its own; the read one is named
            context_id=item.conversation_id,
            text=RECEIPT_TEXT,
            confer=ConferMetadata(
                sender=d.sender_did, recipient=d.recipient, read=ConferChange(messageId=d.remote_id)
            ),
        )
    if isinstance(item, Change):
        change = ConferChange(messageId=item.message_id, version=item.version)
        edited = item.version is not None
        group = item.group
        if item.author is None and d.author is not None:
            # the original went signed by our instance for its author (a group's history):
            # its change goes the same way, as a group's home relays it
            group = ConferConversation(id=item.conversation_id, home=d.sender_did)
        return send_message_params(
            message_id=new_id(),  # a change is a message of its own; the original is named
            context_id=item.conversation_id,
            text=item.text,
            parts=message_parts(item.text, item.content_json) if edited else None,
            confer=ConferMetadata(
                sender=item.author or d.author or d.sender_did,
                recipient=d.recipient,
                conversation=group,
                edit=change if edited else None,
                delete=None if edited else change,
            ),
        )
    message = item.message
    context_id, in_reply_to = await _peer_terms(conn, item, d.recipient)
    assert shared is not None
    group, file = shared.group, shared.file
    if group is not None:
        # A group message names the home's group, never a context learned elsewhere.
        context_id = group.id
    parts = outbound_parts(message)
    if shared.file_part is not None:
        parts.append(shared.file_part)
    return send_message_params(
        message_id=message.id,
        context_id=context_id,
        text=message.content or "",
        parts=parts,
        confer=ConferMetadata(
            file=file,
            sender=message.sender_did,
            recipient=d.recipient,
            recipients=list(d.recipients) or None,
            createdAt=message.created_at.isoformat(),
            senderName=item.sender_name or None,
            inReplyTo=in_reply_to,
            taskId=item.task_id,
            decision=item.decision,
            conversation=group,
            **outbound_metadata(message),
        ),
    )


async def _peer_terms(
    conn: asyncpg.Connection, post: Post, peer_did: str | None
) -> tuple[str, str | None]:
    """``(contextId, inReplyTo)`` in the peer's own terms, so its answer threads: the context
    the peer used when it last wrote into this conversation (A2A §3.4: the context is the
    server's, reused by the client), else our conversation id; the id the peer gave the
    replied message when it sent it, else our own id of it."""
    message = post.message
    context_id = post.context_id
    if context_id is None and peer_did is not None:
        context_id = await tasks_store.peer_context_id(
            conn, conversation_id=message.conversation_id, caller=f"peer:{peer_did}"
        )
    in_reply_to = post.in_reply_to
    if in_reply_to is None and message.in_reply_to:
        if peer_did is not None:
            in_reply_to = await federation_store.get_remote_id(
                conn, message_id=message.in_reply_to, origin_did=peer_did
            )
        in_reply_to = in_reply_to or message.in_reply_to
    return context_id or message.conversation_id, in_reply_to
