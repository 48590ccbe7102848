"""The concept-memory MCP tools (semantic-memory MCP spec ``cs_*``), registered on Confer's server.

Read tools carry ``readOnlyHint``; write tools are audited (:func:`gateway.mcp.audit.audited_write`:
the write and its audit row commit together, a refused write leaves only its audit row) and carry
``destructiveHint`` (true only for archiving). Like every Confer tool, one that fails answers
with MCP's ``isError: true`` on top of the structured ``{"ok": false, "code", "error"}``
(:class:`gateway.mcp.server.ConferMCPServer`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import Field, StrictInt
from pydantic_core import to_jsonable_python

from gateway.db import Transaction
from gateway.mcp.args import (
    Agent,
    ConceptName,
    Domain,
    Domains,
    Flag,
    Identifier,
    Notes,
    Query,
    Text,
    Threshold,
    Topic,
)
from gateway.mcp.audit import audited_write, guarded
from gateway.mcp.deps import ToolDeps
from gateway.services import concept_context, concept_import, concept_writes, concepts
from models import User
from models.concepts import (
    ConceptType,
    EdgeKind,
    MeasurementCreate,
    OccurrenceCreate,
    Outcome,
    RelationCreate,
    StatusChange,
)

READ = ToolAnnotations(read_only_hint=True)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True)

ConceptProject = Annotated[str, Field(max_length=200)]
Caller = Callable[[Context], Awaitable[tuple[ToolDeps, User]]]
Action = Callable[[Transaction], Awaitable[tuple[dict[str, Any], str | None]]]


def deps(tools: ToolDeps) -> concepts.ConceptDeps:
    """The concept services' dependencies out of the MCP tools' ones."""
    return concepts.ConceptDeps(tools.pool, tools.embedder, tools.clock)


def ok(result: dict[str, Any]) -> dict[str, Any]:
    """``{"ok": True, …result}`` as plain JSON values."""
    jsonable: dict[str, Any] = to_jsonable_python({"ok": True, **result}, exclude_none=True)
    return jsonable


def register_concept_tools(server: Any, caller: Caller) -> None:
    """Register the read and write concept tools on ``server`` (a ``ConferMCPServer``)."""
    _reads(server, caller)
    _writes(server, caller)


def _reads(server: Any, caller: Caller) -> None:
    def read_tool(fn: Any) -> Any:
        return server.tool(annotations=READ)(guarded(fn))

    @read_tool
    async def confer_search_concepts(
        ctx: Context,
        query: Query,
        domain: Domain | None = None,
        project: ConceptProject | None = None,
        threshold: Threshold = 0.3,
        limit: Annotated[StrictInt, Field(ge=1, le=100)] = 10,
    ) -> dict[str, Any]:
        """Search your concept memory (semantic with similarity >= threshold when pgvector and
        embeddings are available, full text otherwise). Every concept has ``contested``
        (none | contested | unknown; by_active and by_archived challengers) (read-only)."""
        state, user = await caller(ctx)
        found = await concepts.search(
            deps(state),
            user,
            query=query,
            domain=domain,
            project=project,
            threshold=threshold,
            limit=limit,
        )
        return ok(found)

    @read_tool
    async def confer_get_active_concepts(
        ctx: Context,
        domain: Domain | None = None,
        project: ConceptProject | None = None,
        concept_type: ConceptType | None = None,
        limit: Annotated[StrictInt, Field(ge=1, le=100)] = 15,
    ) -> dict[str, Any]:
        """Active concepts grouped into principles, patterns and events, by weight (read-only)."""
        state, user = await caller(ctx)
        grouped = await concepts.active_by_type(
            deps(state),
            user,
            domain=domain,
            project=project,
            concept_type=concept_type,
            limit=limit,
        )
        return ok(dict(grouped))

    @read_tool
    async def confer_get_concept_graph(
        ctx: Context, concept_name: Query, depth: Annotated[StrictInt, Field(ge=1, le=3)] = 1
    ) -> dict[str, Any]:
        """The graph around a concept (name matched accent- and case-insensitively): outgoing
        and incoming relations to ``depth`` 1-3, and its last 5 occurrences (read-only)."""
        state, user = await caller(ctx)
        return ok(await concepts.concept_graph(deps(state), user, name=concept_name, depth=depth))

    @read_tool
    async def confer_get_domain_summary(ctx: Context, domain: Domain) -> dict[str, Any]:
        """A domain's concepts by type and status, its top concepts by weight and its recent
        sessions (read-only)."""
        state, user = await caller(ctx)
        return ok(await concepts.domain_summary(deps(state), user, domain=domain))

    @read_tool
    async def confer_get_concept_context(
        ctx: Context,
        project: ConceptProject | None = None,
        domains: Domains | None = None,
        limit: Annotated[StrictInt, Field(ge=1, le=200)] = 20,
        format: Literal["markdown", "json"] = "markdown",
    ) -> dict[str, Any]:
        """Active concepts to start a session: principles > patterns > events, then weight,
        filtered by project and any of ``domains``; markdown marks disputes ``[CONTESTED]`` and
        an unverifiable batch ``[WARNING]`` (read-only)."""
        state, user = await caller(ctx)
        return ok(
            await concept_context.session_context(
                deps(state), user, project=project, domains=domains, limit=limit, format=format
            )
        )

    @read_tool
    async def confer_get_concept_alerts(
        ctx: Context, project: ConceptProject | None = None
    ) -> dict[str, Any]:
        """Health alerts: fractures (dormant/archived concepts with active dependents; critical,
        moderate or low) and missing vaccines (declared directives without enough weight)
        (read-only)."""
        state, user = await caller(ctx)
        return ok(await concept_context.alerts(deps(state), user, project=project))

    @read_tool
    async def confer_open_concept_session(
        ctx: Context,
        topic: Topic,
        queries: Annotated[list[Query], Field(min_length=1, max_length=5)],
        domain: Domain | None = None,
        project: ConceptProject | None = None,
        limit_per_query: Annotated[StrictInt, Field(ge=1, le=20)] = 5,
    ) -> dict[str, Any]:
        """Open a session: 1-5 concept searches (ranked by name, best score first, and per query)
        plus the health alerts, in one call (read-only)."""
        state, user = await caller(ctx)
        return ok(
            await concept_context.session_open(
                deps(state),
                user,
                topic=topic,
                queries=queries,
                domain=domain,
                project=project,
                limit_per_query=limit_per_query,
            )
        )

    @read_tool
    async def confer_audit_concept_thread(
        ctx: Context,
        concepts: Annotated[list[Query], Field(min_length=1, max_length=20)],
        project: ConceptProject | None = None,
        include_graph: Flag = True,
    ) -> dict[str, Any]:
        """Is a thread of 1-20 concept names covered by your graph? Matching is accent- and
        case-insensitive; with include_graph, each match's top relations and occurrences
        (read-only)."""
        state, user = await caller(ctx)
        return ok(
            await concept_context.audit_thread(
                deps(state), user, names=concepts, project=project, include_graph=include_graph
            )
        )


def _writes(server: Any, caller: Caller) -> None:
    def write_tool(annotations: ToolAnnotations) -> Callable[[Any], Any]:
        return server.write_tool(annotations=annotations)  # type: ignore[no-any-return]

    async def audited(
        ctx: Context, tool: str, agent: str, payload: dict[str, Any], table: str, action: Any
    ) -> dict[str, Any]:
        state, user = await caller(ctx)

        async def run(tx: Transaction) -> tuple[dict[str, Any], str | None]:
            done: tuple[dict[str, Any], str | None] = await action(tx, deps(state), user)
            return done

        result = await audited_write(
            state.pool,
            user_id=user.id,
            agent=agent,
            tool_name=tool,
            payload=payload,
            target_table=table,
            action=run,
        )
        jsonable: dict[str, Any] = to_jsonable_python(result)
        return jsonable

    @write_tool(WRITE)
    async def confer_record_concept_occurrence(
        ctx: Context,
        concept: ConceptName,
        session: ConceptName | None = None,
        conversation_id: Identifier | None = None,
        project: ConceptProject | None = None,
        note: Notes | None = None,
        type: ConceptType | None = None,
        description: Text | None = None,
        domains: Domains | None = None,
        agent: Agent = "unknown",
    ) -> dict[str, Any]:
        """Record that a session or conversation used a concept (created when ``type`` is given
        and it is new); its weight grows by one use (audited)."""
        payload = {
            k: v
            for k, v in {
                "concept": concept,
                "session": session,
                "conversation_id": conversation_id,
                "project": project,
                "note": note,
                "type": type,
                "description": description,
                "domains": domains,
            }.items()
            if v is not None
        }

        async def action(tx: Transaction, d: Any, user: User) -> Any:
            data = OccurrenceCreate.model_validate(payload)
            return await concept_writes.record_occurrence_in(tx, d, user, data, None)

        tool = "confer_record_concept_occurrence"
        return await audited(ctx, tool, agent, payload, "concepts", action)

    @write_tool(WRITE)
    async def confer_record_concept_relation(
        ctx: Context,
        source: ConceptName,
        target: ConceptName,
        kind: EdgeKind,
        notes: Notes | None = None,
        agent: Agent = "unknown",
    ) -> dict[str, Any]:
        """Record an edge between two concepts (depends_on, refines, contradicts, supersedes,
        related_to), or ``interpreted_under`` a ``frame:<alias>``; a correction lives on the
        edge, with its notes (audited)."""
        payload = {"source": source, "target": target, "kind": kind, "notes": notes}

        async def action(tx: Transaction, d: Any, user: User) -> Any:
            data = RelationCreate.model_validate(payload)
            return await concept_writes.record_relation_in(tx, d, user, data, None)

        tool = "confer_record_concept_relation"
        return await audited(ctx, tool, agent, payload, "concept_relations", action)

    @write_tool(WRITE)
    async def confer_promote_concept(
        ctx: Context, concept: ConceptName, agent: Agent = "unknown"
    ) -> dict[str, Any]:
        """Make a concept active again (audited)."""
        payload = {"concept": concept, "status": "active"}

        async def action(tx: Transaction, d: Any, user: User) -> Any:
            data = StatusChange.model_validate(payload)
            return await concept_writes.change_status_in(tx, d, user, data, None)

        return await audited(ctx, "confer_promote_concept", agent, payload, "concepts", action)

    @write_tool(DESTRUCTIVE)
    async def confer_archive_concept(
        ctx: Context, concept: ConceptName, agent: Agent = "unknown"
    ) -> dict[str, Any]:
        """Archive a concept: it leaves session contexts, and concepts depending on it show
        up as fractures (audited)."""
        payload = {"concept": concept, "status": "archived"}

        async def action(tx: Transaction, d: Any, user: User) -> Any:
            data = StatusChange.model_validate(payload)
            return await concept_writes.change_status_in(tx, d, user, data, None)

        return await audited(ctx, "confer_archive_concept", agent, payload, "concepts", action)

    @write_tool(WRITE)
    async def confer_record_measurement(
        ctx: Context,
        context: Text,
        outcome: Outcome,
        ai_contribution: Text = "",
        human_contribution: Text = "",
        project: ConceptProject = "",
        domains: Domains | None = None,
        agent: Agent = "unknown",
    ) -> dict[str, Any]:
        """Record a composite AI-human measurement: outcome resolved | partially_resolved |
        not_resolved | not_yet_observable; every domain slug must exist. Stored outside the
        searchable concepts (audited)."""
        payload = {
            "context": context,
            "outcome": outcome,
            "ai_contribution": ai_contribution,
            "human_contribution": human_contribution,
            "project": project,
            "domains": domains or [],
        }

        async def action(tx: Transaction, d: Any, user: User) -> Any:
            data = MeasurementCreate.model_validate(payload)
            return await concept_writes.record_measurement_in(tx, d, user, data, None, agent)

        tool = "confer_record_measurement"
        return await audited(ctx, tool, agent, payload, "concept_measurements", action)

    @write_tool(WRITE)
    async def confer_import_concepts(
        ctx: Context,
        content: Annotated[str, Field(min_length=1, max_length=concept_import.MAX_BYTES)],
        session: Annotated[str, Field(min_length=1, max_length=200)] | None = None,
        agent: Agent = "unknown",
    ) -> dict[str, Any]:
        """Import a session YAML file (``session``, ``project``, ``domains``, ``concepts`` with
        ``related_to`` lists; ``frame:<alias>`` targets need ``relation: interpreted_under``
        and only it may name a frame), at most 512 KiB. Valid entries are stored; the report
        lists the errors and warnings, and every skipped entry has its own audit row
        (audited)."""
        digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()
        payload = {"session": session, "bytes": len(content), "sha256": digest}
        tool = "confer_import_concepts"

        async def action(tx: Transaction, d: Any, user: User) -> Any:
            document = concept_import.parse(content)
            audit = concept_import.Audit(user_id=user.id, agent=agent, tool_name=tool)
            return await concept_import.import_session_in(
                tx, d, user, document, audit=audit, default_session=session
            )

        return await audited(ctx, tool, agent, payload, "concepts", action)
