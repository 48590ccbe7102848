"""Inspect what your own agent would see in a conversation (the context-tables spec's context
flow)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from gateway.deps import Current, State
from gateway.routes.params import Id
from models.context import AssembledContext

router = APIRouter(tags=["memory"])


@router.get(
    "/v1/conversations/{conversation_id}/agent-context",
    summary="Inspect your agent's context",
    responses={
        401: {"description": "Not authenticated (problem+json)"},
        404: {"description": "No conversation of yours with your agent (problem+json)"},
    },
)
async def agent_context(
    conversation_id: Id,
    current: Current,
    state: State,
    audience: Annotated[Literal["owner", "others"], Query()] = "owner",
) -> AssembledContext:
    """The parts (system prompt, personality, memories, knowledge, ambient context, history,
    summary) with their token estimates, and the exact system text and turns the model gets.
    `audience=others` shows what the agent sees when it answers someone else (a group member,
    a peer): no memories and no ambient context. Looking does not count as using: memory use
    counts do not change."""
    return await state.context.runtime.inspect(
        current.user, conversation_id, for_owner=audience == "owner"
    )
