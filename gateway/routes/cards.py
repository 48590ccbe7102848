"""Agent Cards (``/.well-known/agent-card.json``) and NANDA AgentFacts, with ETag caching."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from gateway.deps import State
from gateway.errors import NotFoundError
from gateway.routes.params import Id
from gateway.services import cards, public_profiles
from gateway.store import public_agents as store
from gateway.store import users as users_store
from models import Agent

router = APIRouter(tags=["federation"])


def _cached(request: Request, document: dict[str, Any]) -> Response:
    """200 with ETag + Cache-Control, or 304 when ``If-None-Match`` matches (RFC 9110 §13.1.2)."""
    tag = cards.etag(document)
    headers = {
        "ETag": tag,
        "Cache-Control": cards.CARD_CACHE_CONTROL,
        "Access-Control-Allow-Origin": "*",
    }
    candidates = {t.strip() for t in request.headers.get("if-none-match", "").split(",")}
    if tag in candidates or tag.removeprefix("W/") in candidates or "*" in candidates:
        return Response(status_code=304, headers=headers)
    return JSONResponse(document, headers=headers)


async def _public_agent(state: State, agent_id: str) -> Agent:
    async with state.pool.acquire() as conn:
        agent = await store.get_public_agent(conn, id=agent_id)
    if agent is None:
        raise NotFoundError(f"no public agent {agent_id!r}")
    return agent


@router.get("/.well-known/agent-card.json", summary="The instance's A2A Agent Card")
async def instance_card(request: Request, state: State) -> Response:
    """A2A 1.0 card of the instance: ``/a2a`` reaches every public agent (one skill each)."""
    async with state.pool.acquire() as conn:
        ids = await store.list_public_agent_ids(conn)
        agents = [a for a in [await store.get_public_agent(conn, id=i) for i in ids] if a]
    max_age = state.settings.signature_max_age_seconds
    card = cards.instance_card(
        state.identity, agents, max_age=max_age, batch=cards.batch_limits(state.settings)
    )
    return _cached(request, card)


@router.get(
    "/agents/{agent_id}/.well-known/agent-card.json",
    summary="A public agent's A2A Agent Card",
    responses={404: {"description": "No such public agent"}},
)
async def agent_card(agent_id: Id, request: Request, state: State) -> Response:
    """A2A 1.0 card of a public agent (its JSON-RPC interface, skills, auth)."""
    agent = await _public_agent(state, agent_id)
    max_age = state.settings.signature_max_age_seconds
    card = cards.agent_card(
        state.identity, agent, max_age=max_age, batch=cards.batch_limits(state.settings)
    )
    return _cached(request, card)


@router.get(
    "/agents/{agent_id}/agent-facts.json",
    summary="A public agent's NANDA AgentFacts",
    responses={404: {"description": "No such public agent"}},
)
async def agent_facts(agent_id: Id, request: Request, state: State) -> Response:
    """NANDA AgentFacts (agentfacts-format v1) of a public agent."""
    agent = await _public_agent(state, agent_id)
    return _cached(request, cards.agent_facts(state.identity, agent))


@router.get(
    "/users/{username}/profile.json",
    summary="A user's public profile",
    responses={404: {"description": "No such user"}},
)
async def user_profile(username: str, request: Request, state: State) -> Response:
    """The name and avatar a user shows to other instances (``gateway.services.public_profiles``),
    with an ETag (``If-None-Match`` → 304)."""
    async with state.pool.acquire() as conn:
        user = await users_store.get_user_by_username(conn, username=username)
    if user is None:
        raise NotFoundError(f"no user {username!r}")
    return _cached(request, public_profiles.user_profile(user))


@router.get(
    "/agents/{agent_id}/profile.json",
    summary="An agent's public profile",
    responses={404: {"description": "No such agent"}},
)
async def agent_profile(agent_id: Id, request: Request, state: State) -> Response:
    """The name and avatar an agent shows to other instances, with an ETag."""
    async with state.pool.acquire() as conn:
        agent = await users_store.get_agent(conn, id=agent_id)
        active = agent is not None and await users_store.account_active(conn, user_id=agent.user_id)
    if agent is None or not active:
        raise NotFoundError(f"no agent {agent_id!r}")
    return _cached(request, public_profiles.agent_profile(agent))
