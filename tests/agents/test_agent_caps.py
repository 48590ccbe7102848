"""Caps on agent tasks running at once, per owner and per peer: with a slow loopback model,
tasks beyond a cap wait queued and all of them are answered — real instances, real HTTP."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from tests.agents.conftest import LLMServer
from tests.agents.helpers import agent_id, set_model, talk_to_agent
from tests.gateway.harness import Instance, run_instance

PROVIDERS_KEY = "loop"


async def tasks(instance: Instance) -> list[dict[str, Any]]:
    async with instance.state.pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT t.status, t.started_at, t.finished_at, a.user_id, m.sender_did
               FROM agent_tasks t JOIN agents a ON a.id = t.agent_id
               JOIN messages m ON m.id = t.trigger_message_id ORDER BY t.started_at"""
        )
    return [dict(r) for r in rows]


async def all_done(instance: Instance, count: int, within: float = 90.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + within
    while True:
        rows = await tasks(instance)
        if len(rows) == count and all(r["status"] == "done" for r in rows):
            return rows
        assert time.monotonic() < deadline, f"tasks not done: {[r['status'] for r in rows]}"
        await asyncio.sleep(0.1)


def overlapping(rows: list[dict[str, Any]]) -> bool:
    """True when two of the tasks ran at the same time."""
    spans = sorted((r["started_at"], r["finished_at"]) for r in rows)
    return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))


async def test_one_owner_waits_for_its_cap_and_another_owner_does_not(
    database_url: str, llm_server: LLMServer
) -> None:
    providers = {PROVIDERS_KEY: {"base_url": llm_server.base_url, "wire": "openai"}}
    llm_server.fake.delay = 1.0
    async with run_instance(
        database_url, llm_providers=providers, agent_max_running_per_owner=1
    ) as instance:
        alice, bob = await instance.register("alice"), await instance.register("bob")
        for user in (alice, bob):
            await set_model(database_url, user, "brain", PROVIDERS_KEY, "slow-1")
        groups = []
        for i in range(3):
            group = await alice.request(
                "POST",
                "/v1/conversations",
                json={
                    "type": "group",
                    "name": f"g{i}",
                    "participant_dids": [bob.did, alice.profile["agent_did"]],
                },
            )
            assert group.status_code == 201, group.text
            groups.append(group.json()["id"])
        for i, cid in enumerate(groups):
            await alice.send(cid, f"@{agent_id(alice)} question {i}")
        await bob.send(await talk_to_agent(bob), "a question of my own")

        rows = await all_done(instance, 4)
        alices = [r for r in rows if r["user_id"] == alice.profile["id"]]
        assert len(alices) == 3 and not overlapping(alices)  # one at a time, none lost
        assert overlapping(rows)  # bob's ran beside one of alice's: the cap is per owner
        assert llm_server.fake.max_in_flight == 2
        for cid in groups:
            page = (await alice.request("GET", f"/v1/conversations/{cid}/messages")).json()
            assert [m["sender_type"] for m in page["items"]].count("own_agent") == 1


async def test_one_peer_waits_for_its_cap_across_owners(
    make_database, llm_server: LLMServer
) -> None:
    providers = {PROVIDERS_KEY: {"base_url": llm_server.base_url, "wire": "openai"}}
    llm_server.fake.delay = 1.0
    async with (
        run_instance(await make_database()) as a,
        run_instance(
            await make_database(), llm_providers=providers, agent_max_running_per_peer=1
        ) as b,
    ):
        alice = await a.register("alice")
        owners = [await b.register(name) for name in ("bob", "carol", "dave")]
        conversations = []
        for owner in owners:
            await set_model(b.settings.database_url or "", owner, "brain", PROVIDERS_KEY, "slow-1")
            added = await owner.request(
                "POST",
                "/v1/contacts",
                json={"did": alice.did, "policy_overrides": {"default": "auto"}},
            )
            assert added.status_code in (200, 201), added.text
            patched = await owner.request(
                "PATCH",
                "/v1/me",
                json={"preferences": {"privacy": {"allow_offline_response": True}}},
            )
            assert patched.status_code == 200, patched.text
            conversations.append((await alice.direct_with(owner.profile["agent_did"]))["id"])
        for cid in conversations:
            await alice.send(cid, "are you free?")

        rows = await all_done(b, 3)
        assert {r["sender_did"] for r in rows} == {alice.did}
        assert not overlapping(rows)  # three owners, one peer: one at a time
        assert llm_server.fake.max_in_flight == 1
        # Every answer reached alice.
        deadline = time.monotonic() + 30
        for cid in conversations:
            while True:
                page = (await alice.request("GET", f"/v1/conversations/{cid}/messages")).json()
                if any(m["content"].startswith("echo: ") for m in page["items"]):
                    break
                assert time.monotonic() < deadline, page
                await asyncio.sleep(0.2)
