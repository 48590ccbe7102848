"""Opening a pending permission request with its ``permission_request`` notice.

One shape for the three kinds of requester an agent's owner is asked about — a signed peer
(:mod:`gateway.services.consent`), an API-key caller (:mod:`gateway.services.key_consent`)
and another local user (:mod:`gateway.services.local_consent`): the ``permissions`` row, the
owner's notice message naming it, the notice conversation touched and a
``permission.requested`` audit row, all in the caller's transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from gateway.ids import new_id
from gateway.store import audit as audit_store
from gateway.store import conversations as conv_store
from gateway.store import messages as messages_store
from gateway.store import permissions as permissions_store
from models import Message, PermissionRow


async def open_request(
    conn: asyncpg.Connection,
    *,
    owner_id: str,
    peer_id: str | None,
    requested_by: str,
    action: str,
    level: str,
    scope: dict[str, Any],
    expires_at: datetime,
    notice_in: str,
    requester_name: str,
    requester_did: str,
    text: str,
    refs: dict[str, Any],
) -> tuple[PermissionRow, Message]:
    """Open a pending request (open until ``expires_at``) and post its notice in
    ``notice_in``; returns ``(permission, notice)``. The notice's ``content_json`` names the
    permission, the requester's DID, the action and level, ``refs`` (what the request is
    about: a task id, or a conversation and message) and the expiry; its text quotes at most
    200 characters of ``text``. Announcing both is the caller's (after the rows exist)."""
    permission = await permissions_store.insert_permission(
        conn,
        id=new_id(),
        user_id=owner_id,
        peer_id=peer_id,
        action=action,
        scope=scope,
        level=level,
        requested_by=requested_by,
        expires_at=expires_at,
    )
    notice = await messages_store.insert_message(
        conn,
        id=new_id(),
        conversation_id=notice_in,
        sender_type="system",
        sender_id=permission.id,
        sender_did=None,
        content_type="permission_request",
        content=f"{requester_name} asks to {action} ({level}): {text[:200]}",
        content_json={
            "permission_id": permission.id,
            "peer_did": requester_did,
            "action": action,
            "level": level,
            **refs,
            "expires_at": expires_at.isoformat(),
        },
    )
    await conv_store.touch_conversation(conn, conversation_id=notice_in)
    await audit_store.insert_audit(
        conn,
        action="permission.requested",
        user_id=owner_id,
        details={"permission_id": permission.id, "peer": requester_did, "level": level},
    )
    return permission, notice
