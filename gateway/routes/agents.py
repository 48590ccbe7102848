"""The caller's own agents: read and change their settings."""

from __future__ import annotations

from fastapi import APIRouter, Request

from gateway.deps import Current, State
from gateway.federation_auth import client_ip
from gateway.routes.problems import problems
from gateway.services import agent_settings
from models import Agent
from models.account_api import AgentUpdate

router = APIRouter(tags=["agents"])


@router.get("/v1/agents/me", summary="My main agent", responses=problems(401, 404))
async def get_my_agent(current: Current, state: State) -> Agent:
    """The caller's main agent with its full configuration."""
    async with state.pool.acquire() as conn:
        return await agent_settings.get_own_agent(conn, user_id=current.user.id, agent_id=None)


@router.patch("/v1/agents/me", summary="Update my main agent", responses=problems(401, 404, 422))
async def patch_my_agent(
    data: AgentUpdate, current: Current, request: Request, state: State
) -> Agent:
    """Change name, description, avatar, language, style, `model_config` (catalog providers),
    `policies`, `capabilities` or `is_public`. Invalid values are 422 naming the field."""
    return await agent_settings.update_own_agent(
        state.pool,
        state.clock,
        user_id=current.user.id,
        agent_id=None,
        data=data,
        ip=client_ip(request),
    )


@router.get("/v1/agents/{agent_id}", summary="One of my agents", responses=problems(401, 404))
async def get_agent(agent_id: str, current: Current, state: State) -> Agent:
    """One of the caller's agents by id (404 for anyone else's)."""
    async with state.pool.acquire() as conn:
        return await agent_settings.get_own_agent(conn, user_id=current.user.id, agent_id=agent_id)


@router.patch(
    "/v1/agents/{agent_id}", summary="Update one of my agents", responses=problems(401, 404, 422)
)
async def patch_agent(
    agent_id: str, data: AgentUpdate, current: Current, request: Request, state: State
) -> Agent:
    """Same as `PATCH /v1/agents/me`, for an agent chosen by id."""
    return await agent_settings.update_own_agent(
        state.pool,
        state.clock,
        user_id=current.user.id,
        agent_id=agent_id,
        data=data,
        ip=client_ip(request),
    )
