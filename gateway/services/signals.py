"""Typing and presence across instances: ephemeral signals, never through the outbox.

A local ``typing`` (already rate limited per user and conversation, :mod:`gateway.services
.typing`) reaches the conversation's remote members, and a presence transition (first device
in, last device out, :mod:`gateway.services.presence`) the peers who share a direct
conversation with the user. Each is one ``SendMessage`` signed by the user (RFC 9421) with
``metadata.confer.typing = true`` or ``metadata.confer.presence = "online" | "offline"``:

- typing in a direct conversation goes to the peer's own endpoint; in a group, once per member
  instance to its ``/a2a``, with ``metadata.confer.conversation`` naming the group (id, home)
  and ``recipients``;
- presence goes to each peer sharing a direct conversation (at most
  :data:`MAX_PRESENCE_PEERS`).

They are sent at once by :class:`Signals`, never queued behind messages, and dropped — not
retried — when the peer is down, slow (one short deadline, :data:`SIGNAL_TIMEOUT_SECONDS`) or
already has :data:`MAX_IN_FLIGHT` signals in flight. The receiver (:func:`receive`) checks the
sender takes part (a group member of that group, a peer of a direct conversation), rate limits
per sender (typing once per ``typing_interval_seconds`` per conversation, the same presence
status once a second, so a transition is never lost to the limit) and emits the usual
ephemeral ``typing`` / ``presence`` event to its local users, with the sender's ``did`` (and
``user_id`` null).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx

from a2a.confer import ConferConversation, ConferMetadata, control_parts, send_message_params
from a2a.protocol import SendMessageParams, agent_text_message
from did.outbound import OutboundPolicy
from gateway.ids import new_id
from gateway.realtime.hub import EventHub
from gateway.services import groups
from gateway.services.callers import A2ACaller
from gateway.services.identity import Identity
from gateway.services.tasks import Recipient
from gateway.store import conversations as conv_store
from gateway.store import groups as groups_store
from gateway.store import signals as store
from models import User

log = logging.getLogger(__name__)

SIGNAL_TIMEOUT_SECONDS = 3.0
MAX_IN_FLIGHT = 4
"""Signals in flight to one destination host; more are dropped (they are hints)."""
MAX_PRESENCE_PEERS = 64
PRESENCE_INTERVAL_SECONDS = 1.0
TYPING_EXPIRES_SECONDS = 6


@dataclass
class Signals:
    """Sends ephemeral signals to peers, fire and forget (module docstring): the HTTP client,
    the outbound address policy and our identity (to sign as the user)."""

    client: httpx.AsyncClient
    policy: OutboundPolicy
    identity: Identity
    timeout: float = SIGNAL_TIMEOUT_SECONDS
    _in_flight: dict[str, int] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def send(self, signer: str, endpoint: str, params: dict[str, Any]) -> bool:
        """Start sending ``params`` to ``endpoint`` signed as ``signer``; False when dropped
        because the destination already has :data:`MAX_IN_FLIGHT` signals in flight."""
        host = urlsplit(endpoint).netloc.lower()
        if self._in_flight.get(host, 0) >= MAX_IN_FLIGHT:
            return False
        self._in_flight[host] = self._in_flight.get(host, 0) + 1
        task = asyncio.create_task(self._post(host, signer, endpoint, params))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _post(self, host: str, signer: str, endpoint: str, params: dict[str, Any]) -> None:
        body = json.dumps(
            {"jsonrpc": "2.0", "id": new_id(), "method": "SendMessage", "params": params},
            separators=(",", ":"),
        ).encode()
        try:
            request = self.client.build_request(
                "POST",
                endpoint,
                content=body,
                headers={"Content-Type": "application/json", "A2A-Version": "1.0"},
                timeout=self.timeout,
            )
            request.headers.update(
                self.identity.signer_for(signer).headers_for(
                    request.method, str(request.url), request.headers, body
                )
            )
            async with asyncio.timeout(self.timeout):
                response = await self.policy.send(self.client, request)
                await response.aclose()
        except Exception as exc:  # a hint: dropped whatever went wrong, never retried
            log.debug("signal to %s dropped: %s", endpoint, exc)
        finally:
            self._in_flight[host] -= 1
            if not self._in_flight[host]:
                del self._in_flight[host]

    async def drain(self) -> None:
        """Wait for the signals in flight (tests, shutdown)."""
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _params(context_id: str, confer: ConferMetadata) -> dict[str, Any]:
    return send_message_params(
        message_id=new_id(),
        context_id=context_id,
        text="",  # no text part: control_parts
        confer=confer,
        parts=control_parts("signal"),
    )


async def typing_to_peers(
    conn: asyncpg.Connection, signals: Signals, user: User, conversation_id: str
) -> int:
    """Send ``user``'s typing in ``conversation_id`` to its remote members; how many requests
    were started."""
    participants = await conv_store.list_participants(conn, conversation_id=conversation_id)
    peers = [p for p in participants if p["peer_id"] and p["endpoint"] and p["did"]]
    if not peers:
        return 0
    claim = await _group(conn, conversation_id, user)
    sent = 0
    if claim is None:
        for p in peers:
            confer = ConferMetadata(sender=user.did, recipient=p["did"], typing=True)
            sent += signals.send(user.did, p["endpoint"], _params(conversation_id, confer))
        return sent
    by_origin: dict[str, list[str]] = {}
    for p in peers:
        parts = urlsplit(p["endpoint"])
        by_origin.setdefault(f"{parts.scheme}://{parts.netloc}", []).append(p["did"])
    for origin, dids in by_origin.items():
        confer = ConferMetadata(
            sender=user.did, recipient=dids[0], recipients=dids, conversation=claim, typing=True
        )
        endpoint = origin + groups.INSTANCE_ENDPOINT
        sent += signals.send(user.did, endpoint, _params(claim.id, confer))
    return sent


async def _group(
    conn: asyncpg.Connection, conversation_id: str, user: User
) -> ConferConversation | None:
    """The group's identity (id, home) without its member list, or None for a direct one."""
    kind = await groups_store.get_conversation_kind(conn, conversation_id=conversation_id)
    if kind is None or kind[0] != "group":
        return None
    replica = await groups_store.get_replica(conn, conversation_id=conversation_id)
    if replica is not None:
        return ConferConversation(id=replica.remote_id, home=replica.home)
    return ConferConversation(id=conversation_id, home=groups.instance_did(user.did))


async def presence_to_peers(pool: asyncpg.Pool, signals: Signals, user: User, status: str) -> int:
    """Send ``user``'s presence transition to the peers sharing a direct conversation."""
    async with pool.acquire() as conn:
        peers = await store.peers_sharing_direct_with_user(
            conn, user_id=user.id, limit=MAX_PRESENCE_PEERS
        )
    sent = 0
    for p in peers:
        confer = ConferMetadata(sender=user.did, recipient=p["did"], presence=status)
        sent += signals.send(user.did, p["endpoint"], _params(new_id(), confer))
    return sent


async def receive(
    pool: asyncpg.Pool,
    hub: EventHub,
    identity: Identity,
    caller: A2ACaller,
    recipient: Recipient | None,
    params: SendMessageParams,
    typing_interval: float,
) -> dict[str, Any]:
    """Apply a peer's typing or presence signal (module docstring); always answers
    ``{"message"}`` — a signal that does not apply is dropped, not refused."""
    confer = ConferMetadata.of(params.message.metadata)
    delivered = False
    if caller.peer is not None:
        peer = caller.peer.peer
        async with pool.acquire() as conn:
            if confer.typing:
                conversation_id = await _typing_conversation(
                    conn, identity, recipient, confer, peer.id
                )
                if conversation_id is not None and await hub.ephemeral.allow(
                    f"typing:peer:{conversation_id}:{peer.id}", typing_interval
                ):
                    participants = await conv_store.list_participants(
                        conn, conversation_id=conversation_id
                    )
                    users = [p["user_id"] for p in participants if p["user_id"]]
                    data = {
                        "conversation_id": conversation_id,
                        "user_id": None,
                        "did": peer.did,
                        "expires_in": TYPING_EXPIRES_SECONDS,
                    }
                    await hub.emit_ephemeral(users, "typing", data)
                    delivered = True
            elif confer.presence in ("online", "offline") and await hub.ephemeral.allow(
                f"presence:peer:{peer.id}:{confer.presence}", PRESENCE_INTERVAL_SECONDS
            ):
                users = await store.users_sharing_direct_with_peer(conn, peer_id=peer.id)
                data = {"user_id": None, "did": peer.did, "status": confer.presence}
                await hub.emit_ephemeral(users, "presence", data)
                delivered = True
    reply = agent_text_message(
        "Signalled." if delivered else "Dropped.",
        message_id=new_id(),
        context_id=params.message.contextId or new_id(),
        task_id=new_id(),
        data={"delivered": delivered},
    )
    return {"message": reply}


async def _typing_conversation(
    conn: asyncpg.Connection,
    identity: Identity,
    recipient: Recipient | None,
    confer: ConferMetadata,
    peer_id: str,
) -> str | None:
    """Our conversation a peer's typing is about, when the peer takes part in it."""
    claim = confer.conversation
    conversation_id: str | None = None
    if claim is not None:
        if claim.home == identity.did:
            conversation_id = claim.id
        else:
            replica = await groups_store.find_replica(conn, home=claim.home, remote_id=claim.id)
            conversation_id = replica.conversation_id if replica else None
    elif recipient is not None:
        conversation_id = await store.direct_conversation_with_peer(
            conn, user_id=recipient.user_id, peer_id=peer_id
        )
    if conversation_id is None:
        return None
    if not await store.participates(conn, conversation_id=conversation_id, peer_id=peer_id):
        return None
    return conversation_id
