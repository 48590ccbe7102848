"""API keys a user issues for stock A2A clients (create, list, revoke)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from gateway.deps import Current, State
from gateway.routes.params import Id
from gateway.services import api_keys as service
from models.federation_api import ApiKeyCreate, ApiKeyIssued, ApiKeyPublic

router = APIRouter(tags=["federation"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Not authenticated (problem+json)"},
    404: {"description": "No such API key (problem+json)"},
    422: {"description": "Invalid input (problem+json)"},
}


@router.post("/v1/api-keys", status_code=201, summary="Issue an API key", responses=_ERRORS)
async def create_api_key(data: ApiKeyCreate, current: Current, state: State) -> ApiKeyIssued:
    """Issue a bearer key for a stock A2A client; the secret ``key`` is shown only here."""
    return await service.issue(state.pool, current.user, data.name)


@router.get("/v1/api-keys", summary="List API keys", responses=_ERRORS)
async def list_api_keys(current: Current, state: State) -> list[ApiKeyPublic]:
    """The caller's API keys (prefix only), revoked ones included."""
    return await service.list_keys(state.pool, current.user)


@router.delete("/v1/api-keys/{key_id}", summary="Revoke an API key", responses=_ERRORS)
async def revoke_api_key(key_id: Id, current: Current, state: State) -> ApiKeyPublic:
    """Revoke a key at once: A2A calls with it get 401 ``api_key_invalid``."""
    return await service.revoke(state.pool, state.clock, current.user, key_id)
