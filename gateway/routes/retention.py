"""A conversation's message retention (docs/conversations.md, "Retention")."""

from __future__ import annotations

from fastapi import APIRouter

from gateway.deps import Current, State
from gateway.routes import problems
from gateway.routes.params import Id
from gateway.services import message_retention as service
from models.api import RetentionPublic, RetentionUpdate

router = APIRouter(tags=["conversations"])

_ERRORS = problems(400, 401, 403, 404, 422)


@router.get(
    "/v1/conversations/{conversation_id}/retention",
    summary="How long the conversation keeps its messages",
    responses=_ERRORS,
)
async def get_retention(conversation_id: Id, current: Current, state: State) -> RetentionPublic:
    """The conversation's own retention, the instance's, and the one applied (days)."""
    return await service.get_retention(
        state.pool, current.user, conversation_id, state.settings.message_retention_days
    )


@router.put(
    "/v1/conversations/{conversation_id}/retention",
    summary="Set how long the conversation keeps its messages",
    responses=_ERRORS,
)
async def put_retention(
    conversation_id: Id, data: RetentionUpdate, current: Current, state: State
) -> RetentionPublic:
    """Set ``days`` (1..3650, at most the instance's) or ``null`` to follow the instance:
    a group's admins, either participant of a direct conversation. Audited."""
    return await service.set_retention(
        state.pool,
        current.user,
        conversation_id,
        data,
        state.settings.message_retention_days,
    )
