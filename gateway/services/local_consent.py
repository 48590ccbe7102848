"""Consent for local users: another user's agent answers a local user only as its policy says.

A local user's message that addresses another user's agent — the agent of a
``direct_user_agent`` conversation, or an agent mentioned or answered in a group
(:func:`gateway.agents.worker.addressed_agents`) — meets the agent's verdict
(:func:`gateway.services.verdicts.agent_verdict`) with the sender's DID as the requester,
the default action ``ask`` and, when the owner saved the sender as a contact (a local user is
a peer like any other), that contact's trust level and overrides. The message itself is
always stored (the sender and the other members see it); the verdict decides the agent's
answer only:

- ``allow``: the agent's task is queued as for its owner.
- ``ask``: no task; a pending ``permissions`` row (``peer_id`` NULL, ``requested_by`` = the
  sender, ``scope_json.kind`` = :data:`KIND`) and a ``permission_request`` notice in the
  owner's own conversation with the agent, announced to the owner (``message.created``,
  ``permission.requested``). The owner decides through ``/v1/permissions`` like any request;
  allow queues the agent's task for the held message (:func:`settle`), deny or expiry posts a
  ``system_notice`` to the conversation instead — nothing the agent would have said exists.
- ``deny``: no task; the same ``system_notice`` tells the conversation at once. (In a direct
  conversation the REST send refuses earlier, with 403 ``agent_policy_denied``.)

``allow_always`` decisions are the API-key callers' (:mod:`gateway.services.key_consent`):
``peer``/``peer_action`` scopes are remembered for the requester, ``global`` for everyone.
The owner addressing their own agent never meets the policy. Notices are local: they are not
sent to peers.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from gateway.agents.queue import TaskQueue
from gateway.agents.runtime import MESSAGE_CREATED
from gateway.agents.worker import enqueue_agent
from gateway.db import Transaction
from gateway.ids import new_id
from gateway.realtime.hub import EventHub
from gateway.services import policy
from gateway.services.contacts import ContactSettings, contact_settings
from gateway.services.direct import api_conversation
from gateway.services.permission_requests import open_request
from gateway.services.settlement import is_allowed
from gateway.services.tasks import Recipient
from gateway.services.verdicts import agent_verdict
from gateway.store import conversations as conv_store
from gateway.store import messages as messages_store
from gateway.store import peers as peers_store
from gateway.store import permissions as permissions_store
from gateway.store import users as users_store
from models import Agent, Message, PermissionRow, User

KIND = "local_message"
"""``scope_json.kind`` of a request opened here."""
PERMISSION_REQUESTED = "permission.requested"
DEFAULT_TTL_SECONDS = 24 * 3600.0
"""How long a request waits when the caller does not say (``CONFER_PERMISSION_TTL_SECONDS``)."""
Verdicts = dict[str, policy.Verdict]
"""Verdicts already reached for this message, by agent id (evaluated once, audited once)."""


async def requester_settings(
    conn: asyncpg.Connection, *, owner_id: str, requester_did: str
) -> ContactSettings:
    """The owner's contact settings for a local requester: those of the contact saved under
    the requester's DID, defaults (trust ``unknown``, no overrides) when there is none."""
    peer = await peers_store.get_peer_by_did(conn, did=requester_did)
    if peer is None:
        return ContactSettings()
    return await contact_settings(conn, user_id=owner_id, peer_id=peer.id)


async def verdict(
    conn: asyncpg.Connection, agent: Agent, user: User, text: str, where: str
) -> policy.Verdict:
    """The agent's verdict for the local ``user`` asking with ``text`` (audited as
    ``policy.evaluated`` with ``caller = user:<id>`` and ``conversation`` = ``where``)."""
    return await agent_verdict(
        conn,
        agent_id=agent.id,
        owner_id=agent.user_id,
        settings=await requester_settings(conn, owner_id=agent.user_id, requester_did=user.did),
        requester_did=user.did,
        action=policy.DEFAULT_ACTION,
        text=text,
        find_grant=functools.partial(
            permissions_store.find_local_grant,
            conn,
            user_id=agent.user_id,
            requester_id=user.id,
            action=policy.DEFAULT_ACTION,
        ),
        audit={"caller": f"user:{user.id}", "conversation": where},
    )


async def admit(
    tx: Transaction,
    hub: EventHub,
    *,
    user: User,
    message: Message,
    agents: list[Agent],
    verdicts: Verdicts | None = None,
    ttl_seconds: float = DEFAULT_TTL_SECONDS,
) -> list[Agent]:
    """Of the ``agents`` ``user``'s stored ``message`` addresses, those that answer now.

    The others are held (``ask``: a request open for ``ttl_seconds``) or refused (``deny``: a
    notice), in ``tx``; ``verdicts`` reuses verdicts reached before the message was stored.
    """
    admitted = []
    for agent in agents:
        if agent.user_id == user.id:
            admitted.append(agent)
            continue
        result = (verdicts or {}).get(agent.id) or await verdict(
            tx.conn, agent, user, message.content or "", message.conversation_id
        )
        if result.effect == "allow":
            admitted.append(agent)
        elif result.effect == "ask":
            await _hold(tx, hub, user, message, agent, result, ttl_seconds)
        else:
            await _refuse(tx, hub, agent, message, decided="policy")
    return admitted


async def _hold(
    tx: Transaction,
    hub: EventHub,
    user: User,
    message: Message,
    agent: Agent,
    result: policy.Verdict,
    ttl_seconds: float,
) -> None:
    """Open the request and tell the owner, in their own conversation with the agent."""
    conn = tx.conn
    text = message.content or ""
    expires_at = datetime.now(UTC) + timedelta(seconds=ttl_seconds)
    notice_in = await api_conversation(conn, agent.user_id, Recipient(agent.user_id, agent.id, ""))
    scope = {
        "kind": KIND,
        "agent_id": agent.id,
        "agent_did": agent.did,
        "conversation_id": message.conversation_id,
        "message_id": message.id,
        "notice_conversation_id": notice_in,
        "text": text[:1000],
        "reason": result.reason,
        "requester_user_id": user.id,
        "requester_did": user.did,
    }
    permission, notice = await open_request(
        conn,
        owner_id=agent.user_id,
        peer_id=None,
        requested_by=user.id,
        action=policy.DEFAULT_ACTION,
        level=result.level,
        scope=scope,
        expires_at=expires_at,
        notice_in=notice_in,
        requester_name=user.display_name or user.username,
        requester_did=user.did,
        text=text,
        refs={"conversation_id": message.conversation_id, "message_id": message.id},
    )
    owner = [agent.user_id]
    await hub.append(
        tx, owner, MESSAGE_CREATED, notice.model_dump(mode="json"), conversation_id=notice_in
    )
    await hub.append(tx, owner, PERMISSION_REQUESTED, permission.model_dump(mode="json"))


async def _refuse(
    tx: Transaction, hub: EventHub, agent: Agent, message: Message, *, decided: str
) -> None:
    """Tell the conversation's local members that ``agent`` does not answer ``message``: a
    ``system_notice`` (``content_json.notice`` = ``agent_policy_denied``)."""
    conn = tx.conn
    who = agent.name or agent.did
    why = "its owner declined" if decided == "owner" else "its owner's policy refuses it"
    notice = await messages_store.insert_message(
        conn,
        id=new_id(),
        conversation_id=message.conversation_id,
        sender_type="system",
        sender_id=agent.id,
        sender_did=None,
        content_type="system_notice",
        content=f"{who} does not answer this message: {why}.",
        content_json={
            "notice": "agent_policy_denied",
            "agent_did": agent.did,
            "message_id": message.id,
            "decided": decided,
        },
        in_reply_to=message.id,
    )
    participants = await conv_store.list_participants(conn, conversation_id=message.conversation_id)
    members = [p["user_id"] for p in participants if p["user_id"]]
    await hub.append(
        tx,
        members,
        MESSAGE_CREATED,
        notice.model_dump(mode="json"),
        conversation_id=message.conversation_id,
    )


def is_held_message(permission: PermissionRow) -> bool:
    """True for a request opened by :func:`admit`."""
    scope = permission.scope_json
    return isinstance(scope, dict) and scope.get("kind") == KIND


async def settle(
    tx: Transaction, hub: EventHub, queue: TaskQueue, permission: PermissionRow
) -> str | None:
    """Carry out the decision on a held message, in ``tx``: allowed, the agent's task is
    queued (its answer arrives like any); denied or expired, the conversation gets the
    refusal notice. Returns the requester's user id (None when the held message or the agent
    is gone, and nothing happens)."""
    conn = tx.conn
    scope: dict[str, Any] = permission.scope_json  # type: ignore[assignment]
    held = await messages_store.get_message(conn, id=scope["message_id"])
    agent = await users_store.get_agent(conn, id=scope["agent_id"])
    if held is None or agent is None:
        return None
    if is_allowed(permission):
        await enqueue_agent(
            tx, queue, agent_id=agent.id, conversation_id=held.conversation_id, message_id=held.id
        )
    else:
        decided = "owner" if permission.decided_by is not None else "expired"
        await _refuse(tx, hub, agent, held, decided=decided)
    return str(scope["requester_user_id"])
