"""Consent that travels: permission requests, the owner's decisions, and their answers.

When policy says *ask*, the peer's request waits in ``TASK_STATE_AUTH_REQUIRED`` with a pending
``permissions`` row; the owner gets a ``permission_request`` message and a
``permission.requested`` event. The decision (``allow_once | allow_always | deny`` with scope
``peer | peer_action | global``) resolves the task: allow delivers the held message and the
task completes; deny (or expiry) rejects it. Either way the agent answers the requester with a
signed message through the outbox, so the approval or refusal reaches the other instance.
Every step is audited.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from gateway.agents.peer_tasks import enqueue_for_peer
from gateway.agents.queue import TaskQueue
from gateway.clock import Clock
from gateway.db import Transaction, transaction
from gateway.errors import PermissionDecidedError, PermissionExpiredError, PermissionNotFoundError
from gateway.ids import new_id
from gateway.realtime.hub import EventHub
from gateway.services import a2a_content, key_consent, local_consent
from gateway.services.conversations import MESSAGE_CREATED
from gateway.services.outbound import Post, queue_for_peers
from gateway.services.permission_requests import open_request
from gateway.services.policy import Verdict
from gateway.services.settlement import is_allowed, settle_task
from gateway.services.tasks import Recipient, TaskEvents, record_update
from gateway.store import audit as audit_store
from gateway.store import conversations as conv_store
from gateway.store import federation as federation_store
from gateway.store import messages as messages_store
from gateway.store import peers as peers_store
from gateway.store import permissions as store
from gateway.store import tasks as tasks_store
from gateway.store import users as users_store
from gateway.store.tasks import TaskRow
from models import Message, PeerAgentRow, PermissionRow, User

PERMISSION_REQUESTED = "permission.requested"
PERMISSION_DECIDED = "permission.decided"


@dataclass
class Outcome:
    """What a decision changed: announced in its unit of work (:func:`announce_outcome`)."""

    owner_id: str
    permission: PermissionRow
    task: TaskRow | None = None
    messages: list[Message] = field(default_factory=list)
    also_notify: list[str] = field(default_factory=list)


def permission_json(permission: PermissionRow) -> dict[str, Any]:
    """The event payload of a permission."""
    return permission.model_dump(mode="json")


async def request_consent(
    conn: asyncpg.Connection,
    *,
    recipient: Recipient,
    peer: PeerAgentRow,
    verdict: Verdict,
    action: str,
    text: str,
    task_id: str,
    conversation_id: str,
    expires_at: datetime,
) -> tuple[PermissionRow, Message]:
    """Open a pending request (open until ``expires_at``) and post its ``permission_request``
    message, in ``conn``'s transaction; announce both with :func:`announce_request`."""
    scope = {
        "agent_id": recipient.agent_id,
        "agent_did": recipient.did,
        "task_id": task_id,
        "conversation_id": conversation_id,
        "text": text[:1000],
        "reason": verdict.reason,
    }
    return await open_request(
        conn,
        owner_id=recipient.user_id,
        peer_id=peer.id,
        requested_by=peer.id,
        action=action,
        level=verdict.level,
        scope=scope,
        expires_at=expires_at,
        notice_in=conversation_id,
        requester_name=peer.name or peer.did,
        requester_did=peer.did,
        text=text,
        refs={"task_id": task_id},
    )


async def announce_request(
    tx: Transaction, hub: EventHub, owner_id: str, permission: PermissionRow, msg: Message
) -> None:
    """Append the request's notice and ``permission.requested`` to the owner's stream in the
    unit of work that opened it (published to the devices after commit, in that order)."""
    await hub.append(tx, [owner_id], MESSAGE_CREATED, msg.model_dump(mode="json"))
    await hub.append(tx, [owner_id], PERMISSION_REQUESTED, permission_json(permission))


async def announce_outcome(
    tx: Transaction, hub: EventHub, task_events: TaskEvents, outcome: Outcome
) -> None:
    """Append a decision's messages and ``permission.decided`` to the streams in the unit of
    work that decided it; task subscribers hear of the settled task after commit."""
    users = list(dict.fromkeys([outcome.owner_id, *outcome.also_notify]))
    for message in outcome.messages:
        await hub.append(tx, users, MESSAGE_CREATED, message.model_dump(mode="json"))
    decided = permission_json(outcome.permission)
    await hub.append(tx, [outcome.owner_id], PERMISSION_DECIDED, decided)
    if outcome.task is not None:
        await record_update(tx, outcome.task, task_events)


async def list_permissions(
    pool: asyncpg.Pool, user: User, *, pending_only: bool, limit: int
) -> list[PermissionRow]:
    """The user's permission requests, newest first."""
    async with pool.acquire() as conn:
        return await store.list_permissions(
            conn, user_id=user.id, pending_only=pending_only, limit=limit
        )


@dataclass(frozen=True)
class Deciding:
    """What resolving a request touches besides the database: the streams (``hub``), the
    agent workers (``queue``, for the agent's answer to an allowed request), the A2A task
    subscribers (``task_events``) and the clock (expiry, timestamps)."""

    hub: EventHub
    queue: TaskQueue
    task_events: TaskEvents
    clock: Clock


async def decide(
    pool: asyncpg.Pool,
    deps: Deciding,
    user: User,
    permission_id: str,
    decision: str,
    scope: str | None,
) -> PermissionRow:
    """The owner's decision. Raises PermissionNotFoundError, PermissionDecidedError, and
    PermissionExpiredError (the request expired: it is resolved as denied)."""
    try:
        async with transaction(pool) as tx:
            outcome = await decide_in(tx, deps, user, permission_id, decision, scope)
    except PermissionExpiredError:
        await expire(pool, deps, permission_id)
        raise
    return outcome.permission


async def decide_in(
    tx: Transaction,
    deps: Deciding,
    user: User,
    permission_id: str,
    decision: str,
    scope: str | None,
) -> Outcome:
    """:func:`decide` inside the caller's unit of work (the MCP tool audits in the same one).

    The outcome is announced in ``tx`` (:func:`announce_outcome`). On PermissionExpiredError
    the caller rolls back and then calls :func:`expire`.
    """
    conn = tx.conn
    permission = await store.get_permission(conn, id=permission_id, user_id=user.id)
    if permission is None:
        raise PermissionNotFoundError(f"no permission request {permission_id}")
    if permission.decision != "pending":
        raise PermissionDecidedError(f"already decided: {permission.decision}")
    if permission.expires_at is not None and permission.expires_at <= deps.clock.now():
        raise PermissionExpiredError("the request expired before the decision; it was denied")
    if decision == "allow_always":
        scope = scope or "peer_action"
    return await _resolve(tx, deps, permission, decision, scope, user.id)


async def expire(pool: asyncpg.Pool, deps: Deciding, permission_id: str) -> bool:
    """Resolve one pending, expired request as denied; False when it was not pending."""
    async with transaction(pool) as tx:
        permission = await store.get_permission_by_id(tx.conn, id=permission_id)
        if permission is None or permission.decision != "pending":
            return False
        await _resolve(tx, deps, permission, "deny", None, None)
    return True


async def expire_due(pool: asyncpg.Pool, deps: Deciding) -> int:
    """Deny every pending request past its ``expires_at``; returns how many."""
    async with pool.acquire() as conn:
        due = await store.list_expired(conn, now=deps.clock.now(), limit=100)
    return sum([await expire(pool, deps, permission_id) for permission_id in due])


async def _resolve(
    tx: Transaction,
    deps: Deciding,
    permission: PermissionRow,
    decision: str,
    scope: str | None,
    decided_by: str | None,
) -> Outcome:
    """Record the decision, settle its task, audit it, and announce all of it in ``tx``."""
    conn = tx.conn
    now = deps.clock.now()
    decided = await store.decide_permission(
        conn,
        id=permission.id,
        decision=decision,
        decision_scope=scope,
        decided_by=decided_by,
        now=now,
    )
    if decided is None:
        raise PermissionDecidedError("already decided")
    outcome = Outcome(owner_id=permission.user_id, permission=decided)
    task = await tasks_store.get_task_by_permission(conn, permission_id=permission.id)
    peer = await peers_store.get_peer(conn, id=permission.peer_id or "")
    if task is not None and peer is not None and task.state == "TASK_STATE_AUTH_REQUIRED":
        outcome.task, outcome.messages = await _settle(tx, deps, decided, task, peer)
    elif task is not None and task.state == "TASK_STATE_AUTH_REQUIRED":
        if key_consent.is_local_request(decided):
            settled = await key_consent.settle(conn, decided, task, now)
            outcome.task, outcome.messages, requester = settled
            outcome.also_notify.append(requester)
    elif task is None and local_consent.is_held_message(decided):
        await local_consent.settle(tx, deps.hub, deps.queue, decided)
    await audit_store.insert_audit(
        conn,
        action="permission.decided",
        user_id=permission.user_id,
        details={
            "permission_id": permission.id,
            "decision": decision,
            "scope": scope,
            "expired": decided_by is None,
            "task_id": task.id if task else None,
        },
    )
    await announce_outcome(tx, deps.hub, deps.task_events, outcome)
    return outcome


async def _settle(
    tx: Transaction,
    deps: Deciding,
    permission: PermissionRow,
    task: TaskRow,
    peer: PeerAgentRow,
) -> tuple[TaskRow, list[Message]]:
    """Deliver or refuse the held request, and queue the agent's answer to the requester."""
    conn = tx.conn
    scope: dict[str, Any] = permission.scope_json  # type: ignore[assignment]
    conversation_id = scope["conversation_id"]
    messages: list[Message] = []
    delivered_id = None
    if is_allowed(permission):
        held = task.history_json[0]
        # a held file message's file is fetched now, like one delivered at once
        file = a2a_content.held_file(held, peer.did)
        fields, attachment_id = a2a_content.with_attachment(a2a_content.held_fields(held), file)
        delivered = await messages_store.insert_message(
            conn,
            id=new_id(),
            conversation_id=conversation_id,
            sender_type="peer_agent",
            sender_id=peer.id,
            sender_did=peer.did,
            **fields,
        )
        if attachment_id is not None and file is not None:
            await a2a_content.record_received_file(
                conn,
                attachment_id=attachment_id,
                message=delivered,
                user_id=permission.user_id,
                file=file,
                origin_did=peer.did,
            )
        await federation_store.insert_inbox(
            conn,
            origin_did=peer.did,
            remote_message_id=task.remote_message_id or delivered.id,
            message_id=delivered.id,
            recipient_did=await tasks_store.recipient_did(conn, task),
        )
        messages.append(delivered)
        delivered_id = delivered.id
        if scope.get("agent_id"):  # the agent answers the delivered request
            await enqueue_for_peer(
                tx,
                deps.hub,
                deps.queue,
                agent_id=scope["agent_id"],
                owner_id=permission.user_id,
                conversation_id=conversation_id,
                message_id=delivered.id,
                owner_present=permission.decided_by is not None,
            )
    settled, answer = await settle_task(
        conn, task, permission, delivered_id=delivered_id, now=deps.clock.now()
    )
    messages.append(await _answer(conn, scope, peer, answer, settled, permission.decision))
    await conv_store.touch_conversation(conn, conversation_id=conversation_id)
    return settled, messages


async def _answer(
    conn: asyncpg.Connection,
    scope: dict[str, Any],
    peer: PeerAgentRow,
    text: str,
    task: TaskRow,
    decision: str | None,
) -> Message:
    """The agent's signed answer to the requester: stored, and queued in the outbox."""
    agent = await users_store.get_agent(conn, id=scope["agent_id"])
    assert agent is not None
    message = await messages_store.insert_message(
        conn,
        id=new_id(),
        conversation_id=scope["conversation_id"],
        sender_type="own_agent",
        sender_id=agent.id,
        sender_did=agent.did,
        content=text,
    )
    # in the requester's terms: its context and its id of the request
    answer = Post(
        message,
        sender_name=agent.name,
        to=peer,
        context_id=task.context_id,
        in_reply_to=task.remote_message_id,
        task_id=task.id,
        decision=decision,
    )
    await queue_for_peers(conn, answer)
    return message
