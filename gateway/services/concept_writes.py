"""Writing the concept memory: occurrences, relations, status changes, vaccines, measurements.

Each ``*_in`` function does its work inside a caller's :class:`~gateway.db.Transaction` and
returns ``(result fields, target id)`` — the shape of an MCP audited write action
(:func:`gateway.mcp.audit.audited_write`), so the write and its audit row commit together; REST
routes run the same function in a plain transaction. A concept's text is (re)embedded after the
commit (``tx.call_after``) when an embeddings endpoint and pgvector exist.
"""

from __future__ import annotations

import functools
from typing import Any

from gateway.db import Transaction
from gateway.errors import ConceptNotFoundError, ValidationFailedError
from gateway.ids import new_id
from gateway.services.concept_weight import HALF_LIFE, MAX_WEIGHT, USE_INCREMENT, fold
from gateway.services.concepts import ConceptDeps, agent_for
from gateway.services.memory import index_text
from gateway.store import concept_graph as graph_store
from gateway.store import concept_health as health_store
from gateway.store import concepts as store
from gateway.store import conversations as conv_store
from models import User
from models.concepts import (
    MeasurementCreate,
    OccurrenceCreate,
    RelationCreate,
    StatusChange,
    VaccineCreate,
)

FRAME_PREFIX = "frame:"


async def record_occurrence_in(
    tx: Transaction, deps: ConceptDeps, user: User, data: OccurrenceCreate, agent_id: str | None
) -> tuple[dict[str, Any], str | None]:
    """One use of a concept by a session or conversation (creating the concept when ``type``
    is given). Returns ``{"concept_id", "created", "weight", "status"}``.

    Raises ValidationFailedError (no session nor conversation, foreign conversation, unknown
    concept without ``type``)."""
    conn = tx.conn
    if data.session is None and data.conversation_id is None:
        raise ValidationFailedError("give session or conversation_id")
    if data.conversation_id is not None:
        member = await conv_store.get_membership(
            conn, conversation_id=data.conversation_id, user_id=user.id
        )
        if member is None:
            raise ValidationFailedError("conversation_id: not one of your conversations")
    agent = await agent_for(conn, user, agent_id)
    now = deps.clock.now()
    concept = await store.get_concept(conn, agent_id=agent, name=data.concept)
    created = False
    if concept is None:
        if data.type is None:
            raise ValidationFailedError(f"no concept {data.concept!r}: give type to create it")
        # Two first uses at once both miss the read above; the insert lets one create the
        # concept and the other count its use on that one.
        created = await store.insert_concept(
            conn,
            id=new_id(),
            user_id=user.id,
            agent_id=agent,
            name=data.concept,
            name_key=fold(data.concept),
            type=data.type,
            description=data.description or "",
            now=now,
        )
        concept = await store.get_concept(conn, agent_id=agent, name=data.concept)
        assert concept is not None
    concept_id = concept["id"]
    if data.domains:
        domains = await store.ensure_domains(
            conn, agent_id=agent, slugs=data.domains, new_ids=[new_id() for _ in data.domains]
        )
        await store.link_domains(conn, concept_id=concept_id, domain_ids=list(domains.values()))
    await graph_store.insert_occurrence(
        conn,
        id=new_id(),
        concept_id=concept_id,
        session=data.session,
        conversation_id=data.conversation_id,
        project=data.project,
        note=data.note,
        seen_at=now,
    )
    await store.update_use(
        conn,
        concept_id=concept_id,
        now=now,
        project=data.project,
        increment=USE_INCREMENT,
        max_weight=MAX_WEIGHT,
        half_life_s=HALF_LIFE.total_seconds(),
    )
    row = await store.get_concept(conn, agent_id=agent, name=data.concept)
    assert row is not None
    if created:
        tx.call_after(
            functools.partial(_index, deps, concept_id, f"{row['name']}\n{row['description']}")
        )
    result = {"concept_id": concept_id, "created": created}
    return {**result, "weight": row["weight"], "status": row["status"]}, concept_id


async def record_relation_in(
    tx: Transaction, deps: ConceptDeps, user: User, data: RelationCreate, agent_id: str | None
) -> tuple[dict[str, Any], str | None]:
    """An edge between two existing concepts, or ``interpreted_under`` to ``frame:<alias>``
    (stored apart). The two-way lock: a ``frame:`` target needs ``interpreted_under`` and
    ``interpreted_under`` needs a ``frame:`` target. Returns ``{"relation_id", "kind"}``.

    Raises ValidationFailedError (lock broken) or ConceptNotFoundError."""
    conn = tx.conn
    is_frame = data.target.startswith(FRAME_PREFIX)
    if is_frame != (data.kind == "interpreted_under"):
        raise ValidationFailedError(
            "interpreted_under needs a 'frame:<alias>' target, and only it may name a frame"
        )
    agent = await agent_for(conn, user, agent_id)
    source = await store.get_concept(conn, agent_id=agent, name=data.source)
    if source is None:
        raise ConceptNotFoundError(f"no concept {data.source!r}")
    if is_frame:
        alias = data.target[len(FRAME_PREFIX) :].strip()
        if not alias:
            raise ValidationFailedError("target: 'frame:' needs an alias")
        reference = await graph_store.upsert_frame_reference(
            conn,
            frame_id=new_id(),
            reference_id=new_id(),
            agent_id=agent,
            alias=alias,
            concept_id=source["id"],
            notes=data.notes,
        )
        return {"relation_id": reference, "kind": data.kind}, reference
    target = await store.get_concept(conn, agent_id=agent, name=data.target)
    if target is None:
        raise ConceptNotFoundError(f"no concept {data.target!r}")
    if target["id"] == source["id"]:
        raise ValidationFailedError("a concept cannot relate to itself")
    relation = await graph_store.upsert_relation(
        conn,
        id=new_id(),
        agent_id=agent,
        source_id=source["id"],
        target_id=target["id"],
        kind=data.kind,
        notes=data.notes,
    )
    return {"relation_id": relation, "kind": data.kind}, relation


async def change_status_in(
    tx: Transaction, deps: ConceptDeps, user: User, data: StatusChange, agent_id: str | None
) -> tuple[dict[str, Any], str | None]:
    """Promote (``active``) or archive a concept. Returns ``{"concept_id", "status",
    "previous_status", "weight"}``. Raises ConceptNotFoundError.

    Promoting also lifts the weight to at least :data:`USE_INCREMENT` (one use's worth) as of
    now: a faded concept promoted with its old weight would turn dormant again at the decay
    job's next pass."""
    agent = await agent_for(tx.conn, user, agent_id)
    concept = await store.get_concept(tx.conn, agent_id=agent, name=data.concept)
    if concept is None:
        raise ConceptNotFoundError(f"no concept {data.concept!r}")
    promote = data.status == "active"
    await store.update_status(
        tx.conn,
        concept_id=concept["id"],
        status=data.status,
        now=deps.clock.now(),
        floor_weight=USE_INCREMENT if promote else None,
        half_life_s=HALF_LIFE.total_seconds() if promote else None,
    )
    row = await store.get_concept(tx.conn, agent_id=agent, name=data.concept)
    assert row is not None
    result = {"concept_id": concept["id"], "status": data.status, "weight": row["weight"]}
    return {**result, "previous_status": concept["status"]}, concept["id"]


async def declare_vaccine_in(
    tx: Transaction, deps: ConceptDeps, user: User, data: VaccineCreate, agent_id: str | None
) -> tuple[dict[str, Any], str | None]:
    """Declare (or redeclare by name) a directive. Returns ``{"vaccine_id"}``.

    Raises ValidationFailedError when the scope and ``applicable_projects`` disagree."""
    if (data.scope == "global") == bool(data.applicable_projects):
        raise ValidationFailedError(
            "applicable_projects: required for project_specific, empty for global"
        )
    agent = await agent_for(tx.conn, user, agent_id)
    fields = {**data.model_dump(), "terms": sorted({fold(t) for t in data.terms})}
    vaccine = await health_store.insert_vaccine(tx.conn, id=new_id(), agent_id=agent, fields=fields)
    return {"vaccine_id": vaccine}, vaccine


async def record_measurement_in(
    tx: Transaction,
    deps: ConceptDeps,
    user: User,
    data: MeasurementCreate,
    agent_id: str | None,
    declared_agent: str,
) -> tuple[dict[str, Any], str | None]:
    """A measurement with its domain links (outside the concept tables, so never searched).
    Returns ``{"id", "created_at"}``. Raises ValidationFailedError for a domain slug the
    graph does not have (nothing is written)."""
    agent = await agent_for(tx.conn, user, agent_id)
    slugs = sorted(set(data.domains))
    domains = await store.get_domain_ids(tx.conn, agent_id=agent, slugs=slugs)
    unknown = [s for s in slugs if s not in domains]
    if unknown:
        raise ValidationFailedError(f"domains: unknown slug(s) {', '.join(unknown)}")
    measurement_id = new_id()
    created_at = await health_store.insert_measurement(
        tx.conn,
        id=measurement_id,
        user_id=user.id,
        agent_id=agent,
        fields=data.model_dump(),
        declared_agent=declared_agent,
        domain_ids=list(domains.values()),
    )
    return {"id": measurement_id, "created_at": created_at.isoformat()}, measurement_id


async def _index(deps: ConceptDeps, concept_id: str, text: str) -> None:
    await index_text(
        deps.pool, deps.embedder, owner_table="concept", owner_id=concept_id, text=text
    )
