"""Memories, knowledge and ambient context over real HTTP: CRUD, owner-only, de-duplication."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.clock import Clock
from tests.agents.helpers import agent_id
from tests.gateway.harness import Instance, run_instance


class MovableClock(Clock):
    pass


@pytest.fixture
async def clock() -> MovableClock:
    return MovableClock()


@pytest.fixture
async def instance(database_url: str, clock: MovableClock) -> AsyncIterator[Instance]:
    async with run_instance(database_url, clock=clock) as running:
        yield running


async def test_memory_crud_by_its_owner(instance: Instance) -> None:
    alice = await instance.register("alice")
    base = f"/v1/agents/{agent_id(alice)}/memories"
    created = await alice.request(
        "POST",
        base,
        json={
            "type": "preference",
            "content": "Alice prefers short answers",
            "importance": 8,
            "project_id": "confer",
            "domain": "style",
        },
    )
    assert created.status_code == 201, created.text
    memory = created.json()
    assert memory["uses"] == 0 and memory["last_used_at"] is None and memory["importance"] == 8
    await alice.request("POST", base, json={"type": "fact", "content": "Alice lives in Lisbon"})

    listed = (await alice.request("GET", base)).json()
    assert [m["content"] for m in listed] == [
        "Alice prefers short answers",
        "Alice lives in Lisbon",
    ]
    facts = (await alice.request("GET", base, params={"type": "fact"})).json()
    assert [m["type"] for m in facts] == ["fact"]

    patched = await alice.request("PATCH", f"{base}/{memory['id']}", json={"importance": 3})
    assert patched.status_code == 200 and patched.json()["importance"] == 3
    assert patched.json()["content"] == "Alice prefers short answers"

    assert (await alice.request("DELETE", f"{base}/{memory['id']}")).status_code == 204
    gone = await alice.request("GET", f"{base}/{memory['id']}")
    assert gone.status_code == 404 and gone.json()["code"] == "memory_not_found"


async def test_memories_are_owner_only_and_validated(instance: Instance) -> None:
    alice = await instance.register("alice")
    mallory = await instance.register("mallory")
    base = f"/v1/agents/{agent_id(alice)}/memories"
    memory = (await alice.request("POST", base, json={"type": "fact", "content": "secret"})).json()

    for method, path, body in [
        ("GET", base, None),
        ("POST", base, {"type": "fact", "content": "planted"}),
        ("GET", f"{base}/{memory['id']}", None),
        ("PATCH", f"{base}/{memory['id']}", {"content": "changed"}),
        ("DELETE", f"{base}/{memory['id']}", None),
    ]:
        response = await mallory.request(method, path, json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["code"] == "agent_not_found"
    still = (await alice.request("GET", f"{base}/{memory['id']}")).json()
    assert still["content"] == "secret"

    for body in (
        {"type": "gossip", "content": "x"},
        {"type": "fact", "content": ""},
        {"type": "fact", "content": "x", "importance": 11},
    ):
        bad = await alice.request("POST", base, json=body)
        assert bad.status_code == 422, body
        assert bad.headers["content-type"].startswith("application/problem+json")
    not_ulid = await alice.request("GET", "/v1/agents/nope/memories")
    assert not_ulid.status_code == 422
    null_content = await alice.request("PATCH", f"{base}/{memory['id']}", json={"content": None})
    assert null_content.status_code == 422


async def test_expired_memories_are_hidden_unless_asked_for(
    instance: Instance, clock: MovableClock
) -> None:
    alice = await instance.register("alice")
    base = f"/v1/agents/{agent_id(alice)}/memories"
    soon = clock.now().replace(microsecond=0).isoformat()
    await alice.request(
        "POST", base, json={"type": "fact", "content": "old news", "expires_at": soon}
    )
    clock.offset = 5
    assert (await alice.request("GET", base)).json() == []
    everything = (await alice.request("GET", base, params={"include_expired": "true"})).json()
    assert [m["content"] for m in everything] == ["old news"]


async def test_knowledge_is_deduplicated_and_scoped_to_agents(instance: Instance) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    entry = {
        "category": "project",
        "title": "Deploy",
        "content": "Deploys run from main.",
        "tags": ["ops"],
        "priority": 5,
        "source": "wiki",
    }
    first = await alice.request("POST", "/v1/knowledge", json=entry)
    assert first.status_code == 201, first.text
    again = await alice.request("POST", "/v1/knowledge", json={**entry, "title": "Other"})
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert len(first.json()["content_hash"]) == 64
    # Bob may store the same text: de-duplication is per owner.
    assert (await bob.request("POST", "/v1/knowledge", json=entry)).status_code == 201

    private = await alice.request(
        "POST",
        "/v1/knowledge",
        json={
            "category": "personal",
            "content": "Only for my agent",
            "allowed_agents": [agent_id(alice)],
        },
    )
    assert private.status_code == 201
    foreign = await alice.request(
        "POST",
        "/v1/knowledge",
        json={"category": "personal", "content": "x", "allowed_agents": [agent_id(bob)]},
    )
    assert foreign.status_code == 422
    readable = await alice.request("GET", "/v1/knowledge", params={"agent_id": agent_id(alice)})
    assert {k["content"] for k in readable.json()} == {
        "Deploys run from main.",
        "Only for my agent",
    }

    duplicate = await alice.request(
        "PATCH", f"/v1/knowledge/{private.json()['id']}", json={"content": "Deploys run from main."}
    )
    assert duplicate.status_code == 409 and duplicate.json()["code"] == "knowledge_duplicate"
    assert (await bob.request("GET", f"/v1/knowledge/{first.json()['id']}")).status_code == 404
    assert (await bob.request("DELETE", f"/v1/knowledge/{first.json()['id']}")).status_code == 404
    assert (await alice.request("DELETE", f"/v1/knowledge/{first.json()['id']}")).status_code == 204


async def test_ambient_context_expires(instance: Instance, clock: MovableClock) -> None:
    alice = await instance.register("alice")
    assert (await alice.request("GET", "/v1/ambient-context/latest")).json() is None
    snapshot = {
        "servers": {"architect": {"status": "online"}},
        "git_state": {"branch": "main"},
        "ttl_seconds": 60,
    }
    created = await alice.request("POST", "/v1/ambient-context", json=snapshot)
    assert created.status_code == 201
    latest = (await alice.request("GET", "/v1/ambient-context/latest")).json()
    assert latest["git_state"] == {"branch": "main"}
    bob = await instance.register("bob")
    assert (await bob.request("GET", "/v1/ambient-context/latest")).json() is None
    clock.offset = 61
    assert (await alice.request("GET", "/v1/ambient-context/latest")).json() is None
