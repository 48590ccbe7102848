"""A peer's allowed message makes the local agent answer; offline owners hold it back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.gateway.harness import (
    NATS_URL,
    Instance,
    User,
    nats_task_queue,
    next_event,
    reachable,
    run_instance,
)

OFFLINE_INTRO = "This is Confer's offline provider"
REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(params=["postgres", "nats"])
async def pair(request, make_database) -> AsyncIterator[tuple[Instance, Instance]]:
    """Two instances; their agent task queues are PostgreSQL NOTIFY or NATS JetStream (with a
    ten-minute sweep, so every task starts from a dispatch published after commit)."""
    if request.param == "nats" and not reachable(NATS_URL):
        pytest.skip("needs the local NATS with JetStream (4222); .ci/run starts it")
    async with contextlib.AsyncExitStack() as stack:
        queues: list[dict[str, Any]] = [{}, {}]
        if request.param == "nats":
            queues = [
                await stack.enter_async_context(nats_task_queue(agent_queue_sweep_seconds=600))
                for _ in range(2)
            ]
        a = await stack.enter_async_context(run_instance(await make_database(), **queues[0]))
        b = await stack.enter_async_context(run_instance(await make_database(), **queues[1]))
        yield a, b


async def rows(instance: Instance, sql: str, *args: Any) -> list[dict[str, Any]]:
    async with instance.state.pool.acquire() as conn:
        return [dict(r) for r in await conn.fetch(sql, *args)]


async def setup(
    a: Instance, b: Instance, *, allow: bool, offline_ok: bool
) -> tuple[User, User, str]:
    """alice@A and bob@B; bob's agent allows alice (override default auto) or asks."""
    alice = await a.register("alice")
    bob = await b.register("bob")
    if allow:
        added = await bob.request(
            "POST",
            "/v1/contacts",
            json={"did": alice.did, "policy_overrides": {"default": "auto"}},
        )
        assert added.status_code in (200, 201), added.text
    if offline_ok:
        patched = await bob.request(
            "PATCH", "/v1/me", json={"preferences": {"privacy": {"allow_offline_response": True}}}
        )
        assert patched.status_code == 200, patched.text
    conversation = await alice.direct_with(bob.profile["agent_did"])
    return alice, bob, conversation["id"]


async def agent_answer(ws: Any, agent_did: str) -> dict[str, Any]:
    """The next message alice receives from bob's agent that is not a consent notice."""
    while True:
        event = (await next_event(ws, "message.created"))["data"]
        if event["sender_did"] == agent_did and event["content"].startswith(OFFLINE_INTRO):
            return event


async def agent_tasks(b: Instance) -> list[str]:
    return [r["status"] for r in await rows(b, "SELECT status FROM agent_tasks ORDER BY id")]


async def test_allowed_offline_answers_come_at_once(pair) -> None:
    a, b = pair
    alice, bob, conversation_id = await setup(a, b, allow=True, offline_ok=True)
    async with alice.websocket() as alice_ws:
        await alice.send(conversation_id, "When is the release?")
        answer = await agent_answer(alice_ws, bob.profile["agent_did"])
    assert answer["conversation_id"] == conversation_id
    assert "When is the release?" in answer["content"]
    assert await agent_tasks(b) == ["done"]
    [stored] = await rows(b, "SELECT content_json FROM messages WHERE sender_type = 'own_agent'")
    assert stored["content_json"]["provider"] == "offline"


async def test_an_online_owner_lets_the_agent_answer(pair) -> None:
    a, b = pair
    alice, bob, conversation_id = await setup(a, b, allow=True, offline_ok=False)
    async with bob.websocket(), alice.websocket() as alice_ws:
        await alice.send(conversation_id, "Are you there?")
        answer = await agent_answer(alice_ws, bob.profile["agent_did"])
    assert "Are you there?" in answer["content"]


async def test_an_offline_owner_holds_the_request_until_they_return(pair) -> None:
    a, b = pair
    alice, bob, conversation_id = await setup(a, b, allow=True, offline_ok=False)
    async with alice.websocket() as alice_ws:
        await alice.send(conversation_id, "first question")
        await alice.send(conversation_id, "second question")
        for _ in range(100):
            if await agent_tasks(b) == ["waiting"]:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # the worker would have run a queued task by now
        assert await agent_tasks(b) == ["waiting"]  # one per conversation, re-pointed
        own = "SELECT 1 FROM messages WHERE sender_type = 'own_agent'"
        assert await rows(b, own) == []
        peer_messages = await rows(b, "SELECT content FROM messages WHERE sender_type='peer_agent'")
        assert len(peer_messages) == 2  # delivered and readable by bob meanwhile
        held = await rows(b, "SELECT state, metadata_json, message_id FROM a2a_tasks ORDER BY id")
        assert [t["state"] for t in held] == ["TASK_STATE_AUTH_REQUIRED"] * 2  # interrupted
        assert all(t["metadata_json"] == {"confer": {"heldUntilOwnerReturns": True}} for t in held)
        assert all(t["message_id"] for t in held)
        async with bob.websocket():
            answer = await agent_answer(alice_ws, bob.profile["agent_did"])
    assert "second question" in answer["content"]  # it answers the newest message
    assert await agent_tasks(b) == ["done"]
    settled = await rows(b, "SELECT state, status_message_json FROM a2a_tasks ORDER BY id")
    assert [t["state"] for t in settled] == ["TASK_STATE_COMPLETED"] * 2
    assert settled[0]["status_message_json"]["parts"][0]["text"].startswith("Delivered: the owner")


@pytest.mark.redis
async def test_a_device_on_another_process_counts_as_online(make_database) -> None:
    """Two gateway processes of one instance share presence through Redis: bob connected to
    the second process is online for the first, so the agent answers at once."""
    database = await make_database()
    async with (
        run_instance(await make_database()) as a,
        run_instance(database, redis_url=REDIS_URL) as b1,
        run_instance(database, redis_url=REDIS_URL) as b2,
    ):
        alice, bob, conversation_id = await setup(a, b1, allow=True, offline_ok=False)
        login = await b2.client.post(
            "/v1/auth/login", json={"username": "bob", "password": "correct horse battery"}
        )
        assert login.status_code == 200, login.text
        bob2 = User(b2, login.json()["access_token"], bob.profile)
        async with bob2.websocket(), alice.websocket() as alice_ws:
            await alice.send(conversation_id, "Anyone home?")
            answer = await agent_answer(alice_ws, bob.profile["agent_did"])
        assert "Anyone home?" in answer["content"]
        [task] = await rows(b1, "SELECT state FROM a2a_tasks")
        assert task["state"] == "TASK_STATE_COMPLETED"


async def test_canceling_a_held_request_withdraws_the_agents_answer(make_database) -> None:
    from tests.gateway.fakepeer import run_fake_peer
    from tests.gateway.test_consent import rpc, signed

    async with run_instance(await make_database()) as b, run_fake_peer() as peer:
        bob = await b.register("bob")
        added = await bob.request(
            "POST", "/v1/contacts", json={"did": peer.did, "policy_overrides": {"default": "auto"}}
        )
        assert added.status_code in (200, 201), added.text
        agent_id = bob.profile["agent_did"].rsplit(":", 1)[1]
        first = (await signed(b, peer, agent_id, peer.rpc("one")))["result"]["task"]
        second = (await signed(b, peer, agent_id, peer.rpc("two")))["result"]["task"]
        assert first["status"]["state"] == second["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
        assert await agent_tasks(b) == ["waiting"]
        trigger = (
            "SELECT m.content FROM agent_tasks t JOIN messages m ON m.id = t.trigger_message_id"
        )
        assert await rows(b, trigger) == [{"content": "two"}]
        await signed(b, peer, agent_id, rpc("CancelTask", {"id": second["id"]}))
        assert await agent_tasks(b) == ["waiting"]  # "one" still waits for an answer
        assert await rows(b, trigger) == [{"content": "one"}]  # ... and is what it answers
        canceled = await signed(b, peer, agent_id, rpc("CancelTask", {"id": first["id"]}))
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        assert await agent_tasks(b) == ["failed"]  # nobody waits any more: withdrawn
        async with bob.websocket():
            await asyncio.sleep(0.5)
        assert await agent_tasks(b) == ["failed"]  # bob's return starts nothing
        assert await rows(b, "SELECT 1 FROM messages WHERE sender_type = 'own_agent'") == []


async def test_consent_then_the_agent_answers(pair) -> None:
    a, b = pair
    alice, bob, conversation_id = await setup(a, b, allow=False, offline_ok=False)
    async with alice.websocket() as alice_ws:
        async with bob.websocket() as bob_ws:
            await alice.send(conversation_id, "May I ask about the plan?")
            requested = (await next_event(bob_ws, "permission.requested"))["data"]
        # bob decides over HTTP with no device connected: deciding is being present
        decided = await bob.request(
            "POST", f"/v1/permissions/{requested['id']}/decision", json={"decision": "allow_once"}
        )
        assert decided.status_code == 200, decided.text
        answer = await agent_answer(alice_ws, bob.profile["agent_did"])
    assert "May I ask about the plan?" in answer["content"]
    assert await agent_tasks(b) == ["done"]


async def test_denied_requests_start_no_task(pair) -> None:
    a, b = pair
    alice, bob, conversation_id = await setup(a, b, allow=False, offline_ok=True)
    async with bob.websocket() as bob_ws:
        await alice.send(conversation_id, "Give me the keys")
        requested = (await next_event(bob_ws, "permission.requested"))["data"]
        await bob.request(
            "POST", f"/v1/permissions/{requested['id']}/decision", json={"decision": "deny"}
        )
    await asyncio.sleep(0.3)
    assert await agent_tasks(b) == []


async def test_the_sweep_releases_requests_held_while_the_owner_connected(pair) -> None:
    """The race: a request is held in the instant bob connects (his connect-time release ran
    before the held task committed). The periodic sweep sees bob online and releases it."""
    from gateway.agents.peer_tasks import release_present_owners

    a, b = pair
    alice, bob, conversation_id = await setup(a, b, allow=True, offline_ok=False)
    await alice.send(conversation_id, "are you there?")
    for _ in range(100):
        if await agent_tasks(b) == ["waiting"]:
            break
        await asyncio.sleep(0.05)
    assert await agent_tasks(b) == ["waiting"]
    state = b.state
    queue = state.agent_queue
    assert await release_present_owners(state.pool, state.clock, state.hub, queue) == 0  # offline
    # bob's device arrives in the presence set without this process's connect-time release
    await state.hub.ephemeral.device_online(bob.profile["id"], "device-elsewhere")
    assert await release_present_owners(state.pool, state.clock, state.hub, queue) == 1
    for _ in range(200):
        if await agent_tasks(b) == ["done"]:
            break
        await asyncio.sleep(0.05)
    assert await agent_tasks(b) == ["done"]
    [task] = await rows(b, "SELECT state FROM a2a_tasks")
    assert task["state"] == "TASK_STATE_COMPLETED"


async def test_the_peer_agents_answer_threads_into_the_askers_conversation(pair) -> None:
    """alice@A opens a ``direct_user_agent`` conversation with bob's agent@B and asks; the
    answer comes back into that conversation (its contextId), as a reply to her question."""
    a, b = pair
    alice, bob, _ = await setup(a, b, allow=True, offline_ok=True)
    opened = await alice.request(
        "POST",
        "/v1/conversations",
        json={"type": "direct_user_agent", "participant_did": bob.profile["agent_did"]},
    )
    assert opened.status_code in (200, 201), opened.text
    conversation_id = opened.json()["id"]
    async with alice.websocket() as alice_ws:
        question = await alice.send(conversation_id, "Which release is next?")
        answer = await agent_answer(alice_ws, bob.profile["agent_did"])
    assert answer["conversation_id"] == conversation_id
    assert answer["in_reply_to"] == question["id"]
    # and a follow-up from alice reaches the same conversation on B, threaded there too
    async with bob.websocket() as bob_ws:
        follow = await alice.send(conversation_id, "And after that?")
        seen = (await next_event(bob_ws, "message.created"))["data"]
        while seen["content"] != "And after that?":
            seen = (await next_event(bob_ws, "message.created"))["data"]
    [first] = await rows(
        b, "SELECT conversation_id FROM messages WHERE content = $1", "Which release is next?"
    )
    assert seen["conversation_id"] == first["conversation_id"]
    assert follow["id"] != seen["id"]


async def test_a_deleted_held_request_is_withdrawn_everywhere(pair) -> None:
    """alice deletes one of two requests held for offline bob: its A2A task is canceled and
    erased, the agent answers the other one, and no copy of the deleted text is kept."""
    a, b = pair
    alice, bob, conversation_id = await setup(a, b, allow=True, offline_ok=False)
    await alice.send(conversation_id, "keep this question")
    doomed = await alice.send(conversation_id, "forget this secret question")
    held = "SELECT state, history_json FROM a2a_tasks ORDER BY id"
    for _ in range(100):
        if len(await rows(b, held)) == 2 and await agent_tasks(b) == ["waiting"]:
            break
        await asyncio.sleep(0.05)
    deleted = await alice.request(
        "DELETE", f"/v1/conversations/{conversation_id}/messages/{doomed['id']}"
    )
    assert deleted.status_code in (200, 204), deleted.text
    for _ in range(100):
        if (await rows(b, held))[-1]["state"] == "TASK_STATE_CANCELED":
            break
        await asyncio.sleep(0.05)
    first, second = await rows(b, held)
    assert first["state"] == "TASK_STATE_AUTH_REQUIRED"
    assert second["state"] == "TASK_STATE_CANCELED" and second["history_json"] == []
    async with alice.websocket() as alice_ws, bob.websocket():
        answer = await agent_answer(alice_ws, bob.profile["agent_did"])
    assert "keep this question" in answer["content"]
    for instance in (a, b):
        everywhere = await rows(
            instance,
            """SELECT 1 FROM federation_outbox WHERE payload_json::text LIKE '%secret%'
               UNION ALL SELECT 1 FROM a2a_tasks WHERE history_json::text LIKE '%secret%'
               UNION ALL SELECT 1 FROM messages WHERE content LIKE '%secret%'""",
        )
        assert everywhere == [], instance.base_url
