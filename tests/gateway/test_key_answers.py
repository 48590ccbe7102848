"""A stock A2A caller with an API key gets the agent's answer as the task's result."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from tests.gateway.harness import Instance, run_instance
from tests.gateway.test_a2a import call, issue_key, make_public, rpc, sse_events, text_message


async def answer_to(instance: Instance, question: str) -> str:
    """The text of the agent's answer to the stored message ``question`` (waits for it)."""
    for _ in range(600):
        async with instance.state.pool.acquire() as conn:
            text = await conn.fetchval(
                """SELECT a.content FROM messages a JOIN messages q ON q.id = a.in_reply_to
                   WHERE q.content = $1 AND a.sender_type = 'own_agent'""",
                question,
            )
        if text:
            return str(text)
        await asyncio.sleep(0.05)
    raise AssertionError(f"no answer to {question!r}")


async def completed(b: Instance, path: str, key: str, task_id: str) -> dict[str, Any]:
    """The task once ``GetTask`` shows it completed (waits for it)."""
    for _ in range(600):
        got = await rpc(b, path, key, call("GetTask", {"id": task_id}))
        if got["result"]["status"]["state"] == "TASK_STATE_COMPLETED":
            return dict(got["result"])
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} never completed")


def result_text(task: dict[str, Any]) -> str:
    return str(task["status"]["message"]["parts"][0]["text"])


async def test_an_api_key_caller_gets_the_agents_answer(database_url: str) -> None:
    async with run_instance(database_url) as b:
        bob = await b.register("bob")
        agent_id = await make_public(b, bob)
        key = await issue_key(bob)
        path = f"/agents/{agent_id}/a2a"

        # Blocking SendMessage: the result is the completed task with the answer.
        body = await rpc(b, path, key, call("SendMessage", text_message("what is RFC 9421?")))
        task = body["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        answer = await answer_to(b, "what is RFC 9421?")
        assert result_text(task) == answer and answer != "Delivered."
        got = await rpc(b, path, key, call("GetTask", {"id": task["id"]}))
        assert result_text(got["result"]) == answer

        # returnImmediately: working at once, completed with the answer later.
        params = {**text_message("second question"), "configuration": {"returnImmediately": True}}
        body = await rpc(b, path, key, call("SendMessage", params))
        task = body["result"]["task"]
        assert task["status"]["state"] in ("TASK_STATE_WORKING", "TASK_STATE_COMPLETED")
        answer = await answer_to(b, "second question")
        assert result_text(await completed(b, path, key, task["id"])) == answer

        # Streaming: submitted, working, then the answer.
        response = await b.client.post(
            path,
            json=call("SendStreamingMessage", text_message("third question")),
            headers={
                "A2A-Version": "1.0",
                "Content-Type": "application/json",
                "Authorization": f"Bearer {key}",
            },
        )
        events = [e["result"] for e in sse_events(response.text)]
        states = [
            e.get("statusUpdate", e.get("task", {})).get("status", {}).get("state") for e in events
        ]
        assert states[0] == "TASK_STATE_SUBMITTED" and states[-1] == "TASK_STATE_COMPLETED"
        assert "TASK_STATE_WORKING" in states
        last = events[-1]["statusUpdate"]
        assert result_text(last) == await answer_to(b, "third question")


async def test_another_users_key_waits_for_the_offline_owner_like_a_peer(database_url: str) -> None:
    async with run_instance(database_url) as b:
        bob, alice = await b.register("bob"), await b.register("alice")
        agent_id = await make_public(b, bob)
        async with b.state.pool.acquire() as conn:  # allow: skip consent, keep the owner rule
            await conn.execute(
                "UPDATE agents SET policies_json = $2 WHERE id = $1",
                agent_id,
                {"default": "auto", "rules": []},
            )
        key = await issue_key(alice)
        path = f"/agents/{agent_id}/a2a"
        question = "are you there " + uuid.uuid4().hex[:6]
        body = await rpc(b, path, key, call("SendMessage", text_message(question)))
        task = body["result"]["task"]
        # bob is offline and allows no offline answers: held, as for a signed peer
        assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED", task
        async with bob.websocket():
            answer = await answer_to(b, question)
            assert result_text(await completed(b, path, key, task["id"])) == answer
