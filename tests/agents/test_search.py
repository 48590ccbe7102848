"""Search: PostgreSQL full-text search always; pgvector semantic search where the extension is.

The full-text tests run on the configured test server (which may lack pgvector); the semantic
tests run on an embedded PostgreSQL that has it, with embeddings from a loopback provider.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from gateway.agents.embeddings import EmbeddingError
from gateway.store import search as search_store
from gateway.store.search import MESSAGE_EMBEDDINGS_CHANNEL as CHANNEL
from gateway.workers import message_embeddings
from gateway.workers.message_embeddings import MessageEmbeddingIndexer
from tests.agents.conftest import LLMServer
from tests.agents.helpers import agent_id
from tests.agents.llmserver import embed
from tests.gateway.harness import Instance, User, run_instance


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


# --- Semantic search over messages (embedded by the background indexer) -------------------


async def _eventually(check: Callable[[], Awaitable[bool]], within: float = 15.0) -> None:
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110 (polls a background worker's effect)
            await asyncio.sleep(0.05)


def _indexer(instance: Instance, batch: int = 32) -> MessageEmbeddingIndexer:
    return MessageEmbeddingIndexer(
        instance.state.pool, instance.state.context.embedder, batch=batch
    )


def _embedding_posts(llm: LLMServer) -> list[dict[str, Any]]:
    return [r for r in llm.fake.requests if r["_path"] == "/v1/embeddings"]


async def _semantic(user: User, q: str, **params: Any) -> list[dict[str, Any]]:
    query = {"q": q, "scope": "messages", "method": "semantic", **params}
    response = await user.request("GET", "/v1/search", params=query)
    assert response.status_code == 200, response.text
    return list(response.json()["hits"])


async def _message_embeddings(instance: Instance, message_id: str) -> int:
    async with instance.state.pool.acquire() as conn:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM embeddings WHERE owner_table = 'message' AND owner_id = $1",
                message_id,
            )
        )


async def test_messages_become_semantically_findable_after_indexing(
    vector_database_url: str, llm_server: LLMServer
) -> None:
    async with run_instance(
        vector_database_url,
        embedding_base_url=llm_server.base_url,
        embedding_model="fake-embed",
        embed_messages=False,  # this test drives the indexer itself
    ) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        carol = await instance.register("carol")
        ours = await alice.direct_with(bob.did)
        theirs = await carol.direct_with(bob.did)
        car = await bob.send(ours["id"], "my car is red")
        await alice.send(ours["id"], "see you tomorrow")
        vehicle = await bob.send(theirs["id"], "the vehicle needs tyres")
        assert await _semantic(alice, "automobile") == []  # nothing is embedded yet

        indexer = _indexer(instance, batch=2)
        before = len(_embedding_posts(llm_server))
        assert await indexer.run_once() == 3
        posts = _embedding_posts(llm_server)[before:]
        assert [len(p["input"]) for p in posts] == [2, 1]  # one request per batch
        assert await indexer.run_once() == 0  # nothing left: no request either
        assert len(_embedding_posts(llm_server)) == before + 2

        hits = await _semantic(alice, "automobile")
        assert [(h["id"], h["kind"], h["method"]) for h in hits] == [
            (car["id"], "message", "semantic")
        ]
        assert hits[0]["conversation_id"] == ours["id"] and hits[0]["text"] == "my car is red"
        assert 0.3 <= hits[0]["score"] <= 1.0
        # Carol is not in Alice's conversation, nor Alice in Carol's.
        assert [h["id"] for h in await _semantic(carol, "automobile")] == [vehicle["id"]]
        assert {h["id"] for h in await _semantic(bob, "automobile")} == {
            car["id"],
            vehicle["id"],
        }
        assert await _semantic(alice, "automobile", threshold=0.9) == []
        # Messages have no project or domain: either filter leaves them out.
        assert await _semantic(alice, "automobile", project="life") == []
        assert await _semantic(alice, "automobile", domain="food") == []
        # auto: a message both methods find is one hit, the semantic one.
        both = await alice.request("GET", "/v1/search", params={"q": "car", "scope": "messages"})
        assert [(h["id"], h["method"]) for h in both.json()["hits"]] == [(car["id"], "semantic")]


async def test_edited_and_deleted_messages_follow_in_semantic_search(
    vector_database_url: str, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A floor ahead of every id: only the edit notification can bring the message back.
    monkeypatch.setattr(message_embeddings, "GRACE_SECONDS", -3600.0)
    async with run_instance(
        vector_database_url,
        embedding_base_url=llm_server.base_url,
        embedding_model="fake-embed",
        embed_messages=False,
    ) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        conversation = await alice.direct_with(bob.did)
        sent = await bob.send(conversation["id"], "my car is red")
        indexer = _indexer(instance)
        listener = await asyncpg.connect(vector_database_url)
        try:
            await listener.add_listener(CHANNEL, indexer.edited)
            assert await indexer.run_once() == 1
            assert [h["id"] for h in await _semantic(alice, "automobile")] == [sent["id"]]

            path = f"/v1/conversations/{conversation['id']}/messages/{sent['id']}"
            edit = {"version": 1, "content": "my bicycle is red"}
            assert (await bob.request("PATCH", path, json=edit)).status_code == 200
            assert await _message_embeddings(instance, sent["id"]) == 0
            assert await _semantic(alice, "automobile") == []

            async def embedded_again() -> bool:  # once the notification has arrived
                return await indexer.run_once() == 1

            await _eventually(embedded_again)
        finally:
            await listener.close()
        assert await _semantic(alice, "automobile") == []
        hits = await _semantic(alice, "bicycle")
        assert [(h["id"], h["text"]) for h in hits] == [(sent["id"], "my bicycle is red")]

        assert (await bob.request("DELETE", path)).status_code in (200, 204)
        assert await _message_embeddings(instance, sent["id"]) == 0
        assert await _semantic(alice, "bicycle") == []
        assert await indexer.run_once() == 0  # a deleted message is never embedded again


async def test_endpoint_failures_do_not_lose_messages(
    vector_database_url: str, llm_server: LLMServer
) -> None:
    async with run_instance(
        vector_database_url,
        embedding_base_url=llm_server.base_url,
        embedding_model="fake-embed",
        embed_messages=False,
    ) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        conversation = await alice.direct_with(bob.did)
        car = await bob.send(conversation["id"], "my car is red")
        indexer = _indexer(instance)

        llm_server.fake.embeddings_fail_with = 503
        before = len(_embedding_posts(llm_server))
        with pytest.raises(EmbeddingError):
            await indexer.run_once()
        assert len(_embedding_posts(llm_server)) == before + 2  # the batch, then one probe
        assert await _message_embeddings(instance, car["id"]) == 0
        # Search still answers, by full text, while the endpoint is down.
        down = await alice.request("GET", "/v1/search", params={"q": "car"})
        assert [(h["id"], h["method"]) for h in down.json()["hits"]] == [(car["id"], "fulltext")]

        llm_server.fake.embeddings_fail_with = None
        assert await indexer.run_once() == 1
        assert [h["id"] for h in await _semantic(alice, "automobile")] == [car["id"]]

        # An endpoint that refuses one input: the others are embedded, that one is skipped.
        llm_server.fake.embeddings_refuse = "poison"
        await bob.send(conversation["id"], "poison pill")
        wash = await bob.send(conversation["id"], "car wash")
        assert await indexer.run_once() == 1
        assert await _message_embeddings(instance, wash["id"]) == 1
        before = len(_embedding_posts(llm_server))
        assert await indexer.run_once() == 0
        assert len(_embedding_posts(llm_server)) == before  # the refused one is not retried


async def test_the_running_app_embeds_messages(
    vector_database_url: str, llm_server: LLMServer
) -> None:
    async with run_instance(
        vector_database_url,
        embedding_base_url=llm_server.base_url,
        embedding_model="fake-embed",
        message_embedding_poll_seconds=0.1,
    ) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        conversation = await alice.direct_with(bob.did)

        async def found(user: User, q: str) -> list[str]:
            return [h["id"] for h in await _semantic(user, q)]

        async def until(user: User, q: str, expected: list[str]) -> None:
            async def check() -> bool:
                return await found(user, q) == expected

            await _eventually(check)

        async def tried() -> bool:
            return bool(_embedding_posts(llm_server))

        llm_server.fake.embeddings_fail_with = 500  # the indexer backs off, the app serves
        car = await bob.send(conversation["id"], "my car is red")
        await _eventually(tried)
        assert await found(alice, "automobile") == []
        assert (await instance.client.get("/healthz")).status_code == 200
        llm_server.fake.embeddings_fail_with = None
        await until(alice, "automobile", [car["id"]])

        path = f"/v1/conversations/{conversation['id']}/messages/{car['id']}"
        edit = {"version": 1, "content": "my bicycle is red"}
        assert (await bob.request("PATCH", path, json=edit)).status_code == 200
        await until(alice, "bicycle", [car["id"]])
        assert await found(alice, "automobile") == []


async def test_an_embedding_of_text_that_changed_meanwhile_is_not_stored(
    vector_database_url: str, llm_server: LLMServer
) -> None:
    async with run_instance(
        vector_database_url,
        embedding_base_url=llm_server.base_url,
        embedding_model="fake-embed",
        embed_messages=False,
    ) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        conversation = await alice.direct_with(bob.did)
        sent = await bob.send(conversation["id"], "my car is red")
        pool = instance.state.pool
        async with pool.acquire() as conn:
            [row] = await search_store.list_unembedded_messages(conn, model="fake-embed", limit=9)
        assert (row["id"], row["content"]) == (sent["id"], "my car is red")

        # Edited between reading and storing: the old text's vector is dropped.
        path = f"/v1/conversations/{conversation['id']}/messages/{sent['id']}"
        edit = {"version": 1, "content": "my bicycle is red"}
        assert (await bob.request("PATCH", path, json=edit)).status_code == 200
        stale = [(sent["id"], "my car is red", embed("my car is red"))]
        async with pool.acquire() as conn, conn.transaction():
            assert (
                await search_store.store_message_embeddings(conn, model="fake-embed", items=stale)
                == []
            )

        # A row another transaction is changing right now is left for a later pass.
        fresh = [(sent["id"], "my bicycle is red", embed("my bicycle is red"))]
        locker = await asyncpg.connect(vector_database_url)
        try:
            async with locker.transaction():
                await locker.execute("SELECT 1 FROM messages WHERE id = $1 FOR UPDATE", sent["id"])
                async with pool.acquire() as conn, conn.transaction():
                    assert (
                        await search_store.store_message_embeddings(
                            conn, model="fake-embed", items=fresh
                        )
                        == []
                    )
        finally:
            await locker.close()
        async with pool.acquire() as conn, conn.transaction():
            assert await search_store.store_message_embeddings(
                conn, model="fake-embed", items=fresh
            ) == [sent["id"]]
        assert [h["id"] for h in await _semantic(alice, "bicycle")] == [sent["id"]]
