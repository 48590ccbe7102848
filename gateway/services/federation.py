"""Inbound A2A messages from verified peers: store, de-duplicate, deliver to local devices.

A2A 1.0 ``SendMessage`` (JSON-RPC binding) carries one Message; Confer stores it in the
recipient's direct conversation with the peer, as ``sender_type = 'peer_agent'``, in one
transaction with the inbox de-duplication row, the contact and the audit row.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from gateway.errors import FederationAuthError, RecipientNotFoundError
from gateway.federation_auth import VerifiedPeer
from gateway.ids import new_id
from gateway.services.conversations import MESSAGE_CREATED
from gateway.state import AppState
from gateway.store import audit as audit_store
from gateway.store import conversations as conv_store
from gateway.store import federation as federation_store
from gateway.store import messages as messages_store
from gateway.store import peers as peers_store
from gateway.store import users as users_store
from models import Message


class A2APart(BaseModel):
    """A2A 1.0 ``Part`` (only the members Confer reads; unknown members are ignored)."""

    model_config = ConfigDict(extra="allow")
    text: str | None = None
    data: Any = None


class A2AMessage(BaseModel):
    """A2A 1.0 ``Message`` (spec §4.5): id, context, role, parts, metadata."""

    model_config = ConfigDict(extra="allow")
    messageId: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    contextId: Annotated[str, StringConstraints(max_length=128)] | None = None
    role: Literal["ROLE_USER", "ROLE_AGENT"]
    parts: list[A2APart] = Field(min_length=1)
    metadata: dict[str, Any] | None = None


class SendMessageParams(BaseModel):
    """A2A 1.0 ``SendMessageRequest`` params."""

    model_config = ConfigDict(extra="allow")
    message: A2AMessage
    configuration: dict[str, Any] | None = None


def message_text(message: A2AMessage, max_chars: int) -> str:
    """The message's text parts joined by newlines; ValueError when there is none or too much."""
    text = "\n".join(p.text for p in message.parts if p.text)
    if not text:
        raise ValueError("the message has no text part")
    if len(text) > max_chars:
        raise ValueError(f"the message text exceeds {max_chars} characters")
    return text


def _claimed_sender(message: A2AMessage) -> str | None:
    confer = (message.metadata or {}).get("confer")
    sender = confer.get("sender") if isinstance(confer, dict) else None
    return sender if isinstance(sender, str) else None


def _ack(params: SendMessageParams, local_id: str) -> dict[str, Any]:
    """A2A ``SendMessageResponse`` ``{"message": …}`` acknowledging delivery."""
    return {
        "message": {
            "messageId": new_id(),
            "contextId": params.message.contextId or local_id,
            "role": "ROLE_AGENT",
            "parts": [{"data": {"status": "delivered", "messageId": local_id}}],
        }
    }


async def receive_message(
    state: AppState,
    peer: VerifiedPeer,
    *,
    kind: Literal["users", "agents"],
    name: str,
    params: SendMessageParams,
    text: str,
    ip: str | None,
) -> dict[str, Any]:
    """Store a verified peer's message for the local user or agent ``kind/name``.

    Idempotent on (peer DID, ``messageId``): a retry returns the first answer and stores
    nothing new. Raises RecipientNotFoundError and FederationAuthError (sender mismatch).
    """
    claimed = _claimed_sender(params.message)
    if claimed is not None and claimed != peer.peer.did:
        raise FederationAuthError(
            "signature_sender_mismatch", f"signed by {peer.keyid} but claims to be {claimed}"
        )
    remote_id = params.message.messageId
    async with state.pool.acquire() as conn, conn.transaction():
        owner_id: str | None = None
        agent_id: str | None = None
        if kind == "users":
            user = await users_store.get_user_by_username(conn, username=name)
            owner_id = user.id if user else None
        else:
            agent = await users_store.get_agent(conn, id=name)
            owner_id, agent_id = (agent.user_id, agent.id) if agent else (None, None)
        if owner_id is None:
            raise RecipientNotFoundError(f"no {kind[:-1]} {name!r} here")
        await conv_store.lock_direct_pair(conn, f"inbox:{peer.peer.did}:{remote_id}")
        existing = await federation_store.get_inbox(
            conn, origin_did=peer.peer.did, remote_message_id=remote_id
        )
        if existing is not None:
            return _ack(params, existing)
        conversation_id = await _direct_conversation(conn, owner_id, agent_id, peer.peer.id)
        message = await messages_store.insert_message(
            conn,
            id=new_id(),
            conversation_id=conversation_id,
            sender_type="peer_agent",
            sender_id=peer.peer.id,
            sender_did=peer.peer.did,
            content=text,
        )
        await conv_store.touch_conversation(conn, conversation_id=conversation_id)
        await federation_store.insert_inbox(
            conn, origin_did=peer.peer.did, remote_message_id=remote_id, message_id=message.id
        )
        await peers_store.upsert_contact(
            conn, user_id=owner_id, peer_id=peer.peer.id, alias=None, added_via="inbound"
        )
        await audit_store.insert_audit(
            conn,
            action="federation.inbound",
            user_id=owner_id,
            details={
                "method": "SendMessage",
                "peer": peer.peer.did,
                "keyid": peer.keyid,
                "remote_message_id": remote_id,
                "message_id": message.id,
            },
            ip_address=ip,
        )
    _push(state, owner_id, message)
    return _ack(params, message.id)


async def _direct_conversation(conn: Any, owner_id: str, agent_id: str | None, peer_id: str) -> str:
    """The owner's direct conversation with the peer (created on first contact)."""
    type_ = "direct_agent_agent" if agent_id else "direct_user_user"
    await conv_store.lock_direct_pair(conn, f"{type_}:{owner_id}:peer_agent:{peer_id}")
    existing = await conv_store.find_direct_conversation(
        conn, type=type_, user_id=owner_id, other=("peer_agent", peer_id)
    )
    if existing is not None:
        return existing.id
    conversation = await conv_store.insert_conversation(
        conn, type=type_, name=None, created_by=owner_id
    )
    if agent_id:
        await conv_store.insert_participant(
            conn, conversation_id=conversation.id, who=("own_agent", agent_id)
        )
        await conv_store.insert_participant(
            conn, conversation_id=conversation.id, who=("user", owner_id), role="observer"
        )
    else:
        await conv_store.insert_participant(
            conn, conversation_id=conversation.id, who=("user", owner_id), role="admin"
        )
    await conv_store.insert_participant(
        conn, conversation_id=conversation.id, who=("peer_agent", peer_id)
    )
    return conversation.id


def _push(state: AppState, user_id: str, message: Message) -> None:
    state.hub.publish([user_id], MESSAGE_CREATED, message.model_dump(mode="json"))
