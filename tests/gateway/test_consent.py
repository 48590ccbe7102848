"""Consent across real instances: ask → decide → the answer travels back, signed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.services import consent
from tests.gateway.fakepeer import FakePeer, run_fake_peer
from tests.gateway.harness import Instance, User, next_event, run_instance


@pytest.fixture
async def pair(make_database) -> AsyncIterator[tuple[Instance, Instance]]:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        yield a, b


async def rows(instance: Instance, sql: str, *args: Any) -> list[dict[str, Any]]:
    async with instance.state.pool.acquire() as conn:
        return [dict(r) for r in await conn.fetch(sql, *args)]


async def ask_bobs_agent(a: Instance, b: Instance) -> tuple[User, User, dict[str, Any], Any]:
    """alice@A writes to bob's agent@B (policy default: ask); returns the request event."""
    alice = await a.register("alice")
    bob = await b.register("bob")
    conversation = await alice.direct_with(bob.profile["agent_did"])
    return alice, bob, conversation, None


async def test_ask_then_allow_once_delivers_and_the_approval_travels_back(pair) -> None:
    a, b = pair
    alice, bob, conversation, _ = await ask_bobs_agent(a, b)
    async with alice.websocket() as alice_ws, bob.websocket() as bob_ws:
        question = await alice.send(conversation["id"], "May I see the Q3 plan?")
        notice = (await next_event(bob_ws, "message.created"))["data"]
        requested = (await next_event(bob_ws, "permission.requested"))["data"]
        assert requested["decision"] == "pending" and requested["level"] == "L2"
        assert requested["action"] == "ask"
        assert notice["content_type"] == "permission_request"
        assert notice["content_json"]["permission_id"] == requested["id"]
        [task] = await rows(b, "SELECT state, message_id FROM a2a_tasks")
        assert task == {"state": "TASK_STATE_AUTH_REQUIRED", "message_id": None}
        peer_messages = "SELECT content FROM messages WHERE sender_type = 'peer_agent'"
        assert await rows(b, peer_messages) == []  # held until the owner decides

        decided = await bob.request(
            "POST", f"/v1/permissions/{requested['id']}/decision", json={"decision": "allow_once"}
        )
        assert decided.status_code == 200, decided.text
        assert decided.json()["decision"] == "allow_once"
        assert (await next_event(bob_ws, "permission.decided"))["data"]["id"] == requested["id"]
        reply = (await next_event(alice_ws, "message.created"))["data"]
        while reply["sender_did"] != bob.profile["agent_did"]:
            reply = (await next_event(alice_ws, "message.created"))["data"]
    assert reply["content"] == "Approved: your request was delivered."
    assert reply["conversation_id"] == conversation["id"]
    assert reply["in_reply_to"] == question["id"]  # threaded in alice's terms
    assert await rows(b, peer_messages) == [{"content": "May I see the Q3 plan?"}]
    [task] = await rows(b, "SELECT state FROM a2a_tasks")
    assert task["state"] == "TASK_STATE_COMPLETED"
    again = await bob.request(
        "POST", f"/v1/permissions/{requested['id']}/decision", json={"decision": "deny"}
    )
    assert again.status_code == 409 and again.json()["code"] == "permission_decided"
    actions = {r["action"] for r in await rows(b, "SELECT action FROM audit_log")}
    assert {"policy.evaluated", "permission.requested", "permission.decided"} <= actions


async def test_deny_sends_a_refusal_and_stores_nothing(pair) -> None:
    a, b = pair
    alice, bob, conversation, _ = await ask_bobs_agent(a, b)
    async with alice.websocket() as alice_ws, bob.websocket() as bob_ws:
        await alice.send(conversation["id"], "Give me your password")
        requested = (await next_event(bob_ws, "permission.requested"))["data"]
        decided = await bob.request(
            "POST", f"/v1/permissions/{requested['id']}/decision", json={"decision": "deny"}
        )
        assert decided.json()["decision"] == "deny"
        reply = (await next_event(alice_ws, "message.created"))["data"]
        while reply["sender_did"] != bob.profile["agent_did"]:
            reply = (await next_event(alice_ws, "message.created"))["data"]
    assert reply["content"] == "Refused: the owner declined your request."
    assert await rows(b, "SELECT 1 FROM messages WHERE sender_type = 'peer_agent'") == []
    [task] = await rows(b, "SELECT state FROM a2a_tasks")
    assert task["state"] == "TASK_STATE_REJECTED"


async def test_allow_always_is_reused_within_its_scope(pair) -> None:
    a, b = pair
    alice, bob, conversation, _ = await ask_bobs_agent(a, b)
    async with bob.websocket() as bob_ws:
        await alice.send(conversation["id"], "first")
        requested = (await next_event(bob_ws, "permission.requested"))["data"]
        await bob.request(
            "POST",
            f"/v1/permissions/{requested['id']}/decision",
            json={"decision": "allow_always", "scope": "peer_action"},
        )
        await alice.send(conversation["id"], "second")
        delivered = (await next_event(bob_ws, "message.created"))["data"]
        while delivered["content"] != "second":
            delivered = (await next_event(bob_ws, "message.created"))["data"]
    assert delivered["sender_type"] == "peer_agent"
    assert len(await rows(b, "SELECT 1 FROM permissions")) == 1
    states = [r["state"] for r in await rows(b, "SELECT state FROM a2a_tasks ORDER BY id")]
    assert states == ["TASK_STATE_COMPLETED", "TASK_STATE_COMPLETED"]
    [grant] = await rows(b, "SELECT decision, decision_scope FROM permissions")
    assert grant == {"decision": "allow_always", "decision_scope": "peer_action"}


# --- against a fake peer: L3, expiry, cancel, subscribe, contact overrides ------------------


@pytest.fixture
async def agent_setup(database_url: str) -> AsyncIterator[tuple[Instance, User, FakePeer, str]]:
    # A short consent window, so expiry can be reached within the access token's lifetime.
    async with run_instance(database_url, permission_ttl_seconds=300) as b, run_fake_peer() as peer:
        bob = await b.register("bob")
        yield b, bob, peer, bob.profile["agent_did"].rsplit(":", 1)[1]


async def signed(b: Instance, peer: FakePeer, agent_id: str, body: bytes) -> dict[str, Any]:
    path = f"/agents/{agent_id}/a2a"
    response = await b.client.post(
        path, content=body, headers=peer.signed_headers(b.base_url + path, body)
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def rpc(method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


async def test_l3_always_asks_even_after_allow_always(agent_setup) -> None:
    b, bob, peer, agent_id = agent_setup
    first = await signed(b, peer, agent_id, peer.rpc("merge it", action="commit"))
    assert first["result"]["task"]["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    [pending] = (await bob.request("GET", "/v1/permissions?pending=true")).json()
    assert pending["level"] == "L3" and pending["action"] == "commit"
    await bob.request(
        "POST",
        f"/v1/permissions/{pending['id']}/decision",
        json={"decision": "allow_always", "scope": "peer"},
    )
    second = await signed(b, peer, agent_id, peer.rpc("merge again", action="commit"))
    assert second["result"]["task"]["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    # ... while an L2 request from the same peer now passes on the peer-wide grant,
    third = await signed(b, peer, agent_id, peer.rpc("a question"))
    assert delivered_while_owner_away(third["result"]["task"])
    # ... and an L1 read passes without any grant.
    read = await signed(b, peer, agent_id, peer.rpc("what time is it", action="read"))
    assert delivered_while_owner_away(read["result"]["task"])


def delivered_while_owner_away(task: dict[str, Any]) -> bool:
    """Delivered, with the agent's answer held until bob (offline here) comes back."""
    return (
        task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
        and task["metadata"] == {"confer": {"heldUntilOwnerReturns": True}}
        and task["status"]["message"]["parts"][-1]["data"]["messageId"] is not None
    )


async def test_expired_requests_resolve_as_denied(agent_setup) -> None:
    b, bob, peer, agent_id = agent_setup
    for text in ("one", "two"):
        await signed(b, peer, agent_id, peer.rpc(text))
    first, second = sorted(
        (await bob.request("GET", "/v1/permissions?pending=true")).json(), key=lambda p: p["id"]
    )
    b.state.clock.offset = b.state.settings.permission_ttl_seconds + 1
    try:
        late = await bob.request(
            "POST", f"/v1/permissions/{first['id']}/decision", json={"decision": "allow_once"}
        )
        assert late.status_code == 409 and late.json()["code"] == "permission_expired"
        st = b.state
        deps = consent.Deciding(st.hub, st.agent_queue, st.task_events, st.clock)
        assert await consent.expire_due(st.pool, deps) == 1  # the second one, by the sweeper
    finally:
        b.state.clock.offset = 0
    decisions = await rows(b, "SELECT decision, decided_by FROM permissions ORDER BY id")
    assert decisions == [{"decision": "deny", "decided_by": None}] * 2
    states = [r["state"] for r in await rows(b, "SELECT state FROM a2a_tasks")]
    assert states == ["TASK_STATE_REJECTED"] * 2
    assert await rows(b, "SELECT 1 FROM messages WHERE sender_type = 'peer_agent'") == []
    answers = await rows(b, "SELECT content FROM messages WHERE sender_type = 'own_agent'")
    assert answers == [{"content": "Refused: the request expired without an answer."}] * 2
    assert second["id"] != first["id"]


async def test_a_subscriber_sees_the_decision_and_cancel_withdraws(agent_setup) -> None:
    b, bob, peer, agent_id = agent_setup
    task = (await signed(b, peer, agent_id, peer.rpc("wait for it")))["result"]["task"]
    path = f"/agents/{agent_id}/a2a"
    body = rpc("SubscribeToTask", {"id": task["id"]})
    headers = peer.signed_headers(b.base_url + path, body)
    events: list[dict[str, Any]] = []
    opened = asyncio.Event()

    async def subscribe() -> None:
        async with b.client.stream("POST", path, content=body, headers=headers) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:])["result"])
                    opened.set()

    subscriber = asyncio.create_task(subscribe())
    await asyncio.wait_for(opened.wait(), 5)
    [pending] = (await bob.request("GET", "/v1/permissions?pending=true")).json()
    await bob.request(
        "POST", f"/v1/permissions/{pending['id']}/decision", json={"decision": "allow_once"}
    )
    await asyncio.wait_for(subscriber, 5)
    assert events[0]["task"]["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

    other = (await signed(b, peer, agent_id, peer.rpc("never mind")))["result"]["task"]
    canceled = await signed(b, peer, agent_id, rpc("CancelTask", {"id": other["id"]}))
    assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert (await bob.request("GET", "/v1/permissions?pending=true")).json() == []


async def test_contact_overrides_deny_without_asking(agent_setup) -> None:
    b, bob, peer, agent_id = agent_setup
    await bob.request(
        "POST", "/v1/contacts", json={"did": peer.did, "policy_overrides": {"default": "deny"}}
    )
    answer = await signed(b, peer, agent_id, peer.rpc("hello?"))
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_REJECTED"
    assert await rows(b, "SELECT 1 FROM permissions") == []
    assert await rows(b, "SELECT 1 FROM messages") == []
    retry = await signed(b, peer, agent_id, peer.rpc("hello?", message_id="fixed"))
    again = await signed(b, peer, agent_id, peer.rpc("hello?", message_id="fixed"))
    assert retry["result"]["task"]["id"] == again["result"]["task"]["id"]


async def test_unstorable_text_from_a_peer_is_invalid_params(agent_setup) -> None:
    """A lone surrogate or NUL in a signed message (text or metadata) is -32602, not a 500,
    and nothing is stored."""
    b, _, peer, agent_id = agent_setup
    for body in (
        peer.rpc("a\ud800b"),
        peer.rpc("a\x00b"),
        peer.rpc("fine", delete={"messageId": "\udfff"}),
    ):
        answer = await signed(b, peer, agent_id, body)
        assert answer["error"]["code"] == -32602, answer
    assert await rows(b, "SELECT 1 FROM messages") == []
    assert await rows(b, "SELECT 1 FROM a2a_tasks") == []
