"""Consent requests: list them, and decide (allow_once / allow_always / deny, with a scope)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from gateway.deps import Current, State
from gateway.routes.params import Id
from gateway.services import consent
from models import PermissionRow
from models.base import DIGITS_ONLY, TRUE_OR_FALSE
from models.federation_api import PermissionDecisionCreate

router = APIRouter(tags=["conversations"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Not authenticated (problem+json)"},
    404: {"description": "No such permission request (problem+json)"},
    409: {"description": "Already decided, or expired and denied (problem+json)"},
    422: {"description": "Invalid input (problem+json)"},
}


@router.get("/v1/permissions", summary="List permission requests", responses=_ERRORS)
async def list_permissions(
    current: Current,
    state: State,
    pending: Annotated[
        bool, Query(description="Only requests still waiting"), TRUE_OR_FALSE
    ] = False,
    limit: Annotated[int, Query(ge=1, le=200), DIGITS_ONLY] = 50,
) -> list[PermissionRow]:
    """The caller's permission requests and decisions, newest first."""
    return await consent.list_permissions(
        state.pool, current.user, pending_only=pending, limit=limit
    )


@router.post(
    "/v1/permissions/{permission_id}/decision",
    summary="Decide a permission request",
    responses=_ERRORS,
)
async def decide_permission(
    permission_id: Id, data: PermissionDecisionCreate, current: Current, state: State
) -> PermissionRow:
    """Allow once, allow always (reused within ``scope``) or deny; the requester is told."""
    deps = consent.Deciding(state.hub, state.agent_queue, state.task_events, state.clock)
    return await consent.decide(
        state.pool, deps, current.user, permission_id, data.decision, data.scope
    )
