"""Concept search with and without pgvector, through the official ``mcp`` client and REST.

With pgvector: a cluster of this session alone (pgserver's binaries, ``CREATE EXTENSION vector``
by the migrations) and embeddings from a loopback OpenAI-compatible endpoint
(:mod:`tests.agents.llmserver`). Without: the configured test server (the system PostgreSQL
in CI, which has no pgvector), where the same calls answer by full text.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from tests.agents.conftest import LLMServer
from tests.agents.helpers import agent_id
from tests.agents.llmserver import embed
from tests.agents.test_concepts import relate, seen, tool
from tests.agents.test_mcp import mcp_client
from tests.gateway.harness import run_instance

CONCEPTS = [
    # name, type, description, domains, project
    (
        "Car maintenance",
        "principle",
        "service the car before every long trip",
        ["vehicles"],
        "garage",
    ),
    ("Car insurance", "pattern", "compare insurance offers", ["money"], "household"),
    ("Vehicle registration", "event", "the vehicle papers", ["vehicles"], "garage"),
    ("Espresso ritual", "event", "an espresso every morning", ["food"], "household"),
]
CHALLENGERS = [
    ("Public transport only", "no private cars"),
    ("Old garage rule", "any garage will do"),
]
INDEXED = [(n, d) for n, _, d, _, _ in CONCEPTS] + CHALLENGERS


def _similarity(query: str, name: str, description: str) -> float:
    """What the loopback endpoint's vectors give: cosine of two unit vectors (the indexed text
    of a concept is its name and description, ``gateway.services.concept_writes``)."""
    a, b = embed(query), embed(f"{name}\n{description}")
    return sum(x * y for x, y in zip(a, b, strict=True))


async def _seed(client: Any) -> None:
    for name, kind, description, domains, project in CONCEPTS:
        await seen(
            client, name, type=kind, description=description, domains=domains, project=project
        )
    for (name, description), kind in zip(CHALLENGERS, ("principle", "event"), strict=True):
        await seen(client, name, type=kind, description=description)
    await relate(client, "Public transport only", "Car maintenance", "contradicts")
    await relate(client, "Old garage rule", "Car maintenance", "supersedes")
    await tool(client, "confer_archive_concept", {"concept": "Old garage rule"})


async def _extension(database_url: str) -> str | None:
    conn = await asyncpg.connect(database_url)
    try:
        version: str | None = await conn.fetchval(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        )
        return version
    finally:
        await conn.close()


async def test_concept_search_is_semantic_with_pgvector(
    vector_database_url: str, llm_server: LLMServer
) -> None:
    assert await _extension(vector_database_url) is not None
    async with run_instance(
        vector_database_url, embedding_base_url=llm_server.base_url, embedding_model="fake-embed"
    ) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        async with mcp_client(instance, alice) as client:
            await _seed(client)
            conn = await asyncpg.connect(vector_database_url)
            try:
                indexed = await conn.fetchval(
                    "SELECT count(*) FROM embeddings WHERE owner_table = 'concept'"
                )
            finally:
                await conn.close()
            assert indexed == len(INDEXED)

            # "automobile" shares no word with any concept: only the vectors find the cars
            found = await tool(client, "confer_search_concepts", {"query": "automobile"})
            assert found["method"] == "semantic" and found["warnings"] == []
            expected = sorted(
                (
                    (round(_similarity("automobile", n, d), 6), n)
                    for n, d in INDEXED
                    if _similarity("automobile", n, d) >= 0.3
                ),
                reverse=True,
            )
            assert len(expected) >= 2  # the test would prove nothing otherwise
            got = [(round(c["score"], 6), c["name"]) for c in found["concepts"]]
            assert got == expected
            assert {c["method"] for c in found["concepts"]} == {"semantic"}
            assert "Espresso ritual" not in [c["name"] for c in found["concepts"]]
            scores = [c["score"] for c in found["concepts"]]
            assert scores == sorted(scores, reverse=True) and min(scores) >= 0.3

            # contested on semantic hits: one active and one archived challenger, kept apart
            by_name = {c["name"]: c for c in found["concepts"]}
            assert by_name["Car maintenance"]["contested"] == {
                "state": "contested",
                "by_active": [
                    {"name": "Public transport only", "status": "active", "relation": "contradicts"}
                ],
                "by_archived": [
                    {"name": "Old garage rule", "status": "archived", "relation": "supersedes"}
                ],
            }
            assert by_name["Car insurance"]["contested"]["state"] == "none"

            # the threshold is a similarity: above every score, nothing is left
            top = max(scores)
            strict = await tool(
                client,
                "confer_search_concepts",
                {"query": "automobile", "threshold": min(1.0, top + 0.01)},
            )
            assert strict["method"] == "semantic" and strict["concepts"] == []
            coffee = await tool(client, "confer_search_concepts", {"query": "coffee"})
            assert [c["name"] for c in coffee["concepts"]] == ["Espresso ritual"]

            in_domain = await tool(
                client, "confer_search_concepts", {"query": "automobile", "domain": "vehicles"}
            )
            assert {c["name"] for c in in_domain["concepts"]} <= {
                "Car maintenance",
                "Vehicle registration",
            }
            assert "Car maintenance" in [c["name"] for c in in_domain["concepts"]]
            in_project = await tool(
                client, "confer_search_concepts", {"query": "automobile", "project": "household"}
            )
            assert [c["name"] for c in in_project["concepts"]] == ["Car insurance"]

            opened = await tool(
                client,
                "confer_open_concept_session",
                {"topic": "cars", "queries": ["automobile"]},
            )
            ranked = {c["name"]: c for c in opened["concepts_ranked"]}
            assert ranked["Car maintenance"]["contested"]["state"] == "contested"

        # REST answers the same, by the same method; another user's agent sees nothing
        rest = await alice.request(
            "GET", "/v1/concepts/search", params={"query": "automobile", "contested": "false"}
        )
        assert rest.status_code == 200, rest.text
        body = rest.json()
        assert body["method"] == "semantic"
        assert [(round(c["score"], 6), c["name"]) for c in body["concepts"]] == expected
        assert all("contested" not in c or c["contested"] is None for c in body["concepts"])
        bobs = await bob.request("GET", "/v1/concepts/search", params={"query": "automobile"})
        assert bobs.json()["concepts"] == []

        # the embeddings endpoint down: search still answers, by full text, and says so
        llm_server.fake.embeddings_fail_with = 503
        fallback = await alice.request("GET", "/v1/concepts/search", params={"query": "car"})
        assert fallback.json()["method"] == "fulltext"
        assert {c["name"] for c in fallback.json()["concepts"]} >= {
            "Car maintenance",
            "Car insurance",
        }


async def test_memory_search_over_mcp_is_semantic_with_pgvector(
    vector_database_url: str, llm_server: LLMServer
) -> None:
    async with run_instance(
        vector_database_url, embedding_base_url=llm_server.base_url, embedding_model="fake-embed"
    ) as instance:
        alice = await instance.register("alice")
        base = f"/v1/agents/{agent_id(alice)}/memories"
        for content, project in (
            ("Alice drives an old car to work", "life"),
            ("Alice drinks espresso every morning", "life"),
            ("The car needs new tyres", "garage"),
        ):
            body = {"type": "fact", "content": content, "project_id": project}
            assert (await alice.request("POST", base, json=body)).status_code == 201
        async with mcp_client(instance, alice) as client:
            result = await client.call_tool("confer_search_memory", {"query": "automobile"})
            assert not result.is_error
            hits = (result.structured_content or {})["hits"]
            assert {h["method"] for h in hits} == {"semantic"}
            expected = sorted(
                (
                    (round(s, 6), t)
                    for t in ("Alice drives an old car to work", "The car needs new tyres")
                    if (s := sum(x * y for x, y in zip(embed("automobile"), embed(t), strict=True)))
                    >= 0.3
                ),
                reverse=True,
            )
            assert [(round(h["score"], 6), h["text"]) for h in hits] == expected
            scoped = await client.call_tool(
                "confer_search_memory", {"query": "automobile", "project": "garage"}
            )
            assert [h["text"] for h in (scoped.structured_content or {})["hits"]] == [
                "The car needs new tyres"
            ]


async def test_concept_search_falls_back_to_full_text_without_pgvector(
    database_url: str, llm_server: LLMServer
) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        # Where the test server itself has pgvector (the embedded fallback of tests/conftest.py
        # when no server is configured), this database is made like one without it.
        await conn.execute("DROP TABLE IF EXISTS embeddings")
    finally:
        await conn.close()
    async with run_instance(
        database_url, embedding_base_url=llm_server.base_url, embedding_model="fake-embed"
    ) as instance:
        alice = await instance.register("alice")
        async with mcp_client(instance, alice) as client:
            await _seed(client)
            found = await tool(client, "confer_search_concepts", {"query": "car"})
            assert found["method"] == "fulltext"
            names = [c["name"] for c in found["concepts"]]
            assert {"Car maintenance", "Car insurance"} <= set(names)
            assert {c["method"] for c in found["concepts"]} == {"fulltext"}
            scores = [c["score"] for c in found["concepts"]]
            assert scores == sorted(scores, reverse=True)
            by_name = {c["name"]: c for c in found["concepts"]}
            assert by_name["Car maintenance"]["contested"]["state"] == "contested"
            assert [c["name"] for c in by_name["Car maintenance"]["contested"]["by_archived"]] == [
                "Old garage rule"
            ]
            # a synonym is no full-text match: what only vectors find is not found
            nothing = await tool(client, "confer_search_concepts", {"query": "automobile"})
            assert nothing["method"] == "fulltext" and nothing["concepts"] == []
            scoped = await tool(
                client, "confer_search_concepts", {"query": "car", "project": "household"}
            )
            assert [c["name"] for c in scoped["concepts"]] == ["Car insurance"]
            in_domain = await tool(
                client, "confer_search_concepts", {"query": "car", "domain": "vehicles"}
            )
            assert [c["name"] for c in in_domain["concepts"]] == ["Car maintenance"]
        # no embeddings endpoint was asked for a concept: nowhere to store the vector
        assert not [r for r in llm_server.fake.requests if r["_path"] == "/v1/embeddings"]
