"""Inbound A2A messages from verified callers: store, de-duplicate, open a task, notify.

A2A 1.0 ``SendMessage`` (JSON-RPC binding) carries one Message. Confer stores it in the
recipient's direct conversation with the caller — as ``sender_type = 'peer_agent'`` for a
signed peer, as the key owner's ``user`` message (``via = 'api'``) for a stock client — in one
transaction with the inbox de-duplication row, the contact, the A2A task and the audit row.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import asyncpg

from a2a.confer import ConferMetadata
from a2a.protocol import JSONRPCError, SendMessageParams, agent_text_message
from gateway.agents.peer_tasks import WAITING, enqueue_for_peer
from gateway.agents.queue import TaskQueue
from gateway.clock import Clock
from gateway.db import SharedTransaction, Transaction, transaction
from gateway.errors import (
    ApiKeyScopeError,
    ConferError,
    FederationAuthError,
    NotGroupMemberError,
    PayloadTooLargeError,
    PeerBlockedError,
    RecipientNotFoundError,
)
from gateway.ids import is_ulid, new_id
from gateway.realtime.hub import EventHub
from gateway.services import (
    a2a_content,
    consent,
    group_order,
    groups,
    key_consent,
    message_requests,
    outbound,
    policy,
)
from gateway.services.callers import A2ACaller
from gateway.services.contacts import settings_of
from gateway.services.conversations import MESSAGE_CREATED
from gateway.services.direct import api_conversation, peer_conversation
from gateway.services.identity import Identity
from gateway.services.public_profiles import display_name
from gateway.services.tasks import Recipient
from gateway.services.verdicts import agent_verdict
from gateway.store import attachments as attachments_store
from gateway.store import audit as audit_store
from gateway.store import contacts as contacts_store
from gateway.store import conversations as conv_store
from gateway.store import federation as federation_store
from gateway.store import groups as groups_store
from gateway.store import messages as messages_store
from gateway.store import peers as peers_store
from gateway.store import permissions as permissions_store
from gateway.store import tasks as tasks_store
from gateway.store import users as users_store
from gateway.store.tasks import TaskRow
from models import Message, PeerAgentRow, PeerContactRow, PermissionRow
from models.api import MessageCreate


async def resolve_recipient(conn: asyncpg.Connection, kind: str, name: str) -> Recipient:
    """The local user (``kind == "users"``) or agent behind an endpoint.

    Raises RecipientNotFoundError.
    """
    found: Recipient | None = None
    if kind == "users":
        user = await users_store.get_user_by_username(conn, username=name)
        found = Recipient(user.id, None, user.did) if user else None
    else:
        agent = await users_store.get_agent(conn, id=name)
        found = Recipient(agent.user_id, agent.id, agent.did) if agent else None
    # A deleted or disabled account receives nothing, through its agents neither.
    if found is not None and await users_store.account_active(conn, user_id=found.user_id):
        return found
    raise RecipientNotFoundError(f"no {kind[:-1]} {name!r} here")


async def recipient_for_did(conn: asyncpg.Connection, identity: Identity, did: str) -> Recipient:
    """The local user or agent with DID ``did``. Raises RecipientNotFoundError."""
    subject = identity.local_subject(did)
    if subject is None:
        raise RecipientNotFoundError(f"{did!r} is not a user or agent of this instance")
    return await resolve_recipient(conn, *subject)


async def admit(conn: asyncpg.Connection, caller: A2ACaller, r: Recipient) -> None:
    """The door: may ``caller`` talk to ``r`` at all? Nothing is written when it may not.

    A peer the recipient's owner marked ``blocked`` gets PeerBlockedError (403), and so does
    every user and agent of an instance whose instance DID (``did:web:<host>``) the owner
    blocked — a group's home among them; an API key outside its scope gets
    ApiKeyScopeError (403).
    """
    if caller.peer is not None:
        peer = caller.peer.peer
        parts = peer.did.split(":")
        # a user's or agent's instance (did:web:<host>) may be blocked as a whole
        instance_did = ":".join(parts[:3]) if len(parts) > 3 and parts[1] == "web" else None
        if instance_did is None:
            own = await contacts_store.get_contact_for_peer(
                conn, user_id=r.user_id, peer_id=peer.id
            )
            instance = None
        else:
            own, instance = await contacts_store.get_contacts_for_peer_and_instance(
                conn, user_id=r.user_id, peer_id=peer.id, instance_did=instance_did
            )
        if settings_of(own).trust_level == "blocked":
            raise PeerBlockedError(f"{r.did} does not accept requests from {caller.origin}")
        if instance is not None and settings_of(instance).trust_level == "blocked":
            raise PeerBlockedError(f"{r.did} does not accept requests from {instance_did}")
    await check_api_key_scope(conn, caller, r)


async def check_api_key_scope(conn: asyncpg.Connection, caller: A2ACaller, r: Recipient) -> None:
    """API keys reach their owner's agents and public agents. Raises ApiKeyScopeError."""
    if caller.api_key is None:
        return
    agent = await users_store.get_agent(conn, id=r.agent_id) if r.agent_id else None
    if agent is None or not (agent.is_public or agent.user_id == caller.api_key.user_id):
        raise ApiKeyScopeError("this API key may call its owner's agents and public agents")


def signer_did(caller: A2ACaller) -> str:
    """The DID whose key signed a peer's request (its ``keyid`` without the fragment): the
    peer itself, or the group's home that relays the peer's post (:func:`relayed_author`)."""
    assert caller.peer is not None
    return caller.peer.keyid.split("#", 1)[0]


def relayed_author(caller: A2ACaller, params: SendMessageParams) -> str | None:
    """The author's DID when the message is a group post its home relays, else None.

    The trust rule (docs/federation.md, "Relaying"): a message signed by a group's home
    instance itself (its instance DID is ``metadata.confer.conversation.home``) may carry
    another ``sender`` — a member of that group whose own signed message the home verified,
    stored and ordered. The receiver stores it as the author's, in the group's replica only,
    and only when the member list the home announced names the author
    (:func:`gateway.services.groups.group_conversation`); the author's edits and deletes
    of it are relayed the same way (they find the copy by the author's inbox row). Membership
    messages are never relayed, receipts have a rule of their own
    (:func:`gateway.services.group_receipts.relayed_by_home`), and no relay speaks for the
    receiver's own users (:func:`gateway.services.a2a_rpc`).
    """
    confer = ConferMetadata.of(params.message.metadata)
    claim = confer.conversation
    if caller.peer is None or claim is None or confer.sender is None:
        return None
    signer = caller.peer.peer.did
    if signer != claim.home or confer.sender == signer or signer.count(":") != 2:
        return None  # only an instance DID (did:web:<host>) homes groups
    if confer.read or confer.membership:
        return None
    return confer.sender


async def check_sender(
    caller: A2ACaller, params: SendMessageParams, *, pool: asyncpg.Pool, ip: str | None
) -> None:
    """A signed message may only claim the DID that signed it. Raises FederationAuthError.

    A group's home relaying a member's post (:func:`relayed_author`) may name the member.
    A forged sender is a peer's lie, not a malformed request: it leaves the same
    ``federation.inbound.rejected`` audit row as a signature that fails, naming the signing
    ``keyid`` and the ``claimed`` DID.
    """
    claimed = ConferMetadata.of(params.message.metadata).sender
    if caller.peer is None or claimed is None or claimed == caller.peer.peer.did:
        return
    if relayed_author(caller, params) is not None:
        return  # the group's home vouches for the author (docs/federation.md, "Relaying")
    error = FederationAuthError(
        "signature_sender_mismatch", f"signed by {caller.peer.keyid} but claims to be {claimed}"
    )
    await audit_claim_refused(pool, caller, claimed, error, ip)
    raise error


async def audit_claim_refused(
    pool: asyncpg.Pool, caller: A2ACaller, claimed: str, error: ConferError, ip: str | None
) -> None:
    """Leave the ``federation.inbound.rejected`` audit row of a signed message refused for the
    DID it claims (a forged sender, a relayed author we do not federate with): the ``code``,
    ``detail``, signing ``keyid`` and ``claimed`` DID."""
    assert caller.peer is not None
    async with pool.acquire() as conn:
        await audit_store.insert_audit(
            conn,
            action="federation.inbound.rejected",
            details={
                "code": error.wire_code,
                "detail": error.detail[:500],
                "keyid": caller.peer.keyid[:512],
                "claimed": claimed[:512],
            },
            ip_address=ip,
        )


async def receive_message(
    caller: A2ACaller,
    recipient: Recipient,
    params: SendMessageParams,
    ip: str | None,
    *,
    max_chars: int,
    max_file_bytes: int,
    pool: asyncpg.Pool,
    hub: EventHub,
    queue: TaskQueue,
    clock: Clock,
    permission_ttl_seconds: float,
    message_requests_default: bool = True,
    shared: SharedTransaction | None = None,
) -> tuple[TaskRow, bool]:
    """Store the caller's message for ``recipient`` and open its task, as policy decides.

    A signed peer writing to an agent meets the agent's policy (:mod:`gateway.services.policy`):
    allow stores and delivers (``TASK_STATE_COMPLETED``; ``TASK_STATE_AUTH_REQUIRED`` with
    ``metadata.confer.heldUntilOwnerReturns`` while the agent's answer waits for its offline
    owner, see :mod:`gateway.agents.peer_tasks`), deny stores nothing
    (``TASK_STATE_REJECTED``), ask holds the message for the owner's consent
    (``TASK_STATE_AUTH_REQUIRED``). Returns ``(task, created)``; idempotent on (caller,
    ``messageId``): a retry returns the first task and stores nothing new.

    One unit of work: the message, its inbox row, the task, the audit row, the agent's task
    (announced on ``queue``) and the owner's stream events (``hub``) commit together, so a
    crash after the commit loses no event a device could miss; a consent request expires
    ``permission_ttl_seconds`` after ``clock.now()``.

    The content is the local post's (:func:`checked_content`): every content type, stored as
    sent; content a local client could not post raises InvalidParamsError (-32602, audited)
    before anything is written, and a file part declared over ``max_file_bytes``
    PayloadTooLargeError (``payload_too_large``, audited), as a local upload over the cap. A
    peer's file part gives the copy its own attachment, pending until the fetch worker brings
    the bytes (:mod:`gateway.workers.attachment_fetch`).

    With ``shared`` (the calls of one JSON-RPC batch), that unit of work is a savepoint of the
    batch's transaction, shared with the caller's next messages into the same conversation
    (:class:`gateway.db.SharedTransaction`, keyed by caller, recipient and ``contextId``).
    """
    content, file = await checked_content(
        pool, caller, recipient, params, ip, max_chars=max_chars, max_file_bytes=max_file_bytes
    )
    text = a2a_content.policy_text(content)
    remote_id = params.message.messageId
    now = clock.now()

    async def unit(tx: Transaction) -> tuple[TaskRow, bool]:
        conn = tx.conn
        await conv_store.lock_direct_pair(conn, f"inbox:{caller.origin}:{remote_id}")
        existing = await _retried(conn, caller, recipient, remote_id)
        if existing is not None:
            return existing, False
        verdict = await _verdict(tx, caller, recipient, params, text)
        if verdict is None or verdict.effect == "allow":
            message, notify, fresh = await _store_message(
                tx, caller, recipient, params, content, file
            )
            claim = ConferMetadata.of(params.message.metadata).conversation
            if fresh:
                message = await group_order.place_received(
                    conn, recipient.did, claim, remote_id, message
                )
                await _relay(conn, recipient, params, message)
            held = working = False
            if recipient.agent_id is not None:
                # the agent answers a peer with a message of its own, an API-key caller in the
                # task's result (the runtime completes the task with the answer)
                own = caller.api_key is not None and caller.api_key.user_id == recipient.user_id
                _, agent_status = await enqueue_for_peer(
                    tx,
                    hub,
                    queue,
                    agent_id=recipient.agent_id,
                    owner_id=recipient.user_id,
                    conversation_id=message.conversation_id,
                    message_id=message.id,
                    owner_present=own,
                )
                held = agent_status == WAITING
                working = caller.api_key is not None and not held
            task = await _open_task(
                conn,
                now,
                caller,
                recipient,
                params,
                message,
                None,
                held=held,
                working=working,
                position=group_order.position_for_answer(recipient.did, claim, message),
                inbox=(caller.origin, recipient.did),  # the de-duplication row, written with it
            )
            if caller.peer is not None and recipient.agent_id is None:
                notify = await _unless_requested(
                    tx, hub, recipient, caller.peer.peer, message, notify, message_requests_default
                )
            await hub.append(tx, notify, MESSAGE_CREATED, message.model_dump(mode="json"))
        elif verdict.effect == "deny":
            task = await _open_task(conn, now, caller, recipient, params, None, None)
        else:
            expires_at = now + timedelta(seconds=permission_ttl_seconds)
            task, (permission, notice) = await _hold_for_consent(
                conn, now, expires_at, caller, recipient, params, text, verdict
            )
            await consent.announce_request(tx, hub, recipient.user_id, permission, notice)
        _audit_inbound(tx, caller, recipient, task, verdict, ip)
        return task, True

    if shared is not None:
        key = "\n".join((caller.origin, recipient.did, params.message.contextId or ""))
        return await shared.run(key, unit)
    async with transaction(pool) as tx:
        return await unit(tx)


async def _unless_requested(
    tx: Transaction,
    hub: EventHub,
    recipient: Recipient,
    peer: PeerAgentRow,
    message: Message,
    notify: list[str],
    default: bool,
) -> list[str]:
    """``notify`` without the recipient when the message is held as a message request
    (:mod:`gateway.services.message_requests`)."""
    # The answer holds for the run's later messages of the same sender (a shared
    # transaction): they find the request this one opened, or the same reasons for none.
    held = await tx.remembered(
        ("message request", message.conversation_id, recipient.user_id, peer.did),
        lambda: message_requests.held_for(
            tx,
            hub,
            conversation_id=message.conversation_id,
            user_id=recipient.user_id,
            sender_did=peer.did,
            local_sender=False,
            message=message.model_dump(mode="json"),
            default=default,
        ),
    )
    return [u for u in notify if u != recipient.user_id] if held else notify


async def checked_content(
    pool: asyncpg.Pool,
    caller: A2ACaller,
    recipient: Recipient,
    params: SendMessageParams,
    ip: str | None,
    *,
    max_chars: int,
    max_file_bytes: int,
) -> tuple[MessageCreate, a2a_content.IncomingFile | None]:
    """The message's content as a local post (:func:`a2a_content.received_content`, text of
    at most ``max_chars``), and a signed peer's file part (:func:`a2a_content.received_file`,
    declared at most ``max_file_bytes``).

    A refusal (InvalidParamsError -32602, ContentTypeNotSupportedError -32005,
    PayloadTooLargeError ``payload_too_large``) leaves a ``federation.inbound.rejected`` audit
    row with the reason, then propagates.
    """
    via = "api" if caller.peer is None else None
    try:
        content = a2a_content.received_content(params.message, max_chars, via=via)
        if caller.peer is None or content.content_type != "file":
            return content, None
        # the file is where the signer serves it: the author's instance, or for a post the
        # group's home relays (its instance DID signs), the home's copy
        return content, a2a_content.received_file(
            params.message, signer_did(caller), max_file_bytes
        )
    except (JSONRPCError, PayloadTooLargeError) as exc:
        async with pool.acquire() as conn:
            await audit_store.insert_audit(
                conn,
                action="federation.inbound.rejected",
                user_id=recipient.user_id,
                details={
                    "method": "SendMessage",
                    "caller": caller.ref,
                    "remote_message_id": params.message.messageId,
                    "code": exc.code if isinstance(exc, JSONRPCError) else exc.wire_code,
                    "detail": (exc.message if isinstance(exc, JSONRPCError) else exc.detail)[:500],
                },
                ip_address=ip,
            )
        raise


async def _retried(
    conn: asyncpg.Connection, caller: A2ACaller, recipient: Recipient, remote_id: str
) -> TaskRow | None:
    """The task of an earlier delivery of ``remote_id`` to this recipient (a retry), or None.
    The same id to another recipient is another delivery (a group's copies)."""
    return await tasks_store.get_retried_task(
        conn,
        caller=caller.ref,
        origin_did=caller.origin,
        remote_message_id=remote_id,
        user_id=recipient.user_id,
        agent_id=recipient.agent_id,
        recipient_did=recipient.did,
    )


def requested_action(params: SendMessageParams) -> str:
    """The policy action a message asks for: ``metadata.confer.action``, default ``ask``."""
    action = ConferMetadata.of(params.message.metadata).action
    return action if action in policy.LEVELS else policy.DEFAULT_ACTION


async def _verdict(
    tx: Transaction,
    caller: A2ACaller,
    recipient: Recipient,
    params: SendMessageParams,
    text: str,
) -> policy.Verdict | None:
    """The agent's policy verdict for a signed peer, or for an API-key caller reaching another
    user's agent (:mod:`gateway.services.key_consent`); None where no agent policy applies."""
    conn = tx.conn
    if key_consent.applies(caller, recipient):
        return await key_consent.verdict(conn, caller, recipient, requested_action(params), text)
    if caller.peer is None or recipient.agent_id is None:
        return None
    peer = caller.peer.peer
    action = requested_action(params)
    return await agent_verdict(
        conn,
        agent_id=recipient.agent_id,
        owner_id=recipient.user_id,
        settings=settings_of(await _contact(tx, recipient, peer)),
        requester_did=peer.did,
        action=action,
        text=text,
        find_grant=lambda: permissions_store.find_grant(
            conn, user_id=recipient.user_id, peer_id=peer.id, action=action
        ),
    )


async def _hold_for_consent(
    conn: asyncpg.Connection,
    now: datetime,
    expires_at: datetime,
    caller: A2ACaller,
    recipient: Recipient,
    params: SendMessageParams,
    text: str,
    verdict: policy.Verdict,
) -> tuple[TaskRow, tuple[PermissionRow, Message]]:
    if caller.peer is None:
        return await _hold_for_key_consent(
            conn, now, expires_at, caller, recipient, params, text, verdict
        )
    peer = caller.peer.peer
    conversation_id = await _peer_conversation(conn, recipient, peer, params)
    await peers_store.upsert_contact(
        conn, user_id=recipient.user_id, peer_id=peer.id, alias=None, added_via="inbound"
    )
    task_id = new_id()
    permission, message = await consent.request_consent(
        conn,
        recipient=recipient,
        peer=peer,
        verdict=verdict,
        action=requested_action(params),
        text=text,
        task_id=task_id,
        conversation_id=conversation_id,
        expires_at=expires_at,
    )
    task = await _open_task(
        conn, now, caller, recipient, params, None, permission.id, task_id=task_id
    )
    return task, (permission, message)


async def _hold_for_key_consent(
    conn: asyncpg.Connection,
    now: datetime,
    expires_at: datetime,
    caller: A2ACaller,
    recipient: Recipient,
    params: SendMessageParams,
    text: str,
    verdict: policy.Verdict,
) -> tuple[TaskRow, tuple[PermissionRow, Message]]:
    task_id = new_id()
    permission, message = await key_consent.request_consent(
        conn,
        caller=caller,
        recipient=recipient,
        result=verdict,
        action=requested_action(params),
        text=text,
        task_id=task_id,
        expires_at=expires_at,
    )
    task = await _open_task(
        conn, now, caller, recipient, params, None, permission.id, task_id=task_id
    )
    return task, (permission, message)


def _audit_inbound(
    tx: Transaction,
    caller: A2ACaller,
    recipient: Recipient,
    task: TaskRow,
    verdict: policy.Verdict | None,
    ip: str | None,
) -> None:
    """The ``federation.inbound`` audit row of ``task``, written just before ``tx`` commits
    together with those of the run's other messages to the same user from the same address:
    one statement for a batch's run rather than one a message (a unit that rolls back to its
    savepoint takes its row with it, :meth:`gateway.db.Transaction.savepoint`)."""
    key = (_INBOUND_AUDITS, recipient.user_id, ip)
    pending: tuple[dict[str, Any], ...] | None = tx.recall(key)
    if pending is None:

        async def write() -> None:
            await audit_store.insert_audits(
                tx.conn,
                action="federation.inbound",
                details=list(tx.recall(key)),
                user_id=recipient.user_id,
                ip_address=ip,
            )

        tx.call_before_commit(write)
    details = {
        "method": "SendMessage",
        "caller": caller.ref,
        "keyid": caller.peer.keyid if caller.peer else None,
        "remote_message_id": task.remote_message_id,
        "message_id": task.message_id,
        "task_id": task.id,
        "state": task.state,
        "policy": verdict.effect if verdict else None,
    }
    tx.remember(key, (*(pending or ()), details))


_INBOUND_AUDITS = "federation.inbound audit rows"

_STATUS = {
    "TASK_STATE_COMPLETED": "Delivered.",
    "TASK_STATE_WORKING": "The agent is answering.",
    "TASK_STATE_REJECTED": "Refused by the recipient's policy.",
    "TASK_STATE_AUTH_REQUIRED": "Waiting for the owner's consent.",
}
_HELD_FOR_OWNER = "Delivered; the agent answers when its owner is back online."


async def _open_task(
    conn: asyncpg.Connection,
    now: datetime,
    caller: A2ACaller,
    recipient: Recipient,
    params: SendMessageParams,
    message: Message | None,
    permission_id: str | None,
    *,
    task_id: str | None = None,
    held: bool = False,
    working: bool = False,
    position: str | None = None,
    inbox: tuple[str, str] | None = None,
) -> TaskRow:
    task_id = task_id or new_id()
    if message is not None:
        task_state = "TASK_STATE_AUTH_REQUIRED" if held else "TASK_STATE_COMPLETED"
        task_state = "TASK_STATE_WORKING" if working else task_state
    else:
        task_state = "TASK_STATE_AUTH_REQUIRED" if permission_id else "TASK_STATE_REJECTED"
    context_id = params.message.contextId or (message.conversation_id if message else task_id)
    incoming = params.message.model_dump(exclude_none=True)
    incoming.update(taskId=task_id, contextId=context_id)
    data: dict[str, Any] = {"status": task_state.removeprefix("TASK_STATE_").lower()}
    text = _STATUS[task_state]
    if message is not None:
        data["messageId"] = message.id
    if held:
        data["status"] = "held_for_owner"
        text = _HELD_FOR_OWNER
    status = agent_text_message(
        text, message_id=new_id(), context_id=context_id, task_id=task_id, data=data
    )
    return await tasks_store.insert_task(
        conn,
        id=task_id,
        user_id=recipient.user_id,
        agent_id=recipient.agent_id,
        caller=caller.ref,
        context_id=context_id,
        state=task_state,
        message_id=message.id if message else None,
        history=[incoming],
        status_message=status,
        permission_id=permission_id,
        remote_message_id=params.message.messageId,
        metadata=ConferMetadata(
            heldUntilOwnerReturns=True if held else None, position=position
        ).metadata()
        if held or position
        else None,
        now=now,
        inbox=inbox,
    )


async def _store_message(
    tx: Transaction,
    caller: A2ACaller,
    recipient: Recipient,
    params: SendMessageParams,
    content: MessageCreate,
    file: a2a_content.IncomingFile | None = None,
) -> tuple[Message, list[str], bool]:
    """Insert the message (``content`` as the sender stored it) in the right conversation
    (the ``contextId``'s when it names one of ours with this peer, see
    :func:`peer_conversation`), as a reply when ``metadata.confer.inReplyTo`` names a message
    of it; returns it, the local users to notify and whether it is new here (False: a group's
    copy stored for another local member before). With ``file``, the copy's
    ``content_json.attachment_id`` names our own pending attachment row for it."""
    conn = tx.conn
    in_reply_to = None
    if caller.peer is not None:
        peer = caller.peer.peer
        conversation_id = await tx.remembered(
            ("conversation", recipient.did, peer.id, params.message.contextId),
            lambda: _peer_conversation(conn, recipient, peer, params),
        )
        in_reply_to = await _local_reply_target(
            conn, params, peer.did, recipient.did, conversation_id
        )
        sender: dict[str, Any] = {
            "sender_type": "peer_agent",
            "sender_id": peer.id,
            "sender_did": peer.did,
        }
        notify = await _known_sender(tx, caller, recipient, params)
    else:
        assert caller.api_key is not None and recipient.agent_id is not None
        owner = await users_store.get_user(conn, id=caller.api_key.user_id)
        assert owner is not None
        conversation_id = await api_conversation(conn, owner.id, recipient)
        sender = {"sender_type": "user", "sender_id": owner.id, "sender_did": owner.did}
        notify = [owner.id, recipient.user_id]
    if caller.peer is not None and ConferMetadata.of(params.message.metadata).conversation:
        # A group message for a second local member: the group holds it once. (A message
        # that claims no group is never stored in one, see _peer_conversation.)
        copy = await groups_store.find_group_copy(
            conn,
            origin_did=caller.origin,
            remote_message_id=params.message.messageId,
            conversation_id=conversation_id,
        )
        stored = await messages_store.get_message(conn, id=copy) if copy else None
        if stored is not None:
            return stored, notify, False
    fields, attachment_id = a2a_content.with_attachment(
        a2a_content.stored_fields(content), file if caller.peer is not None else None
    )
    message = await messages_store.insert_message(
        conn,
        id=new_id(),
        conversation_id=conversation_id,
        in_reply_to=in_reply_to,
        touch=True,
        **fields,
        **sender,
    )
    if attachment_id is not None and file is not None and caller.peer is not None:
        await a2a_content.record_received_file(
            conn,
            attachment_id=attachment_id,
            message=message,
            user_id=recipient.user_id,
            file=file,
            origin_did=signer_did(caller),
        )
    return message, notify, True


def _contact_key(recipient: Recipient, peer: PeerAgentRow) -> tuple[str, str, str]:
    return ("contact", recipient.user_id, peer.id)


async def _contact(
    tx: Transaction, recipient: Recipient, peer: PeerAgentRow
) -> PeerContactRow | None:
    """The recipient's contact entry for ``peer``, read once per transaction: the policy
    verdict and the first-contact check of the same message (and the units of a shared run)
    need the same row."""
    return await tx.remembered(
        _contact_key(recipient, peer),
        lambda: contacts_store.get_contact_for_peer(
            tx.conn, user_id=recipient.user_id, peer_id=peer.id
        ),
    )


async def _known_sender(
    tx: Transaction, caller: A2ACaller, recipient: Recipient, params: SendMessageParams
) -> list[str]:
    """Make the signed peer the recipient's contact (first contact) and note the display name
    it gives itself; the recipient to notify, or nobody when the contact is muted. Read and
    written once per transaction (a shared run's later messages reuse it)."""
    assert caller.peer is not None
    peer = caller.peer.peer
    contact = await _contact(tx, recipient, peer)
    if contact is None:  # first contact; an existing one has nothing to change
        contact = await peers_store.upsert_contact(
            tx.conn, user_id=recipient.user_id, peer_id=peer.id, alias=None, added_via="inbound"
        )
        tx.remember(_contact_key(recipient, peer), contact)
    name = display_name(ConferMetadata.of(params.message.metadata).senderName)
    if name is not None and caller.ref == f"peer:{peer.did}":  # its own, signed claim
        if tx.recall(("peer_name", peer.id)) != name:
            await peers_store.set_peer_name(tx.conn, id=peer.id, name=name)
            tx.remember(("peer_name", peer.id), name)
    return [] if contact.muted else [recipient.user_id]  # muted: stored, not notified


async def _relay(
    conn: asyncpg.Connection, recipient: Recipient, params: SendMessageParams, message: Message
) -> None:
    """A remote member's new post in a group homed here: queue it for every other member
    instance, once per instance, relayed signed by our instance (the author's instance
    already has it)."""
    confer = ConferMetadata.of(params.message.metadata)
    claim = confer.conversation
    if claim is None or claim.home != groups.instance_did(recipient.did):
        return
    if message.content_type == "file":
        attachment = await attachments_store.get_message_attachment(conn, message_id=message.id)
        if attachment is not None and attachment.storage_url is None:
            return  # relayed once its bytes are here (relay_fetched): the relay carries them
    await outbound.queue_for_peers(conn, outbound.Post(message, sender_name=confer.senderName))


async def relay_fetched(conn: asyncpg.Connection, *, message_id: str) -> bool:
    """The file of a remote member's post in a group homed here is fetched (or failed for
    good): queue the post's relay to the other member instances now (:func:`_relay` held it
    back, since a relay of a file it does not hold would carry no file). True when queued;
    nothing for any other message (a direct one, a replica's, a local author's)."""
    message = await messages_store.get_message(conn, id=message_id)
    if message is None or message.sender_type != "peer_agent" or message.sender_id is None:
        return False
    kind = await groups_store.get_conversation_kind(conn, conversation_id=message.conversation_id)
    if kind is None or kind[0] != "group":
        return False
    if await groups_store.get_replica(conn, conversation_id=message.conversation_id) is not None:
        return False
    peer = await peers_store.get_peer(conn, id=message.sender_id)
    name = peer.name if peer is not None else None
    await outbound.queue_for_peers(conn, outbound.Post(message, sender_name=name))
    return True


async def _peer_conversation(
    conn: asyncpg.Connection, recipient: Recipient, peer: PeerAgentRow, params: SendMessageParams
) -> str:
    """The conversation a signed peer's message goes into: the group it claims
    (``metadata.confer.conversation``, :func:`groups.group_conversation`), else the direct
    conversation (:func:`peer_conversation`). A claim that is malformed, or whose
    ``contextId`` is not the group's, raises NotGroupMemberError: a message meant for a
    group never falls back to a direct conversation."""
    confer = ConferMetadata.of(params.message.metadata)
    claim = confer.conversation
    if "conversation" in confer.malformed or (
        claim is not None and params.message.contextId != claim.id
    ):
        raise NotGroupMemberError("metadata.confer.conversation does not name this context")
    if claim is not None:
        return await groups.group_conversation(conn, recipient, peer, claim)
    return await peer_conversation(conn, recipient, peer.id, params.message.contextId)


async def _local_reply_target(
    conn: asyncpg.Connection,
    params: SendMessageParams,
    peer_did: str,
    recipient_did: str,
    conversation_id: str,
) -> str | None:
    """Our id of the message ``metadata.confer.inReplyTo`` answers, when it is in the
    conversation: one of ours (the peer names it by our id) or one the peer sent us earlier
    (named by its own id, found in the inbox); else None (the reply stands alone)."""
    named = ConferMetadata.of(params.message.metadata).inReplyTo
    if named is None or not is_ulid(named):
        return None
    for candidate in (
        named,
        await federation_store.get_inbox(
            conn, origin_did=peer_did, remote_message_id=named, recipient_did=recipient_did
        ),
    ):
        if candidate and await messages_store.message_in_conversation(
            conn, message_id=candidate, conversation_id=conversation_id
        ):
            return candidate
    return None
