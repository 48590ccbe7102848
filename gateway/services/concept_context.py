"""Composite reads of the concept memory: session context, session opening, thread audit and
health alerts (semantic-memory MCP spec ``cs_get_session_context``, ``cs_session_open``,
``cs_audit_thread``, ``cs_get_alerts``)."""

from __future__ import annotations

from typing import Any

from gateway.services.concept_weight import severity
from gateway.services.concepts import (
    ConceptDeps,
    agent_for,
    mark_contested,
    public,
    resolve,
    search,
)
from gateway.store import concept_graph as graph_store
from gateway.store import concept_health as health_store
from gateway.store import concepts as store
from models import User
from models.concepts import ConceptPublic, Fracture, MissingVaccine


async def session_context(
    deps: ConceptDeps,
    user: User,
    *,
    project: str | None,
    domains: list[str] | None,
    limit: int = 20,
    format: str = "markdown",
    agent_id: str | None = None,
) -> dict[str, Any]:
    """Active concepts for a work session, principles > patterns > events, then weight; any of
    ``domains``. ``{"format", "concepts", "warnings"}`` plus ``"markdown"`` for that format."""
    async with deps.pool.acquire() as conn:
        agent = await agent_for(conn, user, agent_id)
        rows = await store.list_active(
            conn,
            agent_id=agent,
            domains=domains or None,
            project=project,
            type=None,
            limit_per_type=limit,
        )
    concepts = [public(r) for r in rows[:limit]]
    warnings = await mark_contested(deps.pool, concepts)
    result: dict[str, Any] = {"format": format, "concepts": concepts, "warnings": warnings}
    if format == "markdown":
        result["markdown"] = render_markdown(concepts, warnings, project, domains)
    return result


def render_markdown(
    concepts: list[ConceptPublic],
    warnings: list[str],
    project: str | None,
    domains: list[str] | None,
) -> str:
    """The session context as markdown: a ``[WARNING]`` line in the header when contested could
    not be checked, and ``[CONTESTED] by: …`` under each disputed concept."""
    scope = ", ".join(filter(None, [f"project {project}" if project else None, *(domains or [])]))
    lines = [f"# Concept memory{f' ({scope})' if scope else ''}"]
    lines += [f"> [WARNING] {w}" for w in warnings]
    sections = (("Principles", "principle"), ("Patterns", "pattern"), ("Events", "event"))
    for heading, kind in sections:
        group = [c for c in concepts if c.type == kind]
        if not group:
            continue
        lines += ["", f"## {heading}"]
        for c in group:
            lines.append(f"- **{c.name}** (weight {c.weight:.2f}): {c.description}".rstrip(": "))
            if c.contested is not None and c.contested.state == "contested":
                by = [f"{x.name} ({x.status}, {x.relation})" for x in c.contested.by_active]
                by += [f"{x.name} ({x.status}, {x.relation})" for x in c.contested.by_archived]
                lines.append(f"  [CONTESTED] by: {', '.join(by)}")
    return "\n".join(lines) + "\n"


async def session_open(
    deps: ConceptDeps,
    user: User,
    *,
    topic: str,
    queries: list[str],
    domain: str | None,
    project: str | None,
    limit_per_query: int = 5,
    agent_id: str | None = None,
) -> dict[str, Any]:
    """Several searches and the alerts in one call: ``{"topic", "concepts_ranked" (by name,
    best score first), "concepts_per_query", "alerts", "warnings"}``. ``contested`` is checked
    once for the union of all queries' concepts."""
    per_query: dict[str, list[ConceptPublic]] = {}
    for query in queries:
        found = await search(
            deps,
            user,
            query=query,
            domain=domain,
            project=project,
            limit=limit_per_query,
            contested=False,
            agent_id=agent_id,
        )
        per_query[query] = found["concepts"]
    best: dict[str, ConceptPublic] = {}
    for concept in (c for hits in per_query.values() for c in hits):
        kept = best.get(concept.name)
        if kept is None or (concept.score or 0) > (kept.score or 0):
            best[concept.name] = concept
    every = [c for hits in per_query.values() for c in hits]
    warnings = await mark_contested(deps.pool, every)
    return {
        "topic": topic,
        "concepts_ranked": sorted(best.values(), key=lambda c: -(c.score or 0)),
        "concepts_per_query": per_query,
        "alerts": await alerts(deps, user, project=project, agent_id=agent_id),
        "warnings": warnings,
    }


async def audit_thread(
    deps: ConceptDeps,
    user: User,
    *,
    names: list[str],
    project: str | None,
    include_graph: bool = True,
    agent_id: str | None = None,
) -> dict[str, Any]:
    """Coverage of a thread of 1-20 concept names (matched accent- and case-insensitively):
    ``{"summary": {total, found, missing, by_status}, "coverage": [...]}``."""
    coverage: list[dict[str, Any]] = []
    async with deps.pool.acquire() as conn:
        agent = await agent_for(conn, user, agent_id)
        for name in names:
            match, alternatives = await resolve(conn, agent, name, project)
            if match is None:
                coverage.append({"thread_name": name, "matched_concept": None})
                continue
            entry: dict[str, Any] = {
                "thread_name": name,
                "matched_concept": match["name"],
                "status": match["status"],
                "weight": match["weight"],
                "type": match["type"],
                "domains": match["domains"],
                "last_seen": match["last_seen_at"],
                "alt_matches": alternatives,
            }
            if include_graph:
                entry.update(await _neighbourhood(conn, match))
            coverage.append(entry)
    by_status: dict[str, int] = {}
    for entry in coverage:
        if entry["matched_concept"] is not None:
            by_status[entry["status"]] = by_status.get(entry["status"], 0) + 1
    found = sum(by_status.values())
    return {
        "summary": {
            "total": len(names),
            "found": found,
            "missing": len(names) - found,
            "by_status": by_status,
        },
        "coverage": coverage,
    }


async def _neighbourhood(conn: Any, match: dict[str, Any]) -> dict[str, Any]:
    edges = await graph_store.list_edges(conn, concept_ids=[match["id"]])
    occurrences = await graph_store.list_recent_occurrences(
        conn, concept_ids=[match["id"]], per_concept=3
    )
    shape = ("source", "target", "kind", "notes")
    return {
        "outgoing_relations": [
            {k: e[k] for k in shape} for e in edges if e["source"] == match["name"]
        ][:5],
        "incoming_relations": [
            {k: e[k] for k in shape} for e in edges if e["target"] == match["name"]
        ][:5],
        "recent_occurrences": occurrences,
    }


async def alerts(
    deps: ConceptDeps, user: User, *, project: str | None, agent_id: str | None = None
) -> dict[str, Any]:
    """``{"fractures": [Fracture…], "missing_vaccines": [MissingVaccine…]}``.

    Fractures: dormant/archived concepts with active dependents, severity by
    :func:`gateway.services.concept_weight.severity`. Missing vaccines: declared directives no
    active concept covers with ``min_weight`` — a global one anywhere in the graph (so one
    sedimented in any project protects all), a project-specific one only in ``project``, and
    only when ``project`` is one of its projects."""
    async with deps.pool.acquire() as conn:
        agent = await agent_for(conn, user, agent_id)
        fractures = await health_store.list_fractures(conn, agent_id=agent, project=project)
        vaccines = await health_store.list_vaccine_coverage(conn, agent_id=agent, project=project)
    return {
        "fractures": [
            Fracture.model_validate({**f, "severity": severity(f["peak_weight"], f["dependents"])})
            for f in fractures
        ],
        "missing_vaccines": [
            MissingVaccine.model_validate(v)
            for v in vaccines
            if v["best_weight"] is None or v["best_weight"] < v["min_weight"]
        ],
    }
