"""Consent for API-key callers and for REST conversations with other users' agents."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.gateway.harness import Instance, User, next_event, run_instance

A2A = {"A2A-Version": "1.0", "Content-Type": "application/json"}


@pytest.fixture
async def b(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as instance:
        yield instance


async def publish_agent(user: User, policies: dict[str, Any] | None = None) -> str:
    """Make the user's main agent public (optionally with a policy); returns its id."""
    body: dict[str, Any] = {"is_public": True}
    if policies is not None:
        body["policies"] = policies
    response = await user.request("PATCH", "/v1/agents/me", json=body)
    assert response.status_code == 200, response.text
    return str(user.profile["agent_did"].rsplit(":", 1)[1])


def held_for_owner(task: dict[str, Any]) -> bool:
    """Delivered, with the agent's answer (the task's result) waiting for its offline owner,
    as for a signed peer — not waiting for consent."""
    confer = (task.get("metadata") or {}).get("confer") or {}
    return bool(
        task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
        and confer.get("heldUntilOwnerReturns")
    )


async def issue_key(user: User) -> str:
    response = await user.request("POST", "/v1/api-keys", json={"name": "cli"})
    assert response.status_code == 201, response.text
    return str(response.json()["key"])


async def send(b: Instance, agent_id: str, key: str, text: str, **confer: str) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if confer:
        message["metadata"] = {"confer": confer}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    response = await b.client.post(
        f"/agents/{agent_id}/a2a", json=body, headers={**A2A, "Authorization": f"Bearer {key}"}
    )
    assert response.status_code == 200, response.text
    return dict(response.json()["result"]["task"])


async def get_task(b: Instance, agent_id: str, key: str, task_id: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
    response = await b.client.post(
        f"/agents/{agent_id}/a2a", json=body, headers={**A2A, "Authorization": f"Bearer {key}"}
    )
    return dict(response.json()["result"])


async def texts(b: Instance, sender_type: str) -> list[str]:
    async with b.state.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT content FROM messages WHERE sender_type = $1 ORDER BY id", sender_type
        )
    return [r["content"] for r in rows]


async def test_api_key_caller_meets_ask_and_the_owner_decides(b: Instance) -> None:
    bob, carol = await b.register("bob"), await b.register("carol")
    agent_id = await publish_agent(carol)  # default policy: ask
    key = await issue_key(bob)
    async with carol.websocket() as carol_ws, bob.websocket() as bob_ws:
        task = await send(b, agent_id, key, "May I read your calendar?")
        assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
        requested = (await next_event(carol_ws, "permission.requested"))["data"]
        assert requested["peer_id"] is None and requested["requested_by"] == bob.profile["id"]
        assert requested["scope_json"]["requester_did"] == bob.did
        assert await texts(b, "user") == []  # held until carol decides
        decided = await carol.request(
            "POST", f"/v1/permissions/{requested['id']}/decision", json={"decision": "allow_once"}
        )
        assert decided.status_code == 200, decided.text
        delivered = (await next_event(bob_ws, "message.created"))["data"]
        while delivered["sender_type"] != "user":  # the agent's answer may come first
            delivered = (await next_event(bob_ws, "message.created"))["data"]
        assert delivered["content"] == "May I read your calendar?"
        assert delivered["sender_did"] == bob.did and delivered["via"] == "api"
    assert await texts(b, "user") == ["May I read your calendar?"]
    assert await texts(b, "own_agent") == ["Approved: your request was delivered."]
    settled = await get_task(b, agent_id, key, task["id"])
    assert settled["status"]["state"] == "TASK_STATE_COMPLETED"
    # allow_once is not remembered: the next message asks again.
    again = await send(b, agent_id, key, "And tomorrow's?")
    assert again["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"


async def test_api_key_caller_denied_by_policy_stores_nothing(b: Instance) -> None:
    bob, carol = await b.register("bob"), await b.register("carol")
    policy = {"default": "auto", "rules": [{"peer": bob.did, "action": "ask", "effect": "deny"}]}
    agent_id = await publish_agent(carol, policy)
    task = await send(b, agent_id, await issue_key(bob), "let me in")
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert await texts(b, "user") == []
    # Someone else, not matched by the rule, gets the agent default (auto → allow).
    dave = await b.register("dave")
    allowed = await send(b, agent_id, await issue_key(dave), "hello")
    assert held_for_owner(allowed)  # delivered; the answer waits for carol, offline
    assert await texts(b, "user") == ["hello"]
    async with b.state.pool.acquire() as conn:
        details = await conn.fetch(
            "SELECT details_json FROM audit_log WHERE action = 'policy.evaluated' ORDER BY id"
        )
    assert [d["details_json"]["effect"] for d in details] == ["deny", "allow"]


async def test_allow_always_is_remembered_for_that_user_only(b: Instance) -> None:
    bob, carol, dave = [await b.register(n) for n in ("bob", "carol", "dave")]
    agent_id = await publish_agent(carol)
    bob_key = await issue_key(bob)
    await send(b, agent_id, bob_key, "first")
    [pending] = (await carol.request("GET", "/v1/permissions?pending=true")).json()
    decided = await carol.request(
        "POST",
        f"/v1/permissions/{pending['id']}/decision",
        json={"decision": "allow_always", "scope": "peer"},
    )
    assert decided.status_code == 200, decided.text
    second = await send(b, agent_id, bob_key, "second")
    assert held_for_owner(second)  # allowed by the grant; the answer waits for carol
    other = await send(b, agent_id, await issue_key(dave), "dave here")
    assert other["status"]["state"] == "TASK_STATE_AUTH_REQUIRED" and not held_for_owner(other)
    assert await texts(b, "user") == ["first", "second"]


async def test_own_agent_through_an_api_key_never_asks(b: Instance) -> None:
    bob = await b.register("bob")
    agent_id = str(bob.profile["agent_did"].rsplit(":", 1)[1])
    task = await send(b, agent_id, await issue_key(bob), "note to self")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_rest_refuses_other_users_private_agents(b: Instance) -> None:
    alice, bob = await b.register("alice"), await b.register("bob")
    bob_agent = bob.profile["agent_did"]
    for kind in ("direct_user_agent", "direct_agent_agent"):
        refused = await alice.request(
            "POST", "/v1/conversations", json={"type": kind, "participant_did": bob_agent}
        )
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "agent_not_reachable"
    group_body = {"type": "group", "name": "G", "participant_dids": [bob.did, bob_agent]}
    refused = await alice.request("POST", "/v1/conversations", json=group_body)
    assert refused.status_code == 403 and refused.json()["code"] == "agent_not_reachable"
    group = await alice.request(
        "POST", "/v1/conversations", json={"type": "group", "participant_dids": [bob.did]}
    )
    gid = group.json()["id"]
    add = await alice.request(
        "POST", f"/v1/conversations/{gid}/participants", json={"did": bob_agent}
    )
    assert add.status_code == 403 and add.json()["code"] == "agent_not_reachable"
    async with b.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM conversations") == 1
        joined = "SELECT count(*) FROM conversation_participants WHERE participant_type = $1"
        assert await conn.fetchval(joined, "own_agent") == 0
    # Alice's own agent, and Bob's once public, are fine.
    own = await alice.request(
        "POST", f"/v1/conversations/{gid}/participants", json={"did": alice.profile["agent_did"]}
    )
    assert own.status_code == 201, own.text
    await publish_agent(bob)
    direct = await alice.request(
        "POST",
        "/v1/conversations",
        json={"type": "direct_user_agent", "participant_did": bob_agent},
    )
    assert direct.status_code == 201, direct.text
    add = await alice.request(
        "POST", f"/v1/conversations/{gid}/participants", json={"did": bob_agent}
    )
    assert add.status_code == 201, add.text
