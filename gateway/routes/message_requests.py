"""Message requests (``/v1/message-requests``): strangers' first messages, held apart from the
inbox until the user accepts or declines them (``services.message_requests``)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from gateway.deps import Current, State
from gateway.routes import problems
from gateway.routes.params import Id
from gateway.services import message_requests as service
from gateway.services.accounts import Authenticated
from gateway.store.message_requests import MessageRequestRow
from models.base import DIGITS_ONLY, TRUE_OR_FALSE
from models.moderation_api import MessageRequestList, MessageRequestPublic

router = APIRouter(tags=["conversations"], responses=problems(401, 422))


def _public(row: MessageRequestRow) -> MessageRequestPublic:
    return MessageRequestPublic.model_validate(
        {k: v for k, v in vars(row).items() if k != "user_id"}
    )


@router.get("/v1/message-requests", summary="List pending message requests")
async def list_requests(
    current: Current, state: State, limit: Annotated[int, Query(ge=1, le=200), DIGITS_ONLY] = 50
) -> MessageRequestList:
    """Pending requests, newest first: the conversation and who wrote."""
    items = await service.list_pending(state.pool, user_id=current.user.id, limit=limit)
    return MessageRequestList(items=[MessageRequestPublic.model_validate(i) for i in items])


@router.post(
    "/v1/message-requests/{conversation_id}/accept",
    summary="Accept a message request",
    responses=problems(404),
)
async def accept(conversation_id: Id, current: Current, state: State) -> MessageRequestPublic:
    """The conversation joins the inbox and the sender becomes a contact."""
    return await _decide(state, current, conversation_id, "accepted")


@router.post(
    "/v1/message-requests/{conversation_id}/decline",
    summary="Decline a message request",
    responses=problems(404),
)
async def decline(
    conversation_id: Id,
    current: Current,
    state: State,
    block: Annotated[
        bool,
        Query(description="Also block the sender (their later messages are refused)."),
        TRUE_OR_FALSE,
    ] = False,
) -> MessageRequestPublic:
    """The conversation stays apart; with ``block=true`` the sender is blocked too."""
    return await _decide(state, current, conversation_id, "declined", block)


async def _decide(
    state: State,
    current: Authenticated,
    conversation_id: Id,
    decision: Literal["accepted", "declined"],
    block: bool = False,
) -> MessageRequestPublic:
    row = await service.decide(
        state.pool,
        state.hub,
        state.clock,
        user_id=current.user.id,
        conversation_id=conversation_id,
        decision=decision,
        block=block,
    )
    return _public(row)
