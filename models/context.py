"""The own agent's context: memories, knowledge, ambient context, search, audit (seeds 000, 004).

Row types mirror the tables of migration 0006; ``…Create`` / ``…Update`` are request bodies and
``…Public`` responses, as in ``models.api``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, StrictInt, StringConstraints

from .base import ConferModel, StoredJson, Timestamp, Ulid

MemoryType = Literal["preference", "fact", "decision", "learning", "procedure"]
"""``agent_memories.type`` (context-tables spec: preferencia, hecho, decision, aprendizaje,
procedimiento)."""

SearchMethod = Literal["fulltext", "semantic"]
"""Which engine produced a search result: PostgreSQL full-text search or pgvector similarity."""

SearchScope = Literal["memories", "knowledge", "messages"]

Text = Annotated[str, StringConstraints(min_length=1, max_length=32_000)]
Label = Annotated[str, StringConstraints(min_length=1, max_length=255)]
Domain = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Snapshot = list[StoredJson] | dict[str, StoredJson]
"""One part of an ambient snapshot (context-tables spec ``contexto_ambiental``, ``JSONB``): a list
or an object, never a bare scalar."""
Priority = Annotated[StrictInt, Field(ge=-1_000_000, le=1_000_000)]
"""Knowledge priority: higher comes first into the context (an ``INTEGER`` column)."""


class MemoryRow(ConferModel):
    """Table ``agent_memories``: one long-term memory of an agent (context-tables spec ``memoria``).

    ``importance`` is 1–10 (higher enters a context first); ``uses`` counts how often the memory
    entered a context and ``last_used_at`` when it last did; ``expires_at`` None = never.
    """

    id: Ulid
    agent_id: Ulid
    type: MemoryType
    content: str
    importance: int
    uses: int
    last_used_at: Timestamp | None = None
    origin_conversation_id: Ulid | None = None
    project_id: str | None = None
    domain: str | None = None
    expires_at: Timestamp | None = None
    created_at: Timestamp
    updated_at: Timestamp


class MemoryCreate(ConferModel):
    """``POST /v1/agents/{agent_id}/memories``."""

    type: MemoryType
    content: Text
    importance: Annotated[StrictInt, Field(ge=1, le=10)] = 5
    origin_conversation_id: Ulid | None = None
    project_id: Label | None = None
    domain: Domain | None = None
    expires_at: Timestamp | None = None


class MemoryUpdate(ConferModel):
    """``PATCH /v1/agents/{agent_id}/memories/{id}``: fields to change (absent = unchanged)."""

    type: MemoryType | None = None
    content: Text | None = None
    importance: Annotated[StrictInt, Field(ge=1, le=10)] | None = None
    expires_at: Timestamp | None = None


class KnowledgeRow(ConferModel):
    """Table ``knowledge``: one entry of a user's knowledge base (context-tables spec
    ``conocimiento``).

    ``allowed_agents`` None means every agent of the owner may read it; ``content_hash`` is the
    SHA-256 (hex) of ``content``, unique per owner so the same text is stored once.
    """

    id: Ulid
    user_id: Ulid
    category: str
    title: str | None = None
    content: str
    tags: list[str]
    allowed_agents: list[Ulid] | None = None
    priority: int
    source: str | None = None
    content_hash: str
    project_id: str | None = None
    domain: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class KnowledgeCreate(ConferModel):
    """``POST /v1/knowledge``; posting content that already exists returns the existing entry."""

    category: Annotated[str, StringConstraints(min_length=1, max_length=50)]
    title: Annotated[str, StringConstraints(max_length=200)] | None = None
    content: Text
    tags: list[Annotated[str, StringConstraints(min_length=1, max_length=64)]] = Field(
        default_factory=list
    )
    allowed_agents: list[Ulid] | None = None
    priority: Priority = 0
    source: Annotated[str, StringConstraints(max_length=200)] | None = None
    project_id: Label | None = None
    domain: Domain | None = None


class KnowledgeUpdate(ConferModel):
    """``PATCH /v1/knowledge/{id}``: fields to change (absent = unchanged)."""

    category: Annotated[str, StringConstraints(min_length=1, max_length=50)] | None = None
    title: Annotated[str, StringConstraints(max_length=200)] | None = None
    content: Text | None = None
    tags: list[Annotated[str, StringConstraints(min_length=1, max_length=64)]] | None = None
    allowed_agents: list[Ulid] | None = None
    priority: Priority | None = None


class AmbientContextRow(ConferModel):
    """Table ``ambient_context``: a snapshot of the owner's environment (context-tables spec).

    The JSON fields follow the context-tables spec's ``contexto_ambiental`` structure (servers,
    services, pending tasks, alerts, git state); the snapshot stops counting at ``expires_at``.
    """

    id: Ulid
    user_id: Ulid
    captured_at: Timestamp
    servers: JsonValue = None
    services: JsonValue = None
    pending_tasks: JsonValue = None
    alerts: JsonValue = None
    git_state: JsonValue = None
    expires_at: Timestamp


class AmbientContextCreate(ConferModel):
    """``POST /v1/ambient-context``; ``ttl_seconds`` defaults to one hour (context-tables spec)."""

    servers: Snapshot | None = None
    services: Snapshot | None = None
    pending_tasks: Snapshot | None = None
    alerts: Snapshot | None = None
    git_state: Snapshot | None = None
    ttl_seconds: Annotated[StrictInt, Field(ge=1, le=30 * 24 * 3600)] = 3600


class SearchHit(ConferModel):
    """One search result: what it is, where it came from, and which method found it.

    ``score`` is ``ts_rank`` for ``fulltext`` and cosine similarity (0–1) for ``semantic``.
    """

    kind: Literal["memory", "knowledge", "message"]
    id: Ulid
    text: str
    title: str | None = None
    conversation_id: Ulid | None = None
    project_id: str | None = None
    domain: str | None = None
    score: float
    method: SearchMethod


class SearchResults(ConferModel):
    """``GET /v1/search``: hits best first, and whether semantic search was available."""

    query: str
    semantic_available: bool
    hits: list[SearchHit]


class McpAuditRow(ConferModel):
    """Table ``mcp_audit_log``: one call of an MCP write tool (MCP server spec ``mcp_audit_log``).

    ``agent`` is the identity the caller declared; ``success`` False rows carry the error.
    """

    id: Ulid
    created_at: Timestamp
    user_id: Ulid
    agent: str
    tool_name: str
    payload: JsonValue
    target_id: str | None = None
    target_table: str | None = None
    success: bool
    error_message: str | None = None


class ProjectMemoryWrite(ConferModel):
    """``PUT /v1/project-memory/{project_id}/peers/{peer_did}``: the whole new document.

    Send the version you read in ``If-Match`` (or as ``base_version``); omit both only to create.
    """

    facts_md: Annotated[str, StringConstraints(max_length=1_000_000)] | None = None
    decisions_md: Annotated[str, StringConstraints(max_length=1_000_000)] | None = None
    meta: StoredJson = None
    base_version: Annotated[StrictInt, Field(ge=1)] | None = None


class ProjectMemoryPublic(ConferModel):
    """A project-memory document (table ``project_memory``) as the API shows it.

    ``version`` is also sent as the ``ETag`` header (``"<version>"``).
    """

    project_id: str
    peer_did: str
    facts_md: str | None = None
    decisions_md: str | None = None
    meta: JsonValue = None
    version: int
    created_at: Timestamp
    updated_at: Timestamp


class ProjectMemoryVersionPublic(ConferModel):
    """One stored version of a project-memory document (table ``project_memory_versions``)."""

    version: int
    facts_md: str | None = None
    decisions_md: str | None = None
    meta: JsonValue = None
    written_via: str | None = None
    created_at: Timestamp


class ContextPart(ConferModel):
    """One part of an assembled agent context (the context-tables spec's flow, steps 1–7, and
    ``concepts``, the concept memory's session context of the conversation's project).

    ``tokens`` is the estimate for ``content`` (see ``gateway.agents.tokens``); ``items`` names
    the rows that went in (memory, knowledge, message ids …); ``dropped`` those left out by
    the token budget.
    """

    name: Literal[
        "system_prompt",
        "personality",
        "memories",
        "knowledge",
        "concepts",
        "ambient",
        "history",
        "summary",
    ]
    tokens: int
    content: str
    items: list[str] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)


class ChatTurn(ConferModel):
    """One turn sent to the model: ``role`` is ``user`` or ``assistant``."""

    role: Literal["user", "assistant"]
    content: str


class AssembledContext(ConferModel):
    """Exactly what the model sees for a conversation: parts in order, then the rendered call.

    ``system`` is the system prompt built from every part but the history; ``turns`` is the
    history. ``budget_tokens`` is the whole budget, ``total_tokens`` what was used.
    """

    agent_id: Ulid
    conversation_id: Ulid
    provider: str
    model: str
    budget_tokens: int
    total_tokens: int
    parts: list[ContextPart]
    system: str
    turns: list[ChatTurn]
