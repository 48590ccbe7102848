"""Concept memory: concepts, relations, the ``contested`` field, health alerts, measurements
(semantic-memory MCP spec; tables of migration 0015).

``…Create`` are request bodies (also the MCP write tools' arguments), the others responses.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictFloat, StringConstraints

from .base import ConferModel, Timestamp, Ulid

ConceptType = Literal["principle", "pattern", "event"]
ConceptStatus = Literal["active", "dormant", "archived"]
RelationKind = Literal["depends_on", "refines", "contradicts", "supersedes", "related_to"]
"""Relations between two concepts; ``interpreted_under`` (concept → frame) is kept apart."""
EdgeKind = Literal[RelationKind, "interpreted_under"]
Outcome = Literal["resolved", "partially_resolved", "not_resolved", "not_yet_observable"]
"""Measurement outcome (spec: resolvio, resolvio_parcial, no_resolvio, aun_no_observable)."""
Severity = Literal["critical", "moderate", "low"]
ContestedState = Literal["none", "contested", "unknown"]

ConceptName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=64)]
Project = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Notes = Annotated[str, StringConstraints(max_length=8_000)]
LongText = Annotated[str, StringConstraints(max_length=32_000)]


class Challenger(ConferModel):
    """A concept that ``contradicts`` or ``supersedes`` another, with its own status."""

    name: str
    status: ConceptStatus
    relation: Literal["contradicts", "supersedes"]


class Contested(ConferModel):
    """Whether a concept is disputed: never null, never a silent "no".

    ``state`` is ``none`` (no challenger), ``contested`` (see the two lists) or ``unknown``
    (the check failed for the whole batch; the response carries a warning). It does not say
    who is right: read the edges with the concept graph. Challengers not archived (active or
    dormant) are in ``by_active``, archived ones in ``by_archived`` — an archived challenger may
    mean the dispute was settled or only that it decayed, so the two are never merged.
    """

    state: ContestedState
    by_active: list[Challenger] = Field(default_factory=list)
    by_archived: list[Challenger] = Field(default_factory=list)


class ConceptPublic(ConferModel):
    """One concept as the read tools return it.

    ``weight`` is as of ``weight_at`` (the decay schedule of
    :mod:`gateway.services.concept_weight`); ``peak_weight`` the highest weight it ever had.
    ``score``/``method`` are set by search only (cosine similarity or ``ts_rank``).
    """

    id: Ulid
    name: str
    type: ConceptType
    status: ConceptStatus
    weight: float
    peak_weight: float
    weight_at: Timestamp
    description: str
    projects: list[str]
    domains: list[str]
    occurrence_count: int
    last_seen_at: Timestamp | None = None
    score: float | None = None
    method: Literal["fulltext", "semantic"] | None = None
    contested: Contested | None = None


class Edge(ConferModel):
    """A relation of the graph, ``source`` → ``target`` (a frame alias for interpreted_under)."""

    source: str
    target: str
    kind: EdgeKind
    notes: str | None = None
    target_status: ConceptStatus | None = None


class Occurrence(ConferModel):
    """Where and when a concept was seen."""

    concept: str
    session: str | None = None
    conversation_id: Ulid | None = None
    project: str | None = None
    note: str | None = None
    seen_at: Timestamp


class OccurrenceCreate(ConferModel):
    """Record that a session or conversation used a concept; creates the concept when ``type``
    is given and it does not exist yet. Its weight grows by one use (decay applied first)."""

    concept: ConceptName
    session: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
    conversation_id: Ulid | None = None
    project: Project | None = None
    note: Notes | None = None
    type: ConceptType | None = None
    description: LongText | None = None
    domains: list[Slug] = Field(default_factory=list, max_length=20)


class RelationCreate(ConferModel):
    """An edge ``source`` → ``target``; ``interpreted_under`` needs ``target = "frame:<alias>"``
    and only it may name a frame (the spec's two-way lock)."""

    source: ConceptName
    target: ConceptName
    kind: EdgeKind
    notes: Notes | None = None


class StatusChange(ConferModel):
    """Promote (``active``) or archive (``archived``) a concept by name."""

    concept: ConceptName
    status: Literal["active", "archived"]


class MeasurementCreate(ConferModel):
    """A composite AI-human measurement (spec ``cs_record_measurement``); domains must exist."""

    context: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=32_000)
    ]
    outcome: Outcome
    ai_contribution: LongText = ""
    human_contribution: LongText = ""
    project: Annotated[str, StringConstraints(max_length=200)] = ""
    domains: list[Slug] = Field(default_factory=list, max_length=20)


class VaccineCreate(ConferModel):
    """Declare a directive the graph should hold: covered when an active concept whose name
    contains one of ``terms`` (accent- and case-insensitive) has weight >= ``min_weight`` — in
    any project for ``global``, in an applicable project for ``project_specific``."""

    name: ConceptName
    terms: Annotated[list[ConceptName], Field(min_length=1, max_length=20)]
    scope: Literal["global", "project_specific"] = "global"
    applicable_projects: list[Project] = Field(default_factory=list, max_length=50)
    min_weight: Annotated[StrictFloat, Field(ge=0, le=1000)] = 1.0
    description: LongText = ""


class Fracture(ConferModel):
    """A dormant or archived concept that active concepts still depend on."""

    concept: str
    status: ConceptStatus
    weight: float
    peak_weight: float
    severity: Severity
    dependents: list[dict[str, str | float | int]]


class MissingVaccine(ConferModel):
    """A declared directive the graph does not hold with enough weight."""

    name: str
    scope: Literal["global", "project_specific"]
    applicable_projects: list[str]
    terms: list[str]
    min_weight: float
    best_weight: float | None = None
