"""Inbound group membership traffic: a home's events at a replica, a replica's requests at the home.

A ``SendMessage`` with ``metadata.confer.membership`` (:class:`a2a.confer.ConferMembership`) and
``metadata.confer.conversation`` naming a group is one of two things, told apart by its signer:

- **An event**, signed by the group's home instance itself (its instance DID,
  ``did:web:<host>``, which is ``conversation.home``): a membership change already made
  there, carrying the group's whole state after it. The replica takes that state
  (:func:`gateway.services.participants.take_home_state`); an event signed by anyone else is
  refused (403 ``not_group_member``, audited), so only the home decides who is in its group.
  The state's ``version`` orders events: one not newer than the replica's is ignored
  (audited ``group.event.stale``, logged) and answered as a success, so the home's outbox
  does not retry it.
- **A request**, signed by a member of another instance, sent to us because we are the
  group's home (:mod:`gateway.services.group_home`): the change is made under the local rules,
  as that member (:class:`gateway.services.participants.Actor`), and announced to every member
  instance like a local change; the answer carries the new state. What the member may not do
  is refused with the JSON-RPC error :class:`a2a.confer.GroupActionRefusedError` whose
  ``ErrorInfo.metadata.code`` is the problem code a local client would get
  (``not_conversation_admin``, ``not_group_member``, ``participant_not_found`` …), audited as
  ``group.request.refused``.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from a2a.confer import (
    ConferConversation,
    ConferMembership,
    ConferMetadata,
    GroupActionRefusedError,
)
from a2a.protocol import InvalidParamsError, SendMessageParams, agent_text_message
from gateway.errors import (
    ConferError,
    NotGroupMemberError,
    ParticipantNotFoundError,
    ValidationFailedError,
)
from gateway.ids import new_id
from gateway.services import participants
from gateway.services.callers import A2ACaller
from gateway.services.groups import home_state
from gateway.services.participants import Actor, GroupDeps
from gateway.store import audit as audit_store
from gateway.store import groups as groups_store
from models.api import ConversationUpdate, ParticipantCreate, ParticipantUpdate

log = logging.getLogger(__name__)


async def receive(
    deps: GroupDeps, caller: A2ACaller, params: SendMessageParams, ip: str | None
) -> dict[str, Any]:
    """Apply a membership event or request (module docstring); the ``SendMessage`` result
    ``{"message": Message}`` whose ``metadata.confer.conversation`` is the group's state.

    Raises InvalidParamsError (-32602) for a malformed membership or group claim,
    NotGroupMemberError (403) for an event not signed by the group's home, and
    GroupActionRefusedError for a request the home refuses.
    """
    confer = ConferMetadata.of(params.message.metadata)
    claim, membership = confer.conversation, confer.membership
    if (
        caller.peer is None
        or claim is None
        or membership is None
        or params.message.contextId != claim.id
    ):
        raise InvalidParamsError(
            "Invalid params: a membership message needs message.metadata.confer.membership "
            "and .conversation naming its contextId, from a signed peer"
        )
    signer = caller.peer.peer.did
    if signer == claim.home and signer.count(":") == 2:  # an instance DID, did:web:<host>
        return await _event(deps, caller, params, claim, ip)
    return await _request(deps, caller, params, claim, ip)


async def _event(
    deps: GroupDeps,
    caller: A2ACaller,
    params: SendMessageParams,
    claim: ConferConversation,
    ip: str | None,
) -> dict[str, Any]:
    if claim.home == deps.identity.did or len(claim.members) > deps.max_members:
        raise NotGroupMemberError(f"{claim.home} cannot announce group {claim.id} here")
    assert caller.peer is not None
    applied = await participants.take_home_state(
        deps, claim, caller.peer.peer.id, _inviter(params, claim)
    )
    details: dict[str, Any] = {
        "event": _event_name(params),
        "conversation_id": applied.conversation_id,
        "version": claim.version,
    }
    if applied.stale:
        # late or repeated: answered as a success, so the home's outbox does not retry it
        details["held"] = applied.held
        log.info(
            "group %s: event version %s from %s ignored, version %s held",
            claim.id,
            claim.version,
            claim.home,
            applied.held,
        )
        await _audit(deps, "group.event.stale", caller, claim, ip, details)
        return _answer(params, claim, "Already applied.")
    await _audit(deps, "group.event.applied", caller, claim, ip, details)
    return _answer(params, claim, "Applied." if applied.conversation_id else "No member here.")


async def _audit(
    deps: GroupDeps,
    action: str,
    caller: A2ACaller,
    claim: ConferConversation,
    ip: str | None,
    details: dict[str, Any],
) -> None:
    async with deps.pool.acquire() as conn:
        await audit_store.insert_audit(
            conn,
            action=action,
            details={"caller": caller.ref, "group": claim.id[:255], **details},
            ip_address=ip,
        )


def _inviter(params: SendMessageParams, claim: ConferConversation) -> str | None:
    """Who made the change, as the event's ``by`` names them: a member the state lists or one
    of the home's own (shown as whoever invited a local user the home does not know, see
    :mod:`gateway.services.message_requests`); None for anyone else."""
    membership = ConferMetadata.of(params.message.metadata).membership
    by = membership.by if membership is not None else None
    if by is None or len(by) > 255:
        return None
    return by if by in claim.members or by.startswith(claim.home + ":") else None


def _event_name(params: SendMessageParams) -> str | None:
    membership = ConferMetadata.of(params.message.metadata).membership
    return membership.event if membership else None


async def _request(
    deps: GroupDeps,
    caller: A2ACaller,
    params: SendMessageParams,
    claim: ConferConversation,
    ip: str | None,
) -> dict[str, Any]:
    assert caller.peer is not None
    request = ConferMetadata.of(params.message.metadata).membership
    assert request is not None
    actor = Actor(caller.peer.peer.did, peer=caller.peer.peer)
    try:
        await _apply_request(deps, actor, claim, request)
    except ConferError as exc:
        details = {"event": request.event, "code": exc.wire_code, "detail": exc.detail[:500]}
        await _audit(deps, "group.request.refused", caller, claim, ip, details)
        raise GroupActionRefusedError(exc.detail, exc.wire_code) from exc
    async with deps.pool.acquire() as conn:
        state = await home_state(conn, conversation_id=claim.id, home=deps.identity.did)
    return _answer(params, state, "Done.")


async def _apply_request(
    deps: GroupDeps, actor: Actor, claim: ConferConversation, request: ConferMembership
) -> None:
    """Make the member's ``request`` on our group ``claim.id`` under the local rules."""
    async with deps.pool.acquire() as conn:
        kind = await groups_store.get_conversation_kind(conn, conversation_id=claim.id)
        replica = await groups_store.get_replica(conn, conversation_id=claim.id)
    if claim.home != deps.identity.did or kind is None or kind[0] != "group" or replica:
        raise NotGroupMemberError(f"group {claim.id} is not homed here")
    try:
        await _make(deps, actor, claim.id, request)
    except ValidationError as exc:  # a name or DID a local client could not send either
        count = exc.error_count()
        raise ValidationFailedError(f"invalid membership request: {count} error(s)") from exc


async def _make(deps: GroupDeps, actor: Actor, group: str, request: ConferMembership) -> None:
    match request.event:
        case "rename" | "archive":
            if request.name is None and request.archived is None:
                raise ValidationFailedError("nothing to change: send name and/or archived")
            update = ConversationUpdate(name=request.name, archived=request.archived)
            await participants.change_conversation(deps, actor, group, update)
        case "join":
            if request.member is None:
                raise ValidationFailedError("a join names its member")
            added = ParticipantCreate(did=request.member, role=request.role or "member")
            await participants.add_member(deps, actor, group, added)
        case "kick":
            member = await _participant(deps, group, request.member)
            await participants.remove_member(deps, actor, group, member)
        case "leave":
            await participants.leave_as(deps, actor, group)
        case "role":
            member = await _participant(deps, group, request.member)
            role = ParticipantUpdate(role=request.role or "member")
            await participants.change_role(deps, actor, group, member, role)
        case _:
            raise ValidationFailedError(f"a member may not ask for {request.event!r}")


def _answer(params: SendMessageParams, state: ConferConversation, text: str) -> dict[str, Any]:
    reply = agent_text_message(
        text, message_id=new_id(), context_id=params.message.contextId or state.id, task_id=new_id()
    )
    reply["metadata"] = ConferMetadata(conversation=state).metadata()
    return {"message": reply}


async def _participant(deps: GroupDeps, conversation_id: str, did: str | None) -> str:
    """The participant id of ``did`` in our group; ParticipantNotFoundError otherwise."""
    async with deps.pool.acquire() as conn:
        found = (
            await groups_store.find_participant_by_did(
                conn, conversation_id=conversation_id, did=did
            )
            if did
            else None
        )
    if found is None:
        raise ParticipantNotFoundError(f"{did} takes no part in group {conversation_id}")
    return found
