"""DID documents (did:web §3.2): the instance's, and one per local user and agent."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from gateway.deps import State
from gateway.errors import NotFoundError
from gateway.routes import answer_head, problems
from gateway.routes.params import Id
from gateway.services.identity import AGENT_FACTS_SERVICE_TYPE
from gateway.services.public_profiles import agent_profile, profile_service, user_profile
from gateway.store import system as system_store
from gateway.store import users as users_store

router = APIRouter(tags=["identity"])

DID_JSON = "application/did+json"
_HEADERS = {"Cache-Control": "max-age=60", "Access-Control-Allow-Origin": "*"}


def _document(doc: dict[str, Any], request: Request | None = None) -> Response:
    """The document with a strong ETag; ``If-None-Match`` on it gets 304 (RFC 9110 §13.1.2), so
    peers revalidating their ``peer_agents`` cache do not download it again."""
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    etag = f'"{hashlib.sha256(canonical).hexdigest()[:32]}"'
    headers = {**_HEADERS, "ETag": etag}
    if request is not None:
        candidates = {t.strip() for t in request.headers.get("if-none-match", "").split(",")}
        if etag in candidates or f"W/{etag}" in candidates:
            return Response(status_code=304, headers=headers)
    return JSONResponse(doc, media_type=DID_JSON, headers=headers)


@router.get("/.well-known/did.json", summary="The instance DID document")
async def instance_did_document(request: Request, state: State) -> Response:
    """The instance's DID document: its federation keys (Multikey, Ed25519) and its own A2A
    endpoint (``/a2a``), so the instance itself is a peer that signs — a group's home
    instance signs the group's membership events and relays as itself."""
    identity = state.identity
    endpoint = f"{identity.public_url}/a2a"
    return _document(identity.did_document(identity.did, endpoint=endpoint), request)


@router.get("/users/{username}/did.json", summary="A user's DID document", responses=problems(404))
async def user_did_document(username: str, request: Request, state: State) -> Response:
    """``did:web:<host>:users:<username>``: keys allowed to speak for the user, A2A endpoint,
    public profile (versioned by its content, so a changed profile changes the document)."""
    async with state.pool.acquire() as conn:
        user = await users_store.get_user_by_username(conn, username=username)
    if user is None:
        raise NotFoundError(f"no user {username!r}")
    identity = state.identity
    profile = profile_service(
        user.did,
        f"{identity.public_url}/users/{username}/profile.json",
        user_profile(user),
    )
    return _document(
        identity.did_document(
            user.did, endpoint=identity.endpoint_for("users", username), extra_services=[profile]
        ),
        request,
    )


@router.get(
    "/agents/{agent_id}/did.json", summary="An agent's DID document", responses=problems(404)
)
async def agent_did_document(agent_id: Id, request: Request, state: State) -> Response:
    """``did:web:<host>:agents:<agent id>``: keys allowed to speak for the agent, A2A endpoint."""
    async with state.pool.acquire() as conn:
        agent = await users_store.get_agent(conn, id=agent_id)
        active = agent is not None and await users_store.account_active(conn, user_id=agent.user_id)
    if agent is None or not active:
        raise NotFoundError(f"no agent {agent_id!r}")  # a deleted account's agent is gone too
    identity = state.identity
    extra = [
        profile_service(
            agent.did,
            f"{identity.public_url}/agents/{agent_id}/profile.json",
            agent_profile(agent),
        )
    ]
    if agent.is_public:  # NANDA AgentFacts, cached by peers in peer_agents.agent_facts_json
        extra.append(
            {
                "id": f"{agent.did}#agentfacts",
                "type": AGENT_FACTS_SERVICE_TYPE,
                "serviceEndpoint": f"{identity.public_url}/agents/{agent_id}/agent-facts.json",
            }
        )
    endpoint = identity.endpoint_for("agents", agent_id)
    doc = identity.did_document(agent.did, endpoint=endpoint, extra_services=extra)
    return _document(doc, request)


HEALTH_ACQUIRE_SECONDS = 1.0


@router.get(
    "/healthz",
    summary="Liveness and database check",
    tags=["system"],
    responses=problems(503, s503="The database is busy (see Retry-After)"),
)
async def healthz(state: State) -> dict[str, str]:
    """``{"status": "ok", "did": …}`` when the database answers; 503 ``database_busy`` (with
    ``Retry-After``) when no pool connection comes free within :data:`HEALTH_ACQUIRE_SECONDS`,
    so a probe never queues behind a saturated pool."""
    async with state.pool.acquire(timeout=HEALTH_ACQUIRE_SECONDS) as conn:
        await system_store.ping(conn)
    return {"status": "ok", "did": state.identity.did}


answer_head(router, "/healthz")
