"""Races that must not split state: concurrent requests over real HTTP to a real instance.

Each test fires the same get-or-create from several requests at once (``asyncio.gather``) and
checks that every request answers 2xx (or a stable 409) and that one row is left.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import Instance, run_instance


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


async def test_first_uses_of_a_new_concept_at_once_make_one_concept(instance: Instance) -> None:
    """Two sessions record the first use of one concept at once: one concept, every use counted."""
    alice = await instance.register("alice")
    for round_ in range(4):
        name = f"Shared concept {round_}"
        # Crossed domain lists as well: their rows are created in one order, not the caller's.
        slugs = [f"{round_}_a", f"{round_}_b", f"{round_}_c"]
        bodies = [
            {
                "concept": name,
                "type": "principle",
                "session": f"s{i}",
                "domains": slugs[:: -1 if i % 2 else 1],
            }
            for i in range(6)
        ]
        results = await asyncio.gather(
            *(alice.request("POST", "/v1/concepts/occurrences", json=body) for body in bodies)
        )
        assert all(r.status_code == 201 for r in results), [r.text for r in results]
        assert len({r.json()["concept_id"] for r in results}) == 1
        assert sum(r.json()["created"] for r in results) == 1
    async with instance.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM concepts") == 4
        assert await conn.fetchval("SELECT sum(occurrence_count) FROM concepts") == 24
        assert await conn.fetchval("SELECT count(*) FROM concept_domains") == 12


async def test_concurrent_preference_changes_keep_each_other(instance: Instance) -> None:
    """Two devices change different preferences at once: both changes are kept."""
    alice = await instance.register("alice")
    zones = ["Europe/Madrid", "Asia/Tokyo", "America/Lima", "Africa/Nairobi"]
    for round_, zone in enumerate(zones):
        language = ["de", "ja", "es", "sw"][round_]
        results = await asyncio.gather(
            alice.request("PATCH", "/v1/me", json={"preferences": {"timezone": zone}}),
            alice.request("PATCH", "/v1/me", json={"preferences": {"language": language}}),
            alice.request(
                "PATCH",
                "/v1/me",
                json={"preferences": {"notification": {"email": round_ % 2 == 0}}},
            ),
        )
        assert all(r.status_code == 200 for r in results), [r.text for r in results]
        preferences = (await alice.request("GET", "/v1/me")).json()["preferences"]
        assert preferences["timezone"] == zone
        assert preferences["language"] == language
        assert preferences["notification"]["email"] is (round_ % 2 == 0)


async def test_concurrent_model_choices_for_different_jobs_keep_each_other(
    instance: Instance,
) -> None:
    """Two PATCHes of the agent's model for different jobs at once: both choices are kept."""
    alice = await instance.register("alice")
    current = (await alice.request("GET", "/v1/agents/me")).json()["model_config"]
    provider = current["brain"]["provider"]
    jobs = ["brain", "quick", "translation", "summarize"]
    for round_ in range(4):
        results = await asyncio.gather(
            *(
                alice.request(
                    "PATCH",
                    "/v1/agents/me",
                    json={
                        "model_config": {job: {"provider": provider, "model": f"{job}-{round_}"}}
                    },
                )
                for job in jobs
            )
        )
        assert all(r.status_code == 200 for r in results), [r.text for r in results]
        stored = (await alice.request("GET", "/v1/agents/me")).json()["model_config"]
        assert {job: stored[job]["model"] for job in jobs} == {j: f"{j}-{round_}" for j in jobs}


async def test_concurrent_trust_and_policy_changes_of_a_contact_keep_each_other(
    instance: Instance,
) -> None:
    """A PATCH of a contact's trust level and one of its policy overrides at once: both stay
    (they share the ``policy_overrides_json`` column, so each used to write the other's old
    half back)."""
    bob = await instance.register("bob")
    async with run_fake_peer() as peer:
        created = await bob.request("POST", "/v1/contacts", json={"did": peer.did})
        assert created.status_code == 201, created.text
        path = f"/v1/contacts/{created.json()['id']}"
        for round_, (trust, default) in enumerate(
            [("trusted", "deny"), ("known", "auto"), ("blocked", "ask"), ("trusted", "deny")]
        ):
            results = await asyncio.gather(
                bob.request("PATCH", path, json={"trust_level": trust}),
                bob.request("PATCH", path, json={"policy_overrides": {"default": default}}),
            )
            assert all(r.status_code == 200 for r in results), [r.text for r in results]
            stored = (await bob.request("GET", path)).json()
            assert (stored["trust_level"], stored["policy_overrides"]["default"]) == (
                trust,
                default,
            ), round_
