"""Message requests (``/v1/message-requests``): strangers' first messages, and invitations into
groups homed on instances the user does not know, held apart from the inbox until the user
accepts or declines them (``services.message_requests``, ``services.group_invitations``)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from gateway.deps import Current, State, group_deps
from gateway.routes import problems
from gateway.routes.params import Id
from gateway.services import group_invitations
from gateway.services import message_requests as service
from gateway.services.accounts import Authenticated
from gateway.store.message_requests import RequestListing
from models.base import DIGITS_ONLY, TRUE_OR_FALSE
from models.moderation_api import MessageRequestList, MessageRequestPublic

router = APIRouter(tags=["conversations"], responses=problems(401, 422))


def _public(decided: RequestListing) -> MessageRequestPublic:
    row = decided.row
    return MessageRequestPublic(
        conversation_id=row.conversation_id,
        sender_did=row.sender_did,
        state=row.state,  # type: ignore[arg-type]
        created_at=row.created_at,
        decided_at=row.decided_at,
        kind=decided.kind,  # type: ignore[arg-type]
        group_name=decided.group_name,
        group_home=decided.group_home,
        sender_name=decided.sender_name,
    )


@router.get("/v1/message-requests", summary="List pending message requests")
async def list_requests(
    current: Current, state: State, limit: Annotated[int, Query(ge=1, le=200), DIGITS_ONLY] = 50
) -> MessageRequestList:
    """Pending requests, newest first: the conversation and who wrote — or, for an
    invitation into a group homed on an instance you do not know (``kind: "group"``), the
    group's name and who added you."""
    items = await service.list_pending(state.pool, user_id=current.user.id, limit=limit)
    return MessageRequestList(items=[MessageRequestPublic.model_validate(i) for i in items])


@router.post(
    "/v1/message-requests/{conversation_id}/accept",
    summary="Accept a message request",
    responses=problems(404),
)
async def accept(conversation_id: Id, current: Current, state: State) -> MessageRequestPublic:
    """The conversation joins the inbox and the sender becomes a contact; an invited user
    joins the group."""
    return await _decide(state, current, conversation_id, "accepted")


@router.post(
    "/v1/message-requests/{conversation_id}/decline",
    summary="Decline a message request",
    responses=problems(404, 502),
)
async def decline(
    conversation_id: Id,
    current: Current,
    state: State,
    block: Annotated[
        bool,
        Query(
            description="Also block the sender (their later messages are refused); for a "
            "group invitation, the group's home instance."
        ),
        TRUE_OR_FALSE,
    ] = False,
) -> MessageRequestPublic:
    """The conversation stays apart; with ``block=true`` the sender is blocked too. Declining
    a group invitation has its home take the user out of the group (502
    ``group_home_unreachable`` when it cannot be reached, unless blocking)."""
    return await _decide(state, current, conversation_id, "declined", block)


async def _decide(
    state: State,
    current: Authenticated,
    conversation_id: Id,
    decision: Literal["accepted", "declined"],
    block: bool = False,
) -> MessageRequestPublic:
    row = await group_invitations.decide(
        group_deps(state), state.clock, current.user, conversation_id, decision, block
    )
    return _public(row)
