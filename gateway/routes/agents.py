"""The caller's own agents: read and change their settings."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from gateway.deps import Current, State
from gateway.federation_auth import client_ip
from gateway.routes import problems
from gateway.routes.params import Id
from gateway.services import agent_settings
from models import Agent
from models.account_api import AgentUpdate

router = APIRouter(tags=["agents"])

AGENT_EXAMPLE = {
    "id": "01J9Z8Q6X3V5N2K7M4R1T0W8YC",
    "user_id": "01J9Z8Q6X3V5N2K7M4R1T0W8YB",
    "did": "did:web:confer.example:agents:01J9Z8Q6X3V5N2K7M4R1T0W8YC",
    "name": "Alice's agent",
    "description": "Answers questions about my papers.",
    "avatar_url": None,
    "primary_language": "en",
    "style": "friendly",
    "model_config": {
        job: {"provider": "offline", "model": "confer-offline", "temperature": None}
        for job in ("brain", "quick", "translation", "summarize")
    },
    "policies": {"default": "ask", "rules": []},
    "capabilities": [{"type": "qa", "scope": ["papers"], "languages": ["en"]}],
    "is_public": False,
}
_OK: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/json": {"example": AGENT_EXAMPLE}}}
}


@router.get("/v1/agents/me", summary="My main agent", responses={**_OK, **problems(401, 404)})
async def get_my_agent(current: Current, state: State) -> Agent:
    """The caller's main agent with its full configuration."""
    async with state.pool.acquire() as conn:
        return await agent_settings.get_own_agent(conn, user_id=current.user.id, agent_id=None)


@router.patch(
    "/v1/agents/me", summary="Update my main agent", responses={**_OK, **problems(401, 404, 422)}
)
async def patch_my_agent(
    data: AgentUpdate, current: Current, request: Request, state: State
) -> Agent:
    """Change name, description, avatar, language, style, `model_config` (providers of
    `GET /v1/providers`), `policies`, `capabilities` or `is_public`. Invalid values are 422
    naming the field."""
    return await agent_settings.update_own_agent(
        state.pool,
        state.clock,
        user_id=current.user.id,
        agent_id=None,
        data=data,
        ip=client_ip(request),
        extra_providers=state.settings.llm_providers,
    )


@router.get(
    "/v1/agents/{agent_id}", summary="One of my agents", responses={**_OK, **problems(401, 404)}
)
async def get_agent(agent_id: Id, current: Current, state: State) -> Agent:
    """One of the caller's agents by id (404 for anyone else's)."""
    async with state.pool.acquire() as conn:
        return await agent_settings.get_own_agent(conn, user_id=current.user.id, agent_id=agent_id)


@router.patch(
    "/v1/agents/{agent_id}",
    summary="Update one of my agents",
    responses={**_OK, **problems(401, 404, 422)},
)
async def patch_agent(
    agent_id: Id, data: AgentUpdate, current: Current, request: Request, state: State
) -> Agent:
    """Same as `PATCH /v1/agents/me`, for an agent chosen by id."""
    return await agent_settings.update_own_agent(
        state.pool,
        state.clock,
        user_id=current.user.id,
        agent_id=agent_id,
        data=data,
        ip=client_ip(request),
        extra_providers=state.settings.llm_providers,
    )
