"""A deleted or disabled account is gone everywhere: API keys, agents, cards, A2A endpoints."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.gateway.harness import Instance, User, run_instance
from tests.gateway.test_a2a import A2A, call, issue_key, make_public, text_message

PASSWORD = "correct horse battery"


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url, admin_usernames="root") as running:
        yield running


async def _send(instance: Instance, agent_id: str, key: str) -> int:
    body = call("SendMessage", text_message("still there?"))
    response = await instance.client.post(
        f"/agents/{agent_id}/a2a", json=body, headers={**A2A, "Authorization": f"Bearer {key}"}
    )
    return response.status_code


async def _reachable(instance: Instance, user: User, agent_id: str, key: str) -> list[int]:
    card = await instance.client.get(f"/agents/{agent_id}/.well-known/agent-card.json")
    doc = await instance.client.get(f"/agents/{agent_id}/did.json")
    listed = agent_id in (await instance.client.get("/.well-known/agent-card.json")).text
    return [card.status_code, doc.status_code, await _send(instance, agent_id, key), int(listed)]


async def test_deleting_an_account_kills_its_keys_and_agent(instance: Instance) -> None:
    bob = await instance.register("bob", PASSWORD)
    agent_id = await make_public(instance, bob)
    key = await issue_key(bob)
    assert await _reachable(instance, bob, agent_id, key) == [200, 200, 200, 1]
    deleted = await bob.request("DELETE", "/v1/me", json={"password": PASSWORD})
    assert deleted.status_code == 204
    card, doc, sent, listed = await _reachable(instance, bob, agent_id, key)
    assert (card, doc, sent, listed) == (404, 404, 401, 0)


async def test_disabling_an_account_suspends_its_keys_and_agent(instance: Instance) -> None:
    root = await instance.register("root", PASSWORD)
    carol = await instance.register("carol", PASSWORD)
    agent_id = await make_public(instance, carol)
    key = await issue_key(carol)
    alice = await instance.register("alice", PASSWORD)
    other_key = await issue_key(alice)
    disable = await root.request(
        "POST", f"/v1/admin/users/{carol.profile['id']}/disable", json={"reason": "spam"}
    )
    assert disable.status_code == 200, disable.text
    assert await _send(instance, agent_id, key) == 401  # her own key
    assert await _send(instance, agent_id, other_key) == 404  # her agent, by anyone
    enable = await root.request("POST", f"/v1/admin/users/{carol.profile['id']}/enable")
    assert enable.status_code == 200
    assert await _send(instance, agent_id, key) == 200
