"""Importing a session YAML file: over MCP (official client) and with the real ``confer concepts
import`` command (a subprocess), on real PostgreSQL. The sample files are written here."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import asyncpg

from tests.agents.test_concepts import seen, tool
from tests.agents.test_mcp import _audit_rows, mcp_client
from tests.gateway.harness import run_instance

ROOT = Path(__file__).resolve().parents[2]

SAMPLE = """\
session: 2026-05-02 refactor
project: demo
domains: [caching]
concepts:
  - name: Session cache
    type: principle
    description: keep session state in a cache
    related_to:
      - target: Stateless sessions
        relation: contradicts
        notes: stateless is simpler
      - target: "frame:mtv"
        relation: interpreted_under
        notes: read under the MTV frame
      - target: "frame:mtv"
        relation: related_to
      - target: Existing rule
        relation: interpreted_under
      - target: "frame:other"
      - target: Nowhere to be found
        relation: depends_on
  - name: Stateless sessions
    type: pattern
    domains: [http]
    related_to:
      - target: Existing rule
  - name: Brand new without a type
  - name: Session cache
    type: event
  - just a string
  - name: Bad type
    type: axiom
"""

# what the report says about SAMPLE, as (level, entry)
SKIPPED = [
    ("error", "concepts[2]"),  # new, without type
    ("error", "concepts[4]"),  # not a mapping
    ("error", "concepts[5]"),  # unknown type
    ("error", "concepts[0].related_to[2]"),  # frame: target with related_to
    ("error", "concepts[0].related_to[3]"),  # interpreted_under without frame:
    ("warning", "concepts[3]"),  # Session cache twice
    ("warning", "concepts[0].related_to[4]"),  # frame: target without a relation
    ("warning", "concepts[0].related_to[5]"),  # target nowhere
]


def levels(report: dict[str, Any]) -> list[tuple[str, str]]:
    errors = [("error", e["entry"]) for e in report["errors"]]
    return errors + [("warning", w["entry"]) for w in report["warnings"]]


async def audit_rows(database_url: str, tool_name: str) -> list[dict[str, Any]]:
    rows = [r for r in await _audit_rows(database_url) if r["tool_name"] == tool_name]
    return [{**r, "payload": json.loads(r["payload_json"])} for r in rows]


async def graph(database_url: str) -> dict[str, Any]:
    conn = await asyncpg.connect(database_url)
    try:
        concepts = await conn.fetch(
            """SELECT c.name, c.type, c.projects, c.occurrence_count,
                      ARRAY(SELECT d.slug FROM concept_domain_links l
                            JOIN concept_domains d ON d.id = l.domain_id
                            WHERE l.concept_id = c.id ORDER BY d.slug) AS domains
               FROM concepts c ORDER BY c.name"""
        )
        relations = await conn.fetch(
            """SELECT s.name AS source, t.name AS target, r.kind, r.notes
               FROM concept_relations r JOIN concepts s ON s.id = r.source_id
               JOIN concepts t ON t.id = r.target_id ORDER BY s.name, r.kind"""
        )
        frames = await conn.fetch(
            """SELECT c.name, f.alias, r.notes FROM concept_frame_references r
               JOIN concepts c ON c.id = r.concept_id JOIN concept_frames f ON f.id = r.frame_id"""
        )
        sessions = await conn.fetch("SELECT DISTINCT session FROM concept_occurrences")
    finally:
        await conn.close()
    return {
        "concepts": {r["name"]: dict(r) for r in concepts},
        "relations": [tuple(r) for r in relations],
        "frames": [tuple(r) for r in frames],
        "sessions": {r["session"] for r in sessions},
    }


async def test_import_over_mcp_stores_the_valid_entries_and_audits_the_skipped(
    database_url: str,
) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        async with mcp_client(instance, alice) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert listed["confer_import_concepts"].annotations.read_only_hint is False  # type: ignore[union-attr]
            await seen(client, "Existing rule", type="principle")
            report = await tool(
                client, "confer_import_concepts", {"content": SAMPLE, "agent": "importer"}
            )
            assert sorted(levels(report)) == sorted(SKIPPED)
            assert report["concepts_stored"] == 2 and report["relations_stored"] == 2
            assert report["frame_references_stored"] == 1 and report["skipped"] == len(SKIPPED)
            broken = {e["entry"]: e["message"] for e in report["errors"]}
            assert (
                "interpreted_under needs a 'frame:<alias>' target"
                in broken["concepts[0].related_to[3]"]
            )
            assert "only interpreted_under may cite it" in broken["concepts[0].related_to[2]"]

            refusals = {
                "aliases": "base: &a {name: x}\nconcepts: [*a]\n",
                "not a mapping": "- just\n- a list\n",
                "not yaml": "concepts: [unclosed\n",
            }
            for content in refusals.values():
                refused = await tool(
                    client, "confer_import_concepts", {"content": content}, failing=True
                )
                assert refused["code"] == "validation_failed", refused
            too_big = "#" * (512 * 1024 + 1)
            refused = await tool(
                client, "confer_import_concepts", {"content": too_big}, failing=True
            )
            assert refused["code"] == "validation_failed"

        stored = await graph(database_url)
        assert set(stored["concepts"]) == {"Existing rule", "Session cache", "Stateless sessions"}
        assert stored["concepts"]["Session cache"]["type"] == "principle"  # not the duplicate's
        assert stored["concepts"]["Session cache"]["projects"] == ["demo"]
        assert stored["concepts"]["Stateless sessions"]["domains"] == ["caching", "http"]
        assert stored["relations"] == [
            ("Session cache", "Stateless sessions", "contradicts", "stateless is simpler"),
            ("Stateless sessions", "Existing rule", "related_to", None),
        ]
        assert stored["frames"] == [("Session cache", "mtv", "read under the MTV frame")]
        assert "2026-05-02 refactor" in stored["sessions"]

        rows = await audit_rows(database_url, "confer_import_concepts")
        skipped = [r for r in rows if not r["success"] and r["agent"] == "importer"]
        assert len(skipped) == len(SKIPPED)
        assert sorted(r["error_message"].split(":")[0] for r in skipped) == sorted(
            level for level, _ in SKIPPED
        )
        by_entry = {r["payload"]["entry"]: r for r in skipped}
        assert by_entry["concepts[0].related_to[3]"]["target_table"] == "concept_relations"
        assert by_entry["concepts[0].related_to[3]"]["payload"]["item"] == {
            "target": "Existing rule",
            "relation": "interpreted_under",
        }
        summary = [r for r in rows if r["success"]]
        assert len(summary) == 1 and summary[0]["payload"]["bytes"] == len(SAMPLE)
        refused_rows = [r for r in rows if not r["success"] and r["agent"] == "unknown"]
        assert len(refused_rows) == 4


async def test_the_cli_imports_a_file_and_reports_the_broken_pair(
    database_url: str, tmp_path: Path
) -> None:
    async with run_instance(database_url) as instance:
        await instance.register("alice")
    sample = tmp_path / "session.yaml"
    sample.write_text(
        """\
concepts:
  - name: Retry with backoff
    type: pattern
    related_to:
      - target: Idempotent handlers
        relation: depends_on
      - target: Idempotent handlers
        relation: interpreted_under
  - name: Idempotent handlers
    type: principle
""",
        encoding="utf-8",
    )
    env = {**os.environ, "CONFER_DATABASE_URL": database_url}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "concepts",
        "import",
        str(sample),
        "--user",
        "alice",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=300)
    assert process.returncode == 1, (out, err)
    assert "ERROR concepts[0].related_to[1]: interpreted_under needs a 'frame:<alias>'" in (
        err.decode()
    )
    assert "2 concepts, 1 relations, 0 frame references stored; 1 skipped" in out.decode()

    stored = await graph(database_url)
    assert set(stored["concepts"]) == {"Retry with backoff", "Idempotent handlers"}
    assert stored["relations"] == [
        ("Retry with backoff", "Idempotent handlers", "depends_on", None)
    ]
    assert stored["sessions"] == {"session.yaml"}
    rows = await audit_rows(database_url, "confer concepts import")
    assert [(r["success"], r["agent"]) for r in rows] == [(False, "cli"), (True, "cli")]
    assert rows[0]["error_message"].startswith("error: interpreted_under needs")
