"""The concept memory over MCP (official ``mcp`` client, real HTTP) and REST, on real PostgreSQL."""

from __future__ import annotations

from typing import Any

import asyncpg
from mcp import Client

from tests.agents.helpers import agent_id, talk_to_agent
from tests.agents.test_mcp import _audit_rows, mcp_client
from tests.gateway.harness import run_instance

READS = {
    "confer_search_concepts",
    "confer_get_active_concepts",
    "confer_get_concept_graph",
    "confer_get_domain_summary",
    "confer_get_concept_context",
    "confer_get_concept_alerts",
    "confer_open_concept_session",
    "confer_audit_concept_thread",
}
WRITES = {
    "confer_record_concept_occurrence",
    "confer_record_concept_relation",
    "confer_promote_concept",
    "confer_archive_concept",
    "confer_record_measurement",
    "confer_import_concepts",
}


async def tool(client: Client, name: str, arguments: dict[str, Any], failing: bool = False) -> Any:
    result = await client.call_tool(name, arguments)
    content = dict(result.structured_content or {})
    assert result.is_error is failing, content
    assert content.get("ok") is (not failing), content
    return content


async def seen(client: Client, concept: str, **extra: Any) -> dict[str, Any]:
    args = {"concept": concept, "session": "s1", "agent": "test", **extra}
    result: dict[str, Any] = await tool(client, "confer_record_concept_occurrence", args)
    return result


async def relate(client: Client, source: str, target: str, kind: str) -> None:
    args = {"source": source, "target": target, "kind": kind, "notes": f"{source} {kind}"}
    await tool(client, "confer_record_concept_relation", args)


async def test_contested_graph_audit_and_failures(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        async with mcp_client(instance, alice) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert READS | WRITES <= set(listed)
            assert all(listed[n].annotations.read_only_hint is True for n in READS)  # type: ignore[union-attr]
            assert listed["confer_archive_concept"].annotations.destructive_hint is True  # type: ignore[union-attr]
            assert listed["confer_promote_concept"].annotations.destructive_hint is False  # type: ignore[union-attr]

            made = await seen(
                client,
                "Caché de sesión",
                type="principle",
                description="keep session state in a cache",
                domains=["django_patterns"],
                project="inducop",
            )
            assert made["created"] is True and made["weight"] == 1.0
            again = await seen(client, "Caché de sesión", project="inducop")
            assert again["created"] is False and again["weight"] > 1.9
            await seen(client, "Stateless sessions", type="principle", domains=["django_patterns"])
            await seen(client, "Old cache rule", type="event")
            await seen(client, "Retry with backoff", type="pattern", domains=["django_patterns"])
            await relate(client, "Stateless sessions", "Caché de sesión", "contradicts")
            await relate(client, "Old cache rule", "Caché de sesión", "supersedes")
            await relate(client, "Retry with backoff", "Caché de sesión", "depends_on")
            await tool(client, "confer_archive_concept", {"concept": "Old cache rule"})

            found = await tool(client, "confer_search_concepts", {"query": "cache"})
            assert found["method"] == "fulltext" and found["warnings"] == []
            by_name = {c["name"]: c for c in found["concepts"]}
            contested = by_name["Caché de sesión"]["contested"]
            assert contested == {
                "state": "contested",
                "by_active": [
                    {"name": "Stateless sessions", "status": "active", "relation": "contradicts"}
                ],
                "by_archived": [
                    {"name": "Old cache rule", "status": "archived", "relation": "supersedes"}
                ],
            }
            assert by_name["Old cache rule"]["contested"]["state"] == "none"

            context = await tool(
                client, "confer_get_concept_context", {"domains": ["django_patterns"]}
            )
            order = [c["name"] for c in context["concepts"]]
            assert order == ["Caché de sesión", "Stateless sessions", "Retry with backoff"]
            assert "[CONTESTED] by: Stateless sessions (active, contradicts)" in context["markdown"]
            assert "[WARNING]" not in context["markdown"]

            graph = await tool(
                client, "confer_get_concept_graph", {"concept_name": "CACHE DE SESION", "depth": 2}
            )
            assert graph["concept"]["name"] == "Caché de sesión"
            assert {e["source"] for e in graph["incoming"]} == {
                "Stateless sessions",
                "Old cache rule",
                "Retry with backoff",
            }
            assert len(graph["recent_occurrences"]) == 2

            audit = await tool(
                client,
                "confer_audit_concept_thread",
                {"concepts": ["cache de SESION", "stateless", "nothing like this"]},
            )
            assert audit["summary"] == {
                "total": 3,
                "found": 2,
                "missing": 1,
                "by_status": {"active": 2},
            }
            assert audit["coverage"][0]["matched_concept"] == "Caché de sesión"
            assert len(audit["coverage"][0]["incoming_relations"]) == 3

            summary = await tool(client, "confer_get_domain_summary", {"domain": "django_patterns"})
            assert summary["by_type"] == {"pattern": 1, "principle": 2}
            assert summary["recent_sessions"][0]["session"] == "s1"

            opened = await tool(
                client,
                "confer_open_concept_session",
                {"topic": "caching", "queries": ["cache", "sessions"]},
            )
            ranked = {c["name"]: c for c in opened["concepts_ranked"]}
            assert ranked["Caché de sesión"]["contested"]["state"] == "contested"

            missing = await tool(
                client, "confer_get_concept_graph", {"concept_name": "nope"}, failing=True
            )
            assert missing["code"] == "concept_not_found"
            lock = await tool(
                client,
                "confer_record_concept_relation",
                {"source": "Retry with backoff", "target": "frame:mtv", "kind": "related_to"},
                failing=True,
            )
            assert lock["code"] == "validation_failed" and "audit_id" in lock

            # the contested check cannot run: every concept says unknown, the batch warns
            conn = await asyncpg.connect(database_url)
            try:
                await conn.execute("ALTER TABLE concept_relations RENAME TO concept_relations_x")
                broken = await tool(client, "confer_search_concepts", {"query": "cache"})
                assert broken["warnings"] and all(
                    c["contested"]["state"] == "unknown" for c in broken["concepts"]
                )
                context = await tool(client, "confer_get_concept_context", {})
                assert "[WARNING] contested could not be verified" in context["markdown"]
            finally:
                await conn.execute("ALTER TABLE concept_relations_x RENAME TO concept_relations")
                await conn.close()
        rest = await alice.request("GET", "/v1/concepts/search", params={"query": "sesion"})
        assert rest.status_code == 200
        assert rest.json()["concepts"][0]["contested"]["state"] == "contested"


async def test_fractures_vaccines_and_measurements(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        async with mcp_client(instance, alice) as client:
            for base, dependent in (("Base A", "Dep A"), ("Base B", "Dep B"), ("Base C", "Dep C")):
                await seen(client, base, type="principle", domains=["core"])
                await seen(client, dependent, type="pattern")
                await relate(client, dependent, base, "depends_on")
            await seen(client, "Base A")  # weighed 2.0 before it decays: critical
            await seen(client, "Dep B")  # two occurrences, so not a likely false positive
            conn = await asyncpg.connect(database_url)
            try:
                # as if time had passed: B's dependent decayed to 0.8, C went dormant
                await conn.execute("UPDATE concepts SET weight = 0.8 WHERE name = 'Dep B'")
                await conn.execute("UPDATE concepts SET status = 'dormant' WHERE name = 'Base C'")
            finally:
                await conn.close()
            for archived in ("Base A", "Base B"):
                await tool(client, "confer_archive_concept", {"concept": archived})
            alerts = await tool(client, "confer_get_concept_alerts", {})
            severity = {f["concept"]: f["severity"] for f in alerts["fractures"]}
            assert severity == {"Base A": "critical", "Base B": "moderate", "Base C": "low"}

            await seen(client, "No emoji in commits", type="principle", project="inducop")
            await seen(client, "YAML schema checks", type="pattern", project="inducop")
            for vaccine in (
                {"name": "emoji", "terms": ["Émoji"], "scope": "global"},
                {
                    "name": "yaml",
                    "terms": ["yaml"],
                    "scope": "project_specific",
                    "applicable_projects": ["concept-sediment"],
                },
                {"name": "git push", "terms": ["git push"]},
            ):
                response = await alice.request("PUT", "/v1/concepts/vaccines", json=vaccine)
                assert response.status_code == 200, response.text
            sediment = await tool(
                client, "confer_get_concept_alerts", {"project": "concept-sediment"}
            )
            assert sorted(v["name"] for v in sediment["missing_vaccines"]) == ["git push", "yaml"]
            inducop = await tool(client, "confer_get_concept_alerts", {"project": "inducop"})
            assert [v["name"] for v in inducop["missing_vaccines"]] == ["git push"]

            refused = await tool(
                client,
                "confer_record_measurement",
                {"context": "deploy", "outcome": "resolved", "domains": ["core", "nowhere"]},
                failing=True,
            )
            assert refused["code"] == "validation_failed" and "nowhere" in refused["error"]
            bad_outcome = await tool(
                client,
                "confer_record_measurement",
                {"context": "deploy", "outcome": "resolvio"},
                failing=True,
            )
            assert bad_outcome["code"] == "validation_failed"
            conn = await asyncpg.connect(database_url)
            try:
                assert await conn.fetchval("SELECT count(*) FROM concept_measurements") == 0
                assert await conn.fetchval("SELECT count(*) FROM concept_measurement_domains") == 0
                recorded = await tool(
                    client,
                    "confer_record_measurement",
                    {
                        "context": "deploy",
                        "outcome": "partially_resolved",
                        "ai_contribution": "three options",
                        "human_contribution": "picked the second",
                        "domains": ["core"],
                        "agent": "claude-code-test",
                    },
                )
                links = await conn.fetchval("SELECT count(*) FROM concept_measurement_domains")
                assert links == 1
                searched = await tool(client, "confer_search_concepts", {"query": "deploy"})
                assert searched["concepts"] == []
            finally:
                await conn.close()
        rows = await _audit_rows(database_url)
        measurements = [r for r in rows if r["tool_name"] == "confer_record_measurement"]
        assert [r["success"] for r in measurements] == [False, False, True]
        assert measurements[2]["target_id"] == recorded["id"]
        assert measurements[2]["agent"] == "claude-code-test"
        assert agent_id(alice)


def names(grouped: dict[str, Any]) -> dict[str, list[str]]:
    return {k: [c["name"] for c in grouped[k]] for k in ("principles", "patterns", "events")}


async def test_active_concepts_by_type(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        async with mcp_client(instance, alice) as client:
            await seen(client, "Light principle", type="principle", domains=["core"])
            await seen(client, "Heavy principle", type="principle", project="demo")
            await seen(client, "Heavy principle", project="demo")
            await seen(client, "A pattern", type="pattern", domains=["core"])
            await seen(client, "An event", type="event", project="demo")
            await seen(client, "Archived principle", type="principle", domains=["core"])
            await seen(client, "Dormant pattern", type="pattern")
            await tool(client, "confer_archive_concept", {"concept": "Archived principle"})
            conn = await asyncpg.connect(database_url)
            try:
                await conn.execute(
                    "UPDATE concepts SET status = 'dormant' WHERE name = 'Dormant pattern'"
                )
            finally:
                await conn.close()

            every = await tool(client, "confer_get_active_concepts", {})
            assert names(every) == {  # by weight within each type; only active concepts
                "principles": ["Heavy principle", "Light principle"],
                "patterns": ["A pattern"],
                "events": ["An event"],
            }
            assert all(c["status"] == "active" for c in every["principles"])
            patterns = await tool(client, "confer_get_active_concepts", {"concept_type": "pattern"})
            assert names(patterns) == {"principles": [], "patterns": ["A pattern"], "events": []}
            one = await tool(client, "confer_get_active_concepts", {"limit": 1})
            assert names(one)["principles"] == ["Heavy principle"]
            core = await tool(client, "confer_get_active_concepts", {"domain": "core"})
            assert names(core) == {
                "principles": ["Light principle"],
                "patterns": ["A pattern"],
                "events": [],
            }
            demo = await tool(client, "confer_get_active_concepts", {"project": "demo"})
            assert names(demo) == {
                "principles": ["Heavy principle"],
                "patterns": [],
                "events": ["An event"],
            }
            refused = await tool(
                client, "confer_get_active_concepts", {"concept_type": "axiom"}, failing=True
            )
            assert refused["code"] == "validation_failed"
        rest = await alice.request("GET", "/v1/concepts/active", params={"domain": "core"})
        assert rest.status_code == 200 and names(rest.json()) == names(core)
        bad = await alice.request("GET", "/v1/concepts/active", params={"concept_type": "axiom"})
        assert bad.status_code == 422 and bad.json()["code"] == "validation_failed"


async def test_promote_concept(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        async with mcp_client(instance, alice) as client:
            made = await seen(client, "Faded rule", type="principle")
            await tool(client, "confer_archive_concept", {"concept": "Faded rule"})
            conn = await asyncpg.connect(database_url)
            try:
                # as if it had decayed for months before it was archived
                await conn.execute("UPDATE concepts SET weight = 0.05 WHERE name = 'Faded rule'")
            finally:
                await conn.close()
            active = await tool(client, "confer_get_active_concepts", {})
            assert names(active)["principles"] == []

            promoted = await tool(
                client, "confer_promote_concept", {"concept": "Faded rule", "agent": "t"}
            )
            assert promoted["status"] == "active" and promoted["previous_status"] == "archived"
            assert promoted["concept_id"] == made["concept_id"]
            assert promoted["weight"] == 1.0  # lifted to one use, so decay does not fade it again
            active = await tool(client, "confer_get_active_concepts", {})
            assert names(active)["principles"] == ["Faded rule"]

            again = await tool(client, "confer_promote_concept", {"concept": "Faded rule"})
            assert again["previous_status"] == "active" and again["weight"] == 1.0
            await seen(client, "Faded rule")  # 2.0 now: promoting keeps a higher weight
            kept = await tool(client, "confer_promote_concept", {"concept": "Faded rule"})
            assert kept["weight"] > 1.9

            missing = await tool(
                client, "confer_promote_concept", {"concept": "No such rule"}, failing=True
            )
            assert missing["code"] == "concept_not_found" and "audit_id" in missing
        rest = await alice.request(
            "POST", "/v1/concepts/status", json={"concept": "No such rule", "status": "active"}
        )
        assert rest.status_code == 404 and rest.json()["code"] == "concept_not_found"
        rows = [
            r for r in await _audit_rows(database_url) if r["tool_name"] == "confer_promote_concept"
        ]
        assert [r["success"] for r in rows] == [True, True, True, False]
        assert rows[0]["target_id"] == made["concept_id"] and rows[0]["agent"] == "t"


async def test_agent_context_includes_the_conversations_project_concepts(
    database_url: str,
) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        conversation_id = await talk_to_agent(alice)
        path = f"/v1/conversations/{conversation_id}/agent-context"
        before = {p["name"]: p for p in (await alice.request("GET", path)).json()["parts"]}
        assert before["concepts"] == {
            "name": "concepts",
            "tokens": 0,
            "content": "",
            "items": [],
            "dropped": [],
        }
        for name, kind, project in (
            ("Small commits", "principle", "demo"),
            ("Big-bang rewrites", "pattern", "demo"),
            ("Other project rule", "principle", "elsewhere"),
        ):
            body = {"concept": name, "type": kind, "session": "s1", "project": project}
            made = await alice.request("POST", "/v1/concepts/occurrences", json=body)
            assert made.status_code == 201, made.text
        body = {"concept": "Small commits", "conversation_id": conversation_id, "project": "demo"}
        made = await alice.request("POST", "/v1/concepts/occurrences", json=body)
        assert made.status_code == 201, made.text
        edge = {"source": "Big-bang rewrites", "target": "Small commits", "kind": "contradicts"}
        assert (await alice.request("POST", "/v1/concepts/relations", json=edge)).is_success

        context = (await alice.request("GET", path)).json()
        names = [p["name"] for p in context["parts"]]
        assert names.index("concepts") == names.index("knowledge") + 1
        part = {p["name"]: p for p in context["parts"]}["concepts"]
        assert part["content"].startswith("Concepts of project demo")
        assert part["items"] == [made.json()["concept_id"], *part["items"][1:]]
        assert len(part["items"]) == 2 and "Other project rule" not in part["content"]
        assert "[CONTESTED] by: Big-bang rewrites (active, contradicts)" in part["content"]
        assert part["content"] in context["system"]
