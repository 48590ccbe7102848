"""Consent for stock A2A clients: API-key callers meet the target agent's policy too.

An API key acts for the user who issued it, so calling *another* user's public agent is that
user asking. The agent's ``PolicyConfig`` is evaluated with the issuing user's DID as the
peer identity (rule ``peer`` globs match it; there is no contact, so trust is ``unknown`` and
no overrides apply). *ask* holds the message in a pending ``permissions`` row with
``peer_id`` NULL and ``requested_by`` = the issuing user; the owner decides through the same
``/v1/permissions`` API. ``allow_always`` with scope ``peer``/``peer_action`` is remembered
for that user (``requested_by``), ``global`` for everyone. Calling one's own agent never asks.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from gateway.ids import new_id
from gateway.services import a2a_content, policy
from gateway.services.callers import A2ACaller
from gateway.services.contacts import ContactSettings
from gateway.services.direct import api_conversation
from gateway.services.permission_requests import open_request
from gateway.services.settlement import is_allowed, settle_task
from gateway.services.tasks import Recipient
from gateway.services.verdicts import agent_verdict
from gateway.store import conversations as conv_store
from gateway.store import federation as federation_store
from gateway.store import messages as messages_store
from gateway.store import permissions as permissions_store
from gateway.store import tasks as tasks_store
from gateway.store import users as users_store
from gateway.store.tasks import TaskRow
from models import Message, PermissionRow


def applies(caller: A2ACaller, recipient: Recipient) -> bool:
    """True when an API-key caller reaches an agent of another user."""
    key = caller.api_key
    return key is not None and recipient.agent_id is not None and key.user_id != recipient.user_id


async def verdict(
    conn: asyncpg.Connection, caller: A2ACaller, recipient: Recipient, action: str, text: str
) -> policy.Verdict:
    """The agent's verdict for the key's issuing user (audited as ``policy.evaluated``)."""
    assert caller.api_key is not None and recipient.agent_id is not None
    requester = await users_store.get_user(conn, id=caller.api_key.user_id)
    assert requester is not None
    return await agent_verdict(
        conn,
        agent_id=recipient.agent_id,
        owner_id=recipient.user_id,
        settings=ContactSettings(),  # no contact: trust unknown, no overrides
        requester_did=requester.did,
        action=action,
        text=text,
        find_grant=lambda: permissions_store.find_local_grant(
            conn, user_id=recipient.user_id, requester_id=requester.id, action=action
        ),
        audit={"caller": caller.ref},
    )


async def request_consent(
    conn: asyncpg.Connection,
    *,
    caller: A2ACaller,
    recipient: Recipient,
    result: policy.Verdict,
    action: str,
    text: str,
    task_id: str,
    expires_at: datetime,
) -> tuple[PermissionRow, Message]:
    """Open a pending request for the key's user, open until ``expires_at``; the notice goes
    to the owner's view of the direct conversation (in ``conn``'s transaction). Returns
    ``(permission, notice)``."""
    assert caller.api_key is not None
    requester = await users_store.get_user(conn, id=caller.api_key.user_id)
    assert requester is not None
    conversation_id = await api_conversation(conn, requester.id, recipient)
    scope = {
        "agent_id": recipient.agent_id,
        "agent_did": recipient.did,
        "task_id": task_id,
        "conversation_id": conversation_id,
        "text": text[:1000],
        "reason": result.reason,
        "caller": caller.ref,
        "requester_user_id": requester.id,
        "requester_did": requester.did,
    }
    return await open_request(
        conn,
        owner_id=recipient.user_id,
        peer_id=None,
        requested_by=requester.id,
        action=action,
        level=result.level,
        scope=scope,
        expires_at=expires_at,
        notice_in=conversation_id,
        requester_name=requester.username,
        requester_did=requester.did,
        text=text,
        refs={"task_id": task_id},
    )


def is_local_request(permission: PermissionRow) -> bool:
    """True for a request opened by :func:`request_consent` (an API-key caller)."""
    scope = permission.scope_json
    return permission.peer_id is None and isinstance(scope, dict) and "caller" in scope


async def settle(
    conn: asyncpg.Connection, permission: PermissionRow, task: TaskRow, now: datetime
) -> tuple[TaskRow, list[Message], str]:
    """Deliver or refuse the held message; the agent answers in the conversation.

    Returns ``(task, messages, requester_user_id)``; the requester reads the answer in the
    conversation and through ``GetTask`` — there is no other instance to tell.
    """
    scope: dict[str, Any] = permission.scope_json  # type: ignore[assignment]
    conversation_id, requester_id = scope["conversation_id"], scope["requester_user_id"]
    messages: list[Message] = []
    delivered_id = None
    if is_allowed(permission):
        delivered = await _deliver_held(conn, scope, task)
        messages.append(delivered)
        delivered_id = delivered.id
    settled, answer = await settle_task(conn, task, permission, delivered_id=delivered_id, now=now)
    messages.append(await _agent_answer(conn, scope, answer))
    await conv_store.touch_conversation(conn, conversation_id=conversation_id)
    return settled, messages, requester_id


async def _deliver_held(conn: asyncpg.Connection, scope: dict[str, Any], task: TaskRow) -> Message:
    """Store the held message as the requester's (``via = 'api'``), de-duplicated."""
    delivered = await messages_store.insert_message(
        conn,
        id=new_id(),
        conversation_id=scope["conversation_id"],
        sender_type="user",
        sender_id=scope["requester_user_id"],
        sender_did=scope["requester_did"],
        **a2a_content.held_fields(task.history_json[0], via="api"),
    )
    await federation_store.insert_inbox(
        conn,
        origin_did=scope["caller"],
        remote_message_id=task.remote_message_id or delivered.id,
        message_id=delivered.id,
        recipient_did=await tasks_store.recipient_did(conn, task),
    )
    return delivered


async def _agent_answer(conn: asyncpg.Connection, scope: dict[str, Any], text: str) -> Message:
    agent = await users_store.get_agent(conn, id=scope["agent_id"])
    assert agent is not None
    return await messages_store.insert_message(
        conn,
        id=new_id(),
        conversation_id=scope["conversation_id"],
        sender_type="own_agent",
        sender_id=agent.id,
        sender_did=agent.did,
        content=text,
    )
