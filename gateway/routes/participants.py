"""Conversation administration: participants, roles, rename/archive, leave, own settings."""

from __future__ import annotations

from fastapi import APIRouter, Response

from gateway.deps import Current, State, group_deps
from gateway.routes.conversations import _ERRORS
from gateway.routes.params import Id
from gateway.services import participants as service
from models.api import (
    ConversationPublic,
    ConversationUpdate,
    MembershipUpdate,
    ParticipantCreate,
    ParticipantUpdate,
)

router = APIRouter(tags=["conversations"])


@router.patch(
    "/v1/conversations/{conversation_id}",
    summary="Rename or archive a conversation (admins)",
    responses=_ERRORS,
)
async def update_conversation(
    conversation_id: Id, data: ConversationUpdate, current: Current, state: State
) -> ConversationPublic:
    """Change the name and/or archive (read-only) or unarchive the conversation."""
    return await service.update_conversation(group_deps(state), current.user, conversation_id, data)


@router.post(
    "/v1/conversations/{conversation_id}/participants",
    status_code=201,
    summary="Add a participant to a group (admins)",
    responses=_ERRORS,
)
async def add_participant(
    conversation_id: Id, data: ParticipantCreate, current: Current, state: State
) -> ConversationPublic:
    """Add a local user, a local agent or a peer agent (by DID) with a role."""
    return await service.add_participant(group_deps(state), current.user, conversation_id, data)


@router.patch(
    "/v1/conversations/{conversation_id}/participants/{participant_id}",
    status_code=204,
    summary="Change a participant's role (admins)",
    responses=_ERRORS,
)
async def update_participant(
    conversation_id: Id,
    participant_id: Id,
    data: ParticipantUpdate,
    current: Current,
    state: State,
) -> Response:
    """Make a participant a member, an admin or an observer."""
    await service.update_participant_role(
        group_deps(state),
        current.user,
        conversation_id,
        participant_id,
        data,
    )
    return Response(status_code=204)


@router.delete(
    "/v1/conversations/{conversation_id}/participants/{participant_id}",
    status_code=204,
    summary="Remove a participant from a group (admins)",
    responses=_ERRORS,
)
async def remove_participant(
    conversation_id: Id, participant_id: Id, current: Current, state: State
) -> Response:
    """Remove a participant; they stop seeing the conversation."""
    await service.remove_participant(
        group_deps(state), current.user, conversation_id, participant_id
    )
    return Response(status_code=204)


@router.post(
    "/v1/conversations/{conversation_id}/leave",
    status_code=204,
    summary="Leave a conversation",
    responses=_ERRORS,
)
async def leave(conversation_id: Id, current: Current, state: State) -> Response:
    """The caller leaves; the conversation then answers them 404."""
    await service.leave_conversation(group_deps(state), current.user, conversation_id)
    return Response(status_code=204)


@router.patch(
    "/v1/conversations/{conversation_id}/membership",
    summary="Set your notification setting",
    responses=_ERRORS,
)
async def update_membership(
    conversation_id: Id, data: MembershipUpdate, current: Current, state: State
) -> ConversationPublic:
    """``notification``: ``all``, ``mentions`` or ``none`` (for you only)."""
    return await service.update_membership(state.pool, current.user, conversation_id, data)
