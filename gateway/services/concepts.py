"""Reading the concept memory of one agent: search, active concepts, the graph around a concept,
domain summaries, thread audits — and ``contested`` on every concept a search returns.

Search is semantic (pgvector + embeddings endpoint, cosine similarity >= threshold, 0.3 by
default) when both are available, full text otherwise (``ts_rank`` over name and description,
plus accent- and case-insensitive name containment). ``contested`` is filled by
:func:`mark_contested`: one aggregate query per batch; if it fails, every concept of the batch
says ``unknown`` and the batch carries a warning — never a silent "not contested".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import asyncpg

from gateway.agents.embeddings import Embedder, EmbeddingError
from gateway.clock import Clock
from gateway.errors import (
    AgentNotFoundError,
    ConceptNotFoundError,
    NotFoundError,
    ValidationFailedError,
)
from gateway.services.concept_weight import fold
from gateway.store import concept_graph as graph_store
from gateway.store import concepts as store
from gateway.store import search as search_store
from gateway.store import users as users_store
from models import User
from models.concepts import Challenger, ConceptPublic, Contested, Edge, Occurrence

log = logging.getLogger(__name__)

CONTESTED_WARNING = (
    "contested could not be verified for this batch: treat every concept as possibly contested"
)
_FIELDS = set(ConceptPublic.model_fields)


@dataclass(frozen=True)
class ConceptDeps:
    """What the concept services use: the pool, the embedder and the clock."""

    pool: asyncpg.Pool
    embedder: Embedder
    clock: Clock


async def agent_for(conn: asyncpg.Connection, user: User, agent_id: str | None) -> str:
    """The id of ``user``'s agent ``agent_id``, or of their main agent when None.

    Raises AgentNotFoundError (not theirs) or ValidationFailedError (no agent at all)."""
    if agent_id is not None:
        agent = await users_store.get_agent(conn, id=agent_id)
        if agent is None or agent.user_id != user.id:
            raise AgentNotFoundError(f"no agent {agent_id} of yours")
        return agent.id
    main = await users_store.get_main_agent(conn, user_id=user.id)
    if main is None:
        raise ValidationFailedError("you have no agent to hold a concept memory")
    return main.id


def public(row: dict[str, Any]) -> ConceptPublic:
    """A concept row (``store.CONCEPT_COLUMNS`` and maybe ``score``/``method``) as the API's
    model."""
    return ConceptPublic.model_validate({k: v for k, v in row.items() if k in _FIELDS})


async def mark_contested(pool: asyncpg.Pool, concepts: list[ConceptPublic]) -> list[str]:
    """Set ``contested`` on each concept with ONE aggregate query; returns the batch warnings
    (``[CONTESTED_WARNING]`` when the query failed, then every concept is ``unknown``)."""
    if not concepts:
        return []
    try:
        async with pool.acquire() as conn:
            challengers = await store.list_challengers(
                conn, concept_ids=list({c.id for c in concepts})
            )
    except (asyncpg.PostgresError, OSError, TimeoutError) as exc:
        log.warning("contested lookup failed for %d concepts: %s", len(concepts), exc)
        for concept in concepts:
            concept.contested = Contested(state="unknown")
        return [CONTESTED_WARNING]
    for concept in concepts:
        found = [Challenger.model_validate(c) for c in challengers.get(concept.id, [])]
        concept.contested = Contested(
            state="contested" if found else "none",
            by_active=[c for c in found if c.status != "archived"],
            by_archived=[c for c in found if c.status == "archived"],
        )
    return []


async def search(
    deps: ConceptDeps,
    user: User,
    *,
    query: str,
    domain: str | None = None,
    project: str | None = None,
    threshold: float = 0.3,
    limit: int = 10,
    contested: bool = True,
    agent_id: str | None = None,
) -> dict[str, Any]:
    """``{"query", "method", "concepts": [ConceptPublic…], "warnings"}``; ``method`` is
    ``semantic`` or ``fulltext`` (see module docstring)."""
    async with deps.pool.acquire() as conn:
        agent = await agent_for(conn, user, agent_id)
        rows, method = await _search_rows(
            deps, conn, agent, query, domain, project, threshold, limit
        )
    concepts = [public({**r, "method": method}) for r in rows]
    warnings = await mark_contested(deps.pool, concepts) if contested else []
    return {"query": query, "method": method, "concepts": concepts, "warnings": warnings}


async def _search_rows(
    deps: ConceptDeps,
    conn: asyncpg.Connection,
    agent: str,
    query: str,
    domain: str | None,
    project: str | None,
    threshold: float,
    limit: int,
) -> tuple[list[dict[str, Any]], str]:
    if deps.embedder.enabled and await search_store.vector_available(conn):
        try:
            [vector] = await deps.embedder.embed([query])
        except EmbeddingError as exc:
            log.warning("concept search falls back to full text: %s", exc)
        else:
            rows = await store.search_semantic(
                conn,
                agent_id=agent,
                vector=search_store.vector_literal(vector),
                dims=len(vector),
                model=deps.embedder.model,
                threshold=threshold,
                domain=domain,
                project=project,
                limit=limit,
            )
            return rows, "semantic"
    rows = await store.search_fulltext(
        conn,
        agent_id=agent,
        query=query,
        name_key=fold(query),
        domain=domain,
        project=project,
        limit=limit,
    )
    return rows, "fulltext"


async def active_by_type(
    deps: ConceptDeps,
    user: User,
    *,
    domain: str | None,
    project: str | None,
    concept_type: str | None,
    limit: int,
    agent_id: str | None = None,
) -> dict[str, list[ConceptPublic]]:
    """``{"principles", "patterns", "events"}``: active concepts by weight, ``limit`` each."""
    async with deps.pool.acquire() as conn:
        agent = await agent_for(conn, user, agent_id)
        rows = await store.list_active(
            conn,
            agent_id=agent,
            domains=[domain] if domain else None,
            project=project,
            type=concept_type,
            limit_per_type=limit,
        )
    grouped: dict[str, list[ConceptPublic]] = {"principles": [], "patterns": [], "events": []}
    for row in rows:
        grouped[row["type"] + "s"].append(public(row))
    return grouped


async def resolve(
    conn: asyncpg.Connection, agent: str, name: str, project: str | None = None
) -> tuple[dict[str, Any] | None, list[str]]:
    """The best concept for ``name`` (exact folded name first, then containment by weight) and
    the names of up to 4 other matches."""
    matches = await store.list_matching(
        conn, agent_id=agent, name_key=fold(name), project=project, limit=5
    )
    if not matches:
        return None, []
    return matches[0], [m["name"] for m in matches[1:]]


async def concept_graph(
    deps: ConceptDeps, user: User, *, name: str, depth: int = 1, agent_id: str | None = None
) -> dict[str, Any]:
    """The graph around a concept: ``{"concept", "alt_matches", "outgoing", "incoming",
    "nodes": [ConceptPublic + depth], "edges", "recent_occurrences"}`` (last 5 occurrences).

    ``depth`` 1-3 walks relations both ways. Raises ConceptNotFoundError."""
    if not 1 <= depth <= 3:
        raise ValidationFailedError("depth: between 1 and 3")
    async with deps.pool.acquire() as conn:
        agent = await agent_for(conn, user, agent_id)
        center, alternatives = await resolve(conn, agent, name)
        if center is None:
            raise ConceptNotFoundError(f"no concept matches {name!r}")
        seen = {center["id"]: 0}
        frontier = [center["id"]]
        edges: dict[tuple[str, str, str], dict[str, Any]] = {}
        for level in range(1, depth + 1):
            found = await graph_store.list_edges(conn, concept_ids=frontier)
            frontier = []
            for edge in found:
                edges[(edge["source"], edge["target"], edge["kind"])] = edge
                for end in (edge["source_id"], edge["target_id"]):
                    if end is not None and end not in seen:
                        seen[end] = level
                        frontier.append(end)
            if not frontier:
                break
        nodes = await graph_store.list_concepts_by_id(conn, concept_ids=list(seen))
        occurrences = await graph_store.list_recent_occurrences(
            conn, concept_ids=[center["id"]], per_concept=5
        )
    as_edges = [Edge.model_validate({k: e[k] for k in Edge.model_fields}) for e in edges.values()]
    return {
        "concept": public(center),
        "alt_matches": alternatives,
        "outgoing": [e for e in as_edges if e.source == center["name"]],
        "incoming": [e for e in as_edges if e.target == center["name"]],
        "nodes": [
            {**public(n).model_dump(mode="json", exclude_none=True), "depth": seen[n["id"]]}
            for n in sorted(nodes, key=lambda n: (seen[n["id"]], n["name"]))
        ],
        "edges": as_edges,
        "recent_occurrences": [Occurrence.model_validate(o) for o in occurrences],
    }


async def domain_summary(
    deps: ConceptDeps, user: User, *, domain: str, agent_id: str | None = None
) -> dict[str, Any]:
    """``{"domain", "by_type", "by_status", "top", "recent_sessions"}``. Raises NotFoundError
    (code ``not_found``) for a domain the graph does not have."""
    async with deps.pool.acquire() as conn:
        agent = await agent_for(conn, user, agent_id)
        summary = await graph_store.get_domain_summary(
            conn, agent_id=agent, slug=domain, top=10, sessions=5
        )
    if summary is None:
        raise NotFoundError(f"no domain {domain!r} in your concept memory")
    by_type: dict[str, int] = {}
    by_status: dict[str, int] = {}
    for row in summary["counts"]:
        by_type[row["type"]] = by_type.get(row["type"], 0) + row["n"]
        by_status[row["status"]] = by_status.get(row["status"], 0) + row["n"]
    return {
        "domain": domain,
        "total": sum(by_type.values()),
        "by_type": by_type,
        "by_status": by_status,
        "top": [public(r) for r in summary["top"]],
        "recent_sessions": summary["recent_sessions"],
    }
