"""Importing a session file into the concept memory (the semantic-memory spec's session YAML).

The shape (documented in docs/agents.md, "Importing a session file")::

    session: "2026-05-02 refactor"    # where the concepts were seen (else the caller's default)
    project: inducop                   # optional, for every concept
    domains: [django_patterns]         # optional, added to every concept's own
    concepts:
      - name: Session cache
        type: principle                # needed when the concept is new
        description: keep session state in a cache
        domains: [caching]
        note: optional, kept on the occurrence
        related_to:
          - target: Stateless sessions
            relation: contradicts      # omitted: related_to
            notes: optional, kept on the edge
          - target: "frame:mtv"        # a frame reference, stored apart
            relation: interpreted_under

Each concept is one occurrence (:func:`concept_writes.record_occurrence_in`), then each relation
one edge or frame reference (:func:`concept_writes.record_relation_in`), all in the caller's
transaction. Relations are written after every concept, so they may name concepts further down.

Entries that cannot be stored are skipped and reported, each with an ``mcp_audit_log`` row
(``success = false``, ``error_message`` ``"<level>: <message>"``) in the same transaction:

- **errors**: an entry that is not a mapping or has a bad field (name, type, domain slug), a new
  concept without ``type``, an unknown relation, a relation to itself, and the two-way lock
  broken explicitly: ``interpreted_under`` to a target without ``frame:``, or a ``frame:`` target
  with another relation (or no alias).
- **warnings**: a concept named twice (the second is skipped), a ``frame:`` target without any
  ``relation`` (the lock asks for ``interpreted_under`` to be written out; it is not guessed),
  and a relation whose target is neither in the graph nor in the file.

A file that is too large (:data:`MAX_BYTES`, 512 KiB, below the HTTP body limit so the
MCP tool's refusal is an audited one), not YAML, uses YAML aliases (refused,
so a few bytes cannot expand into a huge document), or lacks a ``concepts`` list is refused as a
whole with ValidationFailedError, and nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from gateway.db import Transaction
from gateway.errors import ConceptNotFoundError, ConferError, ValidationFailedError
from gateway.services import concept_writes
from gateway.services.concepts import ConceptDeps, agent_for
from gateway.store.mcp_audit import insert_mcp_audit
from models import User
from models.concepts import OccurrenceCreate, RelationCreate

MAX_BYTES = 512 * 1024
MAX_CONCEPTS = 5_000
MAX_RELATIONS_PER_CONCEPT = 200
RELATIONS = ("depends_on", "refines", "contradicts", "supersedes", "related_to")
FRAME = concept_writes.FRAME_PREFIX


Skip = Callable[[str, str, str | None, str, Any], Awaitable[None]]
"""``skip(level, entry, concept, message, item)``: report and audit one skipped entry."""


@dataclass
class ImportReport:
    """What an import stored and what it skipped (each skipped entry also has an audit row)."""

    session: str
    concepts_stored: int = 0
    relations_stored: int = 0
    frame_references_stored: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON values (``skipped`` = errors + warnings)."""
        return {
            "session": self.session,
            "concepts_stored": self.concepts_stored,
            "relations_stored": self.relations_stored,
            "frame_references_stored": self.frame_references_stored,
            "skipped": len(self.errors) + len(self.warnings),
            "errors": self.errors,
            "warnings": self.warnings,
        }


@dataclass(frozen=True)
class Audit:
    """Who the skipped entries' audit rows name: the user, the declared agent, the tool."""

    user_id: str
    agent: str
    tool_name: str


def parse(text: str, *, max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """The session document of ``text`` (YAML, ``yaml.safe_load``), checked as a whole.

    Raises ValidationFailedError: larger than ``max_bytes`` (UTF-8), not YAML, YAML aliases, not
    a mapping with a ``concepts`` list of at most :data:`MAX_CONCEPTS` entries."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise ValidationFailedError(f"the file has {size} bytes; at most {max_bytes} are accepted")
    import yaml  # PyYAML loads on the first import, not with the server (start-up time)

    scanner = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # events only, to find aliases
    try:
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, scanner)):
            raise ValidationFailedError("YAML aliases (*name) are not accepted")
        document = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError) as exc:
        raise ValidationFailedError(f"not valid YAML: {_first_line(exc)}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("concepts"), list):
        raise ValidationFailedError("the file must be a mapping with a 'concepts' list")
    if len(document["concepts"]) > MAX_CONCEPTS:
        raise ValidationFailedError(f"concepts: at most {MAX_CONCEPTS} entries")
    return document


async def import_session_in(
    tx: Transaction,
    deps: ConceptDeps,
    user: User,
    document: dict[str, Any],
    *,
    audit: Audit,
    default_session: str | None = None,
    agent_id: str | None = None,
) -> tuple[dict[str, Any], str | None]:
    """Store the valid entries of a parsed session document (:func:`parse`) and audit the
    skipped ones; returns ``(ImportReport.as_dict(), None)``, an audited write action's shape.

    Raises ValidationFailedError when the document names no session (nor ``default_session``)
    or its ``project``/``domains`` are unusable; then nothing is written."""
    session = document.get("session", default_session)
    if not isinstance(session, str | int) or not str(session).strip():
        raise ValidationFailedError("session: give the session the concepts were seen in")
    project = document.get("project")
    shared = document.get("domains") or []
    if project is not None and not isinstance(project, str):
        raise ValidationFailedError("project: must be text")
    if not isinstance(shared, list) or not all(isinstance(d, str) for d in shared):
        raise ValidationFailedError("domains: must be a list of slugs")
    report = ImportReport(session=str(session).strip()[:200])
    agent = await agent_for(tx.conn, user, agent_id)

    async def skip(level: str, entry: str, concept: str | None, message: str, item: Any) -> None:
        found = {"entry": entry, "concept": concept, "message": message}
        (report.errors if level == "error" else report.warnings).append(found)
        await insert_mcp_audit(
            tx.conn,
            user_id=audit.user_id,
            agent=audit.agent,
            tool_name=audit.tool_name,
            payload={"session": report.session, "entry": entry, "item": _jsonable(item)},
            target_id=None,
            target_table="concept_relations" if ".related_to[" in entry else "concepts",
            success=False,
            error_message=f"{level}: {message}",
        )

    stored: dict[str, list[tuple[str, Any]]] = {}  # concept name -> its (entry, relation) items
    for index, item in enumerate(document["concepts"]):
        entry = f"concepts[{index}]"
        name = item.get("name") if isinstance(item, dict) else None
        label = name if isinstance(name, str) else None
        if not isinstance(item, dict):
            await skip("error", entry, None, "a concept must be a mapping", item)
            continue
        relations = item.get("related_to") or []
        if not isinstance(relations, list) or len(relations) > MAX_RELATIONS_PER_CONCEPT:
            message = f"related_to: a list of at most {MAX_RELATIONS_PER_CONCEPT} relations"
            await skip("error", entry, label, message, item)
            continue
        own = item.get("domains") or []
        if not isinstance(own, list) or not all(isinstance(d, str) for d in own):
            await skip("error", entry, label, "domains: must be a list of slugs", item)
            continue
        try:
            data = OccurrenceCreate.model_validate(
                {
                    "concept": name,
                    "session": report.session,
                    "project": project,
                    "note": item.get("note"),
                    "type": item.get("type"),
                    "description": item.get("description"),
                    "domains": sorted({*shared, *own}),
                }
            )
        except ValidationError as exc:
            await skip("error", entry, label, _invalid(exc), item)
            continue
        if data.concept in stored:
            message = f"{data.concept!r} is named twice in the file; this entry is skipped"
            await skip("warning", entry, data.concept, message, item)
            continue
        try:
            async with tx.savepoint():
                await concept_writes.record_occurrence_in(tx, deps, user, data, agent)
        except ConferError as exc:
            await skip("error", entry, data.concept, exc.detail, item)
            continue
        report.concepts_stored += 1
        stored[data.concept] = [(f"{entry}.related_to[{i}]", r) for i, r in enumerate(relations)]

    for source, relations in stored.items():
        for entry, item in relations:
            await _relation(tx, deps, user, agent, report, skip, source, entry, item)
    return report.as_dict(), None


async def _relation(
    tx: Transaction,
    deps: ConceptDeps,
    user: User,
    agent: str,
    report: ImportReport,
    skip: Skip,
    source: str,
    entry: str,
    item: Any,
) -> None:
    """One ``related_to`` item of ``source``: checked (the two-way lock), then stored or
    skipped."""
    if not isinstance(item, dict) or not isinstance(item.get("target"), str):
        await skip("error", entry, source, "a relation needs a 'target' name", item)
        return
    target = item["target"].strip()
    kind = item.get("relation")
    is_frame = target.startswith(FRAME)
    if kind is None and is_frame:
        message = f"{target!r} is a frame: write 'relation: interpreted_under' to cite it"
        await skip("warning", entry, source, message, item)
        return
    kind = kind or "related_to"
    if kind == "interpreted_under" and not is_frame:
        message = f"interpreted_under needs a 'frame:<alias>' target, not {target!r}"
        await skip("error", entry, source, message, item)
        return
    if is_frame and kind != "interpreted_under":
        message = f"{target!r} is a frame: only interpreted_under may cite it, not {kind!r}"
        await skip("error", entry, source, message, item)
        return
    if kind not in (*RELATIONS, "interpreted_under"):
        await skip("error", entry, source, f"unknown relation {kind!r}", item)
        return
    try:
        data = RelationCreate.model_validate(
            {"source": source, "target": target, "kind": kind, "notes": item.get("notes")}
        )
    except ValidationError as exc:
        await skip("error", entry, source, _invalid(exc), item)
        return
    try:
        async with tx.savepoint():
            await concept_writes.record_relation_in(tx, deps, user, data, agent)
    except ConceptNotFoundError:  # the source was just stored: the target is missing
        message = f"no concept {target!r} in the graph or the file"
        await skip("warning", entry, source, message, item)
        return
    except ConferError as exc:
        await skip("error", entry, source, exc.detail, item)
        return
    if is_frame:
        report.frame_references_stored += 1
    else:
        report.relations_stored += 1


def _invalid(exc: ValidationError) -> str:
    names = {"concept": "name"}
    fields = sorted({names.get(str(e["loc"][0]), str(e["loc"][0])) for e in exc.errors()})
    return f"invalid fields: {', '.join(fields)}"


def _jsonable(item: Any) -> Any:
    """``item`` as JSON values (YAML dates become text), cut to 4 kB for the audit row."""
    text = json.dumps(item, default=str, ensure_ascii=False)
    return json.loads(text) if len(text) <= 4_000 else {"truncated": text[:4_000]}


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
