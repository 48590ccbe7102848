"""An agent's memories, the knowledge base, ambient context and search (context-tables spec),
owner-only."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from gateway.deps import Current, State
from gateway.routes.params import Id, id_query
from gateway.services.search import ALL_SCOPES, SearchMode
from models.base import DIGITS_ONLY, TRUE_OR_FALSE
from models.context import (
    AmbientContextCreate,
    AmbientContextRow,
    KnowledgeCreate,
    KnowledgeRow,
    KnowledgeUpdate,
    MemoryCreate,
    MemoryRow,
    MemoryType,
    MemoryUpdate,
    SearchResults,
    SearchScope,
)

router = APIRouter(tags=["memory"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Not authenticated (problem+json)"},
    404: {"description": "Not found, or not yours (problem+json)"},
    422: {"description": "Invalid input (problem+json)"},
}


@router.post(
    "/v1/agents/{agent_id}/memories", status_code=201, summary="Add a memory", responses=_ERRORS
)
async def create_memory(
    agent_id: Id, data: MemoryCreate, current: Current, state: State
) -> MemoryRow:
    """Store a long-term memory of one of your agents (context-tables spec ``memoria``)."""
    return await state.context.memory.create_memory(current.user, agent_id, data)


@router.get("/v1/agents/{agent_id}/memories", summary="List memories", responses=_ERRORS)
async def list_memories(
    agent_id: Id,
    current: Current,
    state: State,
    type: MemoryType | None = None,
    include_expired: Annotated[bool, Query(), TRUE_OR_FALSE] = False,
    limit: Annotated[int, Query(ge=1, le=500), DIGITS_ONLY] = 100,
) -> list[MemoryRow]:
    """Your agent's memories, most important first."""
    return await state.context.memory.list_memories(
        current.user,
        agent_id,
        type=type,
        include_expired=include_expired,
        limit=limit,
    )


@router.get("/v1/agents/{agent_id}/memories/{memory_id}", summary="One memory", responses=_ERRORS)
async def get_memory(agent_id: Id, memory_id: Id, current: Current, state: State) -> MemoryRow:
    """One memory of your agent."""
    return await state.context.memory.get_memory(current.user, agent_id, memory_id)


@router.patch(
    "/v1/agents/{agent_id}/memories/{memory_id}", summary="Change a memory", responses=_ERRORS
)
async def update_memory(
    agent_id: Id, memory_id: Id, data: MemoryUpdate, current: Current, state: State
) -> MemoryRow:
    """Change the fields you send."""
    return await state.context.memory.update_memory(current.user, agent_id, memory_id, data)


@router.delete(
    "/v1/agents/{agent_id}/memories/{memory_id}",
    status_code=204,
    summary="Forget a memory",
    responses=_ERRORS,
)
async def delete_memory(agent_id: Id, memory_id: Id, current: Current, state: State) -> None:
    """Delete a memory for good."""
    await state.context.memory.delete_memory(current.user, agent_id, memory_id)


@router.post(
    "/v1/knowledge",
    status_code=201,
    summary="Add knowledge",
    responses={**_ERRORS, 200: {"description": "The same content already existed"}},
)
async def create_knowledge(
    data: KnowledgeCreate, current: Current, state: State, response: Response
) -> KnowledgeRow:
    """Add an entry to your knowledge base; identical content returns the existing entry (200)."""
    entry, created = await state.context.memory.create_knowledge(current.user, data)
    if not created:
        response.status_code = 200
    return entry


@router.get("/v1/knowledge", summary="List knowledge", responses=_ERRORS)
async def list_knowledge(
    current: Current,
    state: State,
    category: Annotated[str | None, Query(max_length=50)] = None,
    agent_id: Annotated[str | None, id_query("Only entries this agent may read")] = None,
    limit: Annotated[int, Query(ge=1, le=500), DIGITS_ONLY] = 100,
) -> list[KnowledgeRow]:
    """Your knowledge base by priority."""
    return await state.context.memory.list_knowledge(
        current.user,
        category=category,
        agent_id=agent_id or None,
        limit=limit,
    )


@router.get("/v1/knowledge/{entry_id}", summary="One knowledge entry", responses=_ERRORS)
async def get_knowledge(entry_id: Id, current: Current, state: State) -> KnowledgeRow:
    """One entry of your knowledge base."""
    return await state.context.memory.get_knowledge(current.user, entry_id)


@router.patch("/v1/knowledge/{entry_id}", summary="Change knowledge", responses=_ERRORS)
async def update_knowledge(
    entry_id: Id, data: KnowledgeUpdate, current: Current, state: State
) -> KnowledgeRow:
    """Change the fields you send; content identical to another entry is a 409."""
    return await state.context.memory.update_knowledge(current.user, entry_id, data)


@router.delete(
    "/v1/knowledge/{entry_id}", status_code=204, summary="Delete knowledge", responses=_ERRORS
)
async def delete_knowledge(entry_id: Id, current: Current, state: State) -> None:
    """Delete an entry for good."""
    await state.context.memory.delete_knowledge(current.user, entry_id)


@router.post(
    "/v1/ambient-context", status_code=201, summary="Record ambient context", responses=_ERRORS
)
async def record_ambient(
    data: AmbientContextCreate, current: Current, state: State
) -> AmbientContextRow:
    """Store a snapshot of your environment (servers, services, tasks, alerts, git state)."""
    return await state.context.memory.record_ambient(current.user, data)


@router.get("/v1/ambient-context/latest", summary="Latest ambient context", responses=_ERRORS)
async def latest_ambient(current: Current, state: State) -> AmbientContextRow | None:
    """The newest unexpired snapshot, or null."""
    return await state.context.memory.latest_ambient(current.user)


@router.get("/v1/search", summary="Search memories, knowledge and messages", responses=_ERRORS)
async def search(
    current: Current,
    state: State,
    q: Annotated[str, Query(min_length=1, max_length=1000)],
    scope: Annotated[list[SearchScope] | None, Query(max_length=3)] = None,
    method: SearchMode = "auto",
    project: Annotated[str | None, Query(max_length=255)] = None,
    domain: Annotated[str | None, Query(max_length=64)] = None,
    threshold: Annotated[float | None, Query(ge=-1, le=1)] = None,
    limit: Annotated[int, Query(ge=1, le=100), DIGITS_ONLY] = 20,
) -> SearchResults:
    """Full-text search always; semantic (pgvector) too when available. Hits name their method."""
    return await state.context.search.search(
        current.user,
        q,
        scopes=tuple(scope) if scope else ALL_SCOPES,
        method=method,
        project=project,
        domain=domain,
        threshold=threshold,
        limit=limit,
    )
