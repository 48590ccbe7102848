"""Search: PostgreSQL full-text search always; pgvector semantic search where the extension is.

The full-text tests run on the configured test server (which may lack pgvector); the semantic
tests run on an embedded PostgreSQL that has it, with embeddings from a loopback provider.
"""

from __future__ import annotations

import asyncpg

from tests.agents.conftest import LLMServer
from tests.agents.helpers import agent_id
from tests.gateway.harness import User, run_instance


async def _seed(alice: User) -> None:
    base = f"/v1/agents/{agent_id(alice)}/memories"
    for body in (
        {"type": "fact", "content": "Alice drives an old car to work", "project_id": "life"},
        {
            "type": "preference",
            "content": "Alice drinks espresso every morning",
            "project_id": "life",
            "domain": "food",
        },
        {
            "type": "decision",
            "content": "We chose PostgreSQL for the gateway storage",
            "project_id": "confer",
            "domain": "architecture",
        },
    ):
        assert (await alice.request("POST", base, json=body)).status_code == 201
    knowledge = {
        "category": "project",
        "title": "Storage",
        "content": "The gateway stores messages in PostgreSQL tables.",
        "project_id": "confer",
    }
    assert (await alice.request("POST", "/v1/knowledge", json=knowledge)).status_code == 201


async def test_fulltext_search_over_memories_knowledge_and_messages(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        await _seed(alice)
        conversation = await alice.direct_with(bob.did)
        await bob.send(conversation["id"], "Shall we benchmark PostgreSQL storage tomorrow?")

        found = (
            await alice.request("GET", "/v1/search", params={"q": "postgresql storage"})
        ).json()
        kinds = sorted(h["kind"] for h in found["hits"])
        assert kinds == ["knowledge", "memory", "message"]
        assert {h["method"] for h in found["hits"]} == {"fulltext"}
        message_hit = next(h for h in found["hits"] if h["kind"] == "message")
        assert message_hit["conversation_id"] == conversation["id"]

        # Stemming: "drove"? no; "drinks" → "drink" matches "drinking".
        drink = (await alice.request("GET", "/v1/search", params={"q": "drinking"})).json()
        assert [h["text"] for h in drink["hits"]] == ["Alice drinks espresso every morning"]

        filtered = await alice.request(
            "GET",
            "/v1/search",
            params={"q": "postgresql", "project": "confer", "domain": "architecture"},
        )
        assert [h["kind"] for h in filtered.json()["hits"]] == ["memory"]
        only_knowledge = await alice.request(
            "GET", "/v1/search", params={"q": "postgresql", "scope": "knowledge"}
        )
        assert [h["kind"] for h in only_knowledge.json()["hits"]] == ["knowledge"]

        # Bob sees the message he took part in, never Alice's memories or knowledge.
        bobs = (await bob.request("GET", "/v1/search", params={"q": "postgresql storage"})).json()
        assert [h["kind"] for h in bobs["hits"]] == ["message"]
        # A synonym is not a full-text match.
        assert (await alice.request("GET", "/v1/search", params={"q": "automobile"})).json()[
            "hits"
        ] == []


async def test_semantic_search_is_refused_clearly_when_unavailable(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        body = (await alice.request("GET", "/v1/search", params={"q": "car"})).json()
        assert body["semantic_available"] is False
        refused = await alice.request(
            "GET", "/v1/search", params={"q": "car", "method": "semantic"}
        )
        assert refused.status_code == 422
        assert refused.json()["code"] == "validation_failed"


async def test_embeddings_table_follows_the_extension(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        available = await conn.fetchval(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
        )
        has_table = await conn.fetchval("SELECT to_regclass('embeddings') IS NOT NULL")
    finally:
        await conn.close()
    assert has_table == bool(available)


async def test_semantic_search_with_pgvector(
    vector_database_url: str, llm_server: LLMServer
) -> None:
    async with run_instance(
        vector_database_url, embedding_base_url=llm_server.base_url, embedding_model="fake-embed"
    ) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        await _seed(alice)
        embedded = [r for r in llm_server.fake.requests if r["_path"] == "/v1/embeddings"]
        assert len(embedded) == 4  # three memories and one knowledge entry

        found = (await alice.request("GET", "/v1/search", params={"q": "automobile"})).json()
        assert found["semantic_available"] is True
        assert [(h["text"], h["method"]) for h in found["hits"]] == [
            ("Alice drives an old car to work", "semantic")
        ]
        assert 0.3 <= found["hits"][0]["score"] <= 1.0

        strict = await alice.request(
            "GET", "/v1/search", params={"q": "automobile", "threshold": 0.9}
        )
        assert strict.json()["hits"] == []

        both = (await alice.request("GET", "/v1/search", params={"q": "PostgreSQL storage"})).json()
        methods = {(h["kind"], h["method"]) for h in both["hits"]}
        assert ("knowledge", "semantic") in methods and ("memory", "semantic") in methods
        fulltext_only = await alice.request(
            "GET", "/v1/search", params={"q": "PostgreSQL storage", "method": "fulltext"}
        )
        assert {h["method"] for h in fulltext_only.json()["hits"]} == {"fulltext"}

        filtered = await alice.request(
            "GET", "/v1/search", params={"q": "espresso coffee", "domain": "food"}
        )
        assert [h["text"] for h in filtered.json()["hits"]] == [
            "Alice drinks espresso every morning"
        ]
        assert (await bob.request("GET", "/v1/search", params={"q": "automobile"})).json()[
            "hits"
        ] == []

        # Deleting a memory deletes its embedding too.
        memories = (await alice.request("GET", f"/v1/agents/{agent_id(alice)}/memories")).json()
        car = next(m for m in memories if "car" in m["content"])
        await alice.request("DELETE", f"/v1/agents/{agent_id(alice)}/memories/{car['id']}")
        conn = await asyncpg.connect(vector_database_url)
        try:
            left = await conn.fetchval(
                "SELECT count(*) FROM embeddings WHERE owner_id = $1", car["id"]
            )
        finally:
            await conn.close()
        assert left == 0


async def test_a_deleted_message_leaves_search(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        conversation = await alice.direct_with(bob.did)
        sent = await bob.send(conversation["id"], "the zeppelin launch code is 4711")
        query = {"q": "zeppelin", "scope": "messages"}
        before = (await alice.request("GET", "/v1/search", params=query)).json()["hits"]
        assert [h["id"] for h in before] == [sent["id"]]
        path = f"/v1/conversations/{conversation['id']}/messages/{sent['id']}"
        assert (await bob.request("DELETE", path)).status_code in (200, 204)
        after = (await alice.request("GET", "/v1/search", params=query)).json()["hits"]
        assert after == []
        async with instance.state.pool.acquire() as conn:
            indexed = await conn.fetchval(
                "SELECT count(*) FROM message_search WHERE search_tsv @@ to_tsquery('zeppelin')"
            )
        assert indexed == 0  # the index forgot the words too, not just the read path
