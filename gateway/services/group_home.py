"""A replica member's change of a group homed elsewhere is made by the home instance.

The home owns a group's membership, name, roles and archive state; a replica only mirrors
them. So a REST change on a replica (rename, archive, add, remove, role, leave) is not made
locally: :meth:`HomeLink.forward` sends it to the home instance's A2A endpoint (the ``#a2a``
service of its instance DID document) as a ``SendMessage`` signed by the acting member
(RFC 9421), with ``metadata.confer.membership`` naming the request and
``metadata.confer.conversation`` the home's group. The home applies its local rules
(:mod:`gateway.services.group_events`) and answers with the group's new state, which the
replica takes at once (the same state reaches every other member instance as a membership
event); a refusal is the JSON-RPC error :data:`a2a.confer.GROUP_ACTION_REFUSED` whose
``ErrorInfo.metadata.code`` is the problem code a local client of the home would have got,
raised here as that same error (so the REST caller gets e.g. 403 ``not_conversation_admin``).
The request is synchronous and not queued: the caller waits for the home's answer.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import httpx

from a2a.confer import (
    ConferConversation,
    ConferMembership,
    ConferMetadata,
    control_parts,
    refused_problem,
    send_message_params,
)
from did.errors import DIDError
from did.outbound import OutboundPolicy, read_capped
from gateway import errors as e
from gateway.ids import new_id
from gateway.services.identity import Identity
from gateway.services.peers import PeerDirectory
from gateway.store.groups import ReplicaRow

ANSWER_MAX_BYTES = 256 * 1024
"""The home's answer carries the group's whole state (up to the member cap's DIDs)."""


_REFUSALS: dict[str, type[e.ConferError]] = {
    cls.code: cls
    for cls in (
        e.NotConversationAdminError,
        e.NotGroupMemberError,
        e.ParticipantNotFoundError,
        e.AlreadyParticipantError,
        e.GroupTooLargeError,
        e.NotAGroupError,
        e.ConversationArchivedError,
        e.ValidationFailedError,
        e.PeerError,
        e.RecipientNotFoundError,
    )
}
"""The home's refusals a replica passes on as they are (any other is the home failing)."""


@dataclass(frozen=True)
class HomeLink:
    """What a replica needs to ask a group's home for a change: the HTTP client, the outbound
    address policy, our identity (to sign as the acting member), the peer directory (to find
    the home's endpoint) and the deadline of one request in seconds."""

    client: httpx.AsyncClient
    policy: OutboundPolicy
    identity: Identity
    peers: PeerDirectory
    timeout: float

    async def forward(
        self, actor_did: str, replica: ReplicaRow, request: ConferMembership
    ) -> ConferConversation:
        """Ask the home of ``replica`` to make ``request`` as ``actor_did`` (a local member);
        returns the group's state after it (module docstring).

        Raises the home's refusal as the local error of the same code (403
        ``not_conversation_admin``, 404 ``participant_not_found`` …), and
        GroupHomeUnreachableError (502) when the home cannot be reached or answers anything
        else.
        """
        try:
            home = await self.peers.resolve(replica.home)
        except DIDError as exc:
            raise e.GroupHomeUnreachableError(f"{replica.home}: {exc.detail}") from exc
        params = send_message_params(
            message_id=new_id(),
            context_id=replica.remote_id,
            text="",  # no text part: control_parts
            confer=ConferMetadata(
                sender=actor_did,
                conversation=ConferConversation(id=replica.remote_id, home=replica.home),
                membership=request,
            ),
            parts=control_parts("membership"),
        )
        answer = await self._call(actor_did, home.endpoint, params)
        return _state(answer, replica)

    async def _call(self, actor_did: str, endpoint: str, params: dict[str, Any]) -> Any:
        body = json.dumps(
            {"jsonrpc": "2.0", "id": new_id(), "method": "SendMessage", "params": params},
            separators=(",", ":"),
        ).encode()
        request = self.client.build_request(
            "POST",
            endpoint,
            content=body,
            headers={
                "Content-Type": "application/json",
                "A2A-Version": "1.0",
                "Accept-Encoding": "identity",
            },
            timeout=self.timeout,
        )
        signer = self.identity.signer_for(actor_did)
        request.headers.update(
            signer.headers_for(request.method, str(request.url), request.headers, body)
        )
        try:
            async with asyncio.timeout(self.timeout):
                response = await self.policy.send(self.client, request)
                try:
                    raw = await read_capped(response, ANSWER_MAX_BYTES)
                finally:
                    await response.aclose()
        except (TimeoutError, DIDError, httpx.HTTPError, httpx.StreamError) as exc:
            raise e.GroupHomeUnreachableError(f"{endpoint}: {type(exc).__name__}") from exc
        try:
            return json.loads(raw) if raw is not None and response.status_code == 200 else None
        except ValueError:
            return None


def _state(answer: Any, replica: ReplicaRow) -> ConferConversation:
    """The group state in the home's JSON-RPC answer, or the home's refusal raised."""
    if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
        problem = refused_problem(answer["error"])
        message = answer["error"].get("message")
        detail = message[:500] if isinstance(message, str) else "refused by the group's home"
        if problem in _REFUSALS:
            raise _REFUSALS[problem](detail)
    result = answer.get("result") if isinstance(answer, dict) else None
    message = result.get("message") if isinstance(result, dict) else None
    state = ConferMetadata.of(message.get("metadata") if isinstance(message, dict) else None)
    claim = state.conversation
    if claim is None or claim.id != replica.remote_id or claim.home != replica.home:
        raise e.GroupHomeUnreachableError(f"{replica.home} gave no state of the group")
    return claim
