"""The concept memory over REST (``/v1/concepts…``): the MCP concept tools' operations, acting
on the caller's main agent or on ``agent_id`` (one of theirs). Writes run in one transaction;
they are not MCP calls, so they leave no ``mcp_audit_log`` row."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import Field, StrictBool

from gateway.db import transaction
from gateway.deps import Current, State
from gateway.services import concept_context, concept_writes, concepts
from gateway.state import AppState
from models import User
from models.base import DIGITS_ONLY, TRUE_OR_FALSE, ConferModel
from models.concepts import (
    ConceptType,
    MeasurementCreate,
    OccurrenceCreate,
    RelationCreate,
    StatusChange,
    VaccineCreate,
)

router = APIRouter(tags=["concepts"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Not authenticated (problem+json)"},
    404: {"description": "No such concept, domain or agent of yours (problem+json)"},
    422: {"description": "Invalid input (problem+json)"},
}
AgentId = Annotated[
    str | None, Query(max_length=26, description="one of your agents; default your main agent")
]
DomainSlug = Annotated[str | None, Query(max_length=64)]
ProjectName = Annotated[str | None, Query(max_length=200)]


def deps(state: AppState) -> concepts.ConceptDeps:
    """The concept services' dependencies out of the app state."""
    return concepts.ConceptDeps(state.pool, state.context.embedder, state.clock)


class ThreadAudit(ConferModel):
    """Body of ``POST /v1/concepts/audit-thread``."""

    concepts: list[Annotated[str, Field(min_length=1, max_length=1000)]] = Field(
        min_length=1, max_length=20
    )
    project: Annotated[str, Field(max_length=200)] | None = None
    include_graph: StrictBool = True


@router.get("/v1/concepts/search", summary="Search concepts", responses=_ERRORS)
async def search_concepts(
    current: Current,
    state: State,
    query: Annotated[str, Query(min_length=1, max_length=1000)],
    domain: DomainSlug = None,
    project: ProjectName = None,
    threshold: Annotated[float, Query(ge=-1, le=1)] = 0.3,
    limit: Annotated[int, Query(ge=1, le=100), DIGITS_ONLY] = 10,
    contested: Annotated[bool, Query(), TRUE_OR_FALSE] = True,
    agent_id: AgentId = None,
) -> dict[str, Any]:
    """MCP ``confer_search_concepts``; ``contested=false`` skips the dispute check (bench)."""
    return await concepts.search(
        deps(state),
        current.user,
        query=query,
        domain=domain,
        project=project,
        threshold=threshold,
        limit=limit,
        contested=contested,
        agent_id=agent_id,
    )


@router.get("/v1/concepts/active", summary="Active concepts by type", responses=_ERRORS)
async def active_concepts(
    current: Current,
    state: State,
    domain: DomainSlug = None,
    project: ProjectName = None,
    concept_type: ConceptType | None = None,
    limit: Annotated[int, Query(ge=1, le=100), DIGITS_ONLY] = 15,
    agent_id: AgentId = None,
) -> dict[str, Any]:
    """MCP ``confer_get_active_concepts``."""
    return dict(
        await concepts.active_by_type(
            deps(state),
            current.user,
            domain=domain,
            project=project,
            concept_type=concept_type,
            limit=limit,
            agent_id=agent_id,
        )
    )


@router.get("/v1/concepts/graph", summary="Graph around a concept", responses=_ERRORS)
async def concept_graph(
    current: Current,
    state: State,
    name: Annotated[str, Query(min_length=1, max_length=1000)],
    depth: Annotated[int, Query(ge=1, le=3), DIGITS_ONLY] = 1,
    agent_id: AgentId = None,
) -> dict[str, Any]:
    """MCP ``confer_get_concept_graph``."""
    return await concepts.concept_graph(
        deps(state), current.user, name=name, depth=depth, agent_id=agent_id
    )


@router.get("/v1/concepts/domains/{domain}", summary="Domain summary", responses=_ERRORS)
async def domain_summary(
    domain: str, current: Current, state: State, agent_id: AgentId = None
) -> dict[str, Any]:
    """MCP ``confer_get_domain_summary``."""
    return await concepts.domain_summary(
        deps(state), current.user, domain=domain, agent_id=agent_id
    )


@router.get("/v1/concepts/context", summary="Session context", responses=_ERRORS)
async def session_context(
    current: Current,
    state: State,
    project: ProjectName = None,
    domains: Annotated[list[str] | None, Query(max_length=20)] = None,
    limit: Annotated[int, Query(ge=1, le=200), DIGITS_ONLY] = 20,
    format: Literal["markdown", "json"] = "json",
    agent_id: AgentId = None,
) -> dict[str, Any]:
    """MCP ``confer_get_concept_context`` (``domains`` may repeat)."""
    return await concept_context.session_context(
        deps(state),
        current.user,
        project=project,
        domains=domains,
        limit=limit,
        format=format,
        agent_id=agent_id,
    )


@router.get("/v1/concepts/alerts", summary="Health alerts", responses=_ERRORS)
async def alerts(
    current: Current, state: State, project: ProjectName = None, agent_id: AgentId = None
) -> dict[str, Any]:
    """MCP ``confer_get_concept_alerts``."""
    return await concept_context.alerts(
        deps(state), current.user, project=project, agent_id=agent_id
    )


@router.post("/v1/concepts/audit-thread", summary="Audit a thread of concepts", responses=_ERRORS)
async def audit_thread(
    data: ThreadAudit, current: Current, state: State, agent_id: AgentId = None
) -> dict[str, Any]:
    """MCP ``confer_audit_concept_thread`` (a read, POST for the list body)."""
    return await concept_context.audit_thread(
        deps(state),
        current.user,
        names=data.concepts,
        project=data.project,
        include_graph=data.include_graph,
        agent_id=agent_id,
    )


async def _write(state: AppState, user: User, write: Any, data: Any, agent_id: str | None) -> Any:
    async with transaction(state.pool) as tx:
        result, _ = await write(tx, deps(state), user, data, agent_id)
    return result


@router.post("/v1/concepts/occurrences", status_code=201, responses=_ERRORS)
async def record_occurrence(
    data: OccurrenceCreate, current: Current, state: State, agent_id: AgentId = None
) -> dict[str, Any]:
    """MCP ``confer_record_concept_occurrence``."""
    return dict(
        await _write(state, current.user, concept_writes.record_occurrence_in, data, agent_id)
    )


@router.post("/v1/concepts/relations", status_code=201, responses=_ERRORS)
async def record_relation(
    data: RelationCreate, current: Current, state: State, agent_id: AgentId = None
) -> dict[str, Any]:
    """MCP ``confer_record_concept_relation``."""
    return dict(
        await _write(state, current.user, concept_writes.record_relation_in, data, agent_id)
    )


@router.post("/v1/concepts/status", responses=_ERRORS)
async def change_status(
    data: StatusChange, current: Current, state: State, agent_id: AgentId = None
) -> dict[str, Any]:
    """MCP ``confer_promote_concept`` / ``confer_archive_concept``."""
    return dict(await _write(state, current.user, concept_writes.change_status_in, data, agent_id))


@router.put("/v1/concepts/vaccines", responses=_ERRORS)
async def declare_vaccine(
    data: VaccineCreate, current: Current, state: State, agent_id: AgentId = None
) -> dict[str, Any]:
    """Declare (or redeclare by name) a directive the graph should hold (missing vaccines)."""
    return dict(
        await _write(state, current.user, concept_writes.declare_vaccine_in, data, agent_id)
    )


@router.post("/v1/concepts/measurements", status_code=201, responses=_ERRORS)
async def record_measurement(
    data: MeasurementCreate, current: Current, state: State, agent_id: AgentId = None
) -> dict[str, Any]:
    """MCP ``confer_record_measurement`` (the declared agent is ``rest``)."""
    async with transaction(state.pool) as tx:
        result, _ = await concept_writes.record_measurement_in(
            tx, deps(state), current.user, data, agent_id, "rest"
        )
    return result
