"""The own agent answering: offline provider, loopback OpenAI/Anthropic streaming, errors,
context inspection, one task per conversation, and recovery after a restart."""

from __future__ import annotations

import asyncio

import asyncpg

from tests.agents.conftest import LLMServer
from tests.agents.helpers import agent_id, set_model, talk_to_agent, wait_for_reply
from tests.gateway.harness import next_event, run_instance

LEASE = {"agent_task_lease_seconds": 2.0}  # a crashed process's task is retried quickly


async def test_offline_agent_answers_from_memory_and_streams(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        memories = f"/v1/agents/{agent_id(alice)}/memories"
        favourite = await alice.request(
            "POST",
            memories,
            json={
                "type": "preference",
                "content": "Alice's favourite colour is teal",
                "importance": 9,
            },
        )
        await alice.request(
            "POST", memories, json={"type": "fact", "content": "Alice works on Confer"}
        )
        conversation_id = await talk_to_agent(alice)
        async with alice.websocket() as ws:
            sent = await alice.send(conversation_id, "What is my favourite colour?")
            first = await next_event(ws, "message.delta")
            created = await next_event(ws, "message.created")
            while created["data"]["sender_type"] == "user":
                created = await next_event(ws, "message.created")
        assert first["data"]["conversation_id"] == conversation_id and first["data"]["seq"] == 1
        reply = created["data"]
        assert reply["sender_type"] == "own_agent" and reply["in_reply_to"] == sent["id"]
        assert "offline provider" in reply["content"]
        assert "Alice's favourite colour is teal" in reply["content"]
        assert reply["content_json"]["provider"] == "offline"
        assert reply["content_json"]["model"] == "confer-offline"
        assert reply["via"] == "api"
        assert reply["citations"] == [
            {
                "source": f"memory:{favourite.json()['id']}",
                "url": None,
                "page": None,
                "passage": "Alice's favourite colour is teal",
                "trust_level": "verified",
            }
        ]
        used = (await alice.request("GET", f"{memories}/{favourite.json()['id']}")).json()
        assert used["uses"] == 1 and used["last_used_at"] is not None


async def test_inspect_shows_each_part_in_seed_order(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        memories = f"/v1/agents/{agent_id(alice)}/memories"
        memory = await alice.request(
            "POST", memories, json={"type": "decision", "content": "Use ULIDs for ids"}
        )
        await alice.request(
            "POST",
            "/v1/knowledge",
            json={"category": "project", "title": "Stack", "content": "FastAPI and asyncpg"},
        )
        await alice.request(
            "POST", "/v1/ambient-context", json={"git_state": {"branch": "issue-6"}}
        )
        conversation_id = await talk_to_agent(alice)
        await alice.send(conversation_id, "Which id format did we pick?")
        await wait_for_reply(alice, conversation_id)

        context = (
            await alice.request("GET", f"/v1/conversations/{conversation_id}/agent-context")
        ).json()
        names = [p["name"] for p in context["parts"]]
        assert names == [
            "system_prompt",
            "personality",
            "memories",
            "knowledge",
            "concepts",
            "ambient",
            "history",
            "summary",
        ]
        parts = {p["name"]: p for p in context["parts"]}
        assert parts["memories"]["items"] == [memory.json()["id"]]
        assert "Use ULIDs for ids" in parts["memories"]["content"]
        assert "FastAPI and asyncpg" in parts["knowledge"]["content"]
        assert "issue-6" in parts["ambient"]["content"]
        assert parts["summary"]["tokens"] == 0
        empty = ("summary", "concepts")  # no compaction yet; the conversation names no project
        assert all(p["tokens"] > 0 for p in context["parts"] if p["name"] not in empty)
        assert context["total_tokens"] == sum(p["tokens"] for p in context["parts"])
        assert [t["role"] for t in context["turns"]] == ["user", "assistant"]
        assert "Use ULIDs for ids" in context["system"]
        # Looking is not using: one use (the reply), not two.
        again = (await alice.request("GET", f"{memories}/{memory.json()['id']}")).json()
        assert again["uses"] == 1

        bob = await instance.register("bob")
        hidden = await bob.request("GET", f"/v1/conversations/{conversation_id}/agent-context")
        assert hidden.status_code == 404


async def test_openai_compatible_provider_streams_over_loopback(
    database_url: str, llm_server: LLMServer
) -> None:
    providers = {"loop": {"base_url": llm_server.base_url, "wire": "openai"}}
    async with run_instance(database_url, llm_providers=providers) as instance:
        alice = await instance.register("alice")
        await set_model(database_url, alice, "brain", "loop", "loop-chat-1")
        await alice.request(
            "POST",
            f"/v1/agents/{agent_id(alice)}/memories",
            json={"type": "fact", "content": "Alice has a cat named Miso"},
        )
        conversation_id = await talk_to_agent(alice)
        async with alice.websocket() as ws:
            await alice.send(conversation_id, "tell me about my cat please")
            deltas = []
            while True:
                event = await next_event(ws, "message.delta")
                deltas.append(event["data"]["delta"])
                if "".join(deltas) == "echo: tell me about my cat please":
                    break
        [reply] = await wait_for_reply(alice, conversation_id)
        assert len(deltas) == 7  # one per word: streamed, not one block
        assert reply["content"] == "echo: tell me about my cat please"
        assert reply["content_json"] == {
            "provider": "loop",
            "model": "loop-chat-1",
            "task_id": reply["content_json"]["task_id"],
        }
        assert reply["citations"] is None
        [call] = [r for r in llm_server.fake.requests if r["_path"] == "/v1/chat/completions"]
        assert call["stream"] is True and call["model"] == "loop-chat-1"
        assert call["messages"][0]["role"] == "system"
        assert "Alice has a cat named Miso" in call["messages"][0]["content"]
        assert call["messages"][-1] == {"role": "user", "content": "tell me about my cat please"}


async def test_anthropic_provider_streams_over_loopback(
    database_url: str, llm_server: LLMServer
) -> None:
    providers = {"claude": {"base_url": llm_server.base_url, "wire": "anthropic"}}
    async with run_instance(database_url, llm_providers=providers) as instance:
        alice = await instance.register("alice")
        await set_model(database_url, alice, "brain", "claude", "claude-test")
        conversation_id = await talk_to_agent(alice)
        await alice.send(conversation_id, "first question")
        await wait_for_reply(alice, conversation_id)
        await alice.send(conversation_id, "second question")
        replies = await wait_for_reply(alice, conversation_id, 2)
        assert [r["content"] for r in replies] == ["echo: first question", "echo: second question"]
        calls = [r for r in llm_server.fake.requests if r["_path"] == "/v1/messages"]
        assert calls[-1]["stream"] is True and calls[-1]["max_tokens"] > 0
        assert "personal agent of alice" in calls[-1]["system"]
        assert [m["role"] for m in calls[-1]["messages"]] == ["user", "assistant", "user"]
        # the provider's own token counts are stored with the answer
        system_words = len(calls[-1]["system"].split())
        assert replies[-1]["content_json"]["usage"] == {
            "input_tokens": system_words + 2 + 3 + 2,  # the three turns' words
            "output_tokens": 3,
        }


async def test_openai_stream_usage_is_asked_for_when_the_endpoint_allows_it(
    database_url: str, llm_server: LLMServer
) -> None:
    providers = {
        "plain": {"base_url": llm_server.base_url, "wire": "openai"},
        "counted": {"base_url": llm_server.base_url, "wire": "openai", "stream_usage": "true"},
    }
    async with run_instance(database_url, llm_providers=providers) as instance:
        alice = await instance.register("alice")
        conversation_id = await talk_to_agent(alice)
        await set_model(database_url, alice, "brain", "plain", "m1")
        await alice.send(conversation_id, "count nothing")
        [plain] = await wait_for_reply(alice, conversation_id)
        await set_model(database_url, alice, "brain", "counted", "m2")
        await alice.send(conversation_id, "count these words")
        replies = await wait_for_reply(alice, conversation_id, 2)
    chats = [r for r in llm_server.fake.requests if r["_path"] == "/v1/chat/completions"]
    assert "stream_options" not in chats[0]
    assert chats[1]["stream_options"] == {"include_usage": True}
    assert "usage" not in plain["content_json"]
    usage = replies[-1]["content_json"]["usage"]
    assert usage["output_tokens"] == len("echo: count these words".split())
    assert usage["input_tokens"] == sum(len(m["content"].split()) for m in chats[1]["messages"])


async def test_provider_errors_become_system_notices(
    database_url: str, llm_server: LLMServer
) -> None:
    providers = {
        "loop": {"base_url": llm_server.base_url, "wire": "openai"},
        "gone": {"base_url": "http://127.0.0.1:9/v1", "wire": "openai"},
    }
    async with run_instance(database_url, llm_providers=providers) as instance:
        alice = await instance.register("alice")
        await set_model(database_url, alice, "brain", "loop", "m")
        llm_server.fake.fail_with = 429
        conversation_id = await talk_to_agent(alice)
        await alice.send(conversation_id, "hello?")
        [notice] = await wait_for_reply(alice, conversation_id)
        assert notice["sender_type"] == "system" and notice["content_type"] == "system_notice"
        assert "rate limiting" in notice["content"] and notice["content_json"]["status"] == 429

        await set_model(database_url, alice, "brain", "gone", "m")
        await alice.send(conversation_id, "anyone?")
        notices = await wait_for_reply(alice, conversation_id, 2)
        assert notices[1]["content_json"]["error"] == "unreachable"

        await set_model(database_url, alice, "brain", "nonexistent", "m")
        await alice.send(conversation_id, "and now?")
        notices = await wait_for_reply(alice, conversation_id, 3)
        assert notices[2]["content_json"]["error"] == "unknown_provider"
    conn = await asyncpg.connect(database_url)
    try:
        statuses = await conn.fetch("SELECT status, error FROM agent_tasks ORDER BY id")
    finally:
        await conn.close()
    assert [s["status"] for s in statuses] == ["failed", "failed", "failed"]


async def test_one_task_per_conversation_and_the_last_message_is_answered(
    database_url: str,
) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        conversation_id = await talk_to_agent(alice)
        sent = [await alice.send(conversation_id, f"message {i}") for i in range(4)]
        for _ in range(200):
            conn = await asyncpg.connect(database_url)
            try:
                open_tasks = await conn.fetchval(
                    "SELECT count(*) FROM agent_tasks WHERE status IN ('queued', 'running')"
                )
            finally:
                await conn.close()
            if open_tasks == 0:
                break
            await asyncio.sleep(0.05)
        page = (await alice.request("GET", f"/v1/conversations/{conversation_id}/messages")).json()
        replies = [m for m in page["items"] if m["sender_type"] == "own_agent"]
        assert 1 <= len(replies) <= 4
        assert replies[0]["in_reply_to"] == sent[-1]["id"]  # newest reply answers the last one
        conn = await asyncpg.connect(database_url)
        try:
            try:
                await conn.execute(
                    """INSERT INTO agent_tasks (id, agent_id, conversation_id, trigger_message_id,
                                                status)
                       VALUES ('01J00000000000000000000001', $1, $2, $3, 'running'),
                              ('01J00000000000000000000002', $1, $2, $3, 'running')""",
                    agent_id(alice),
                    conversation_id,
                    sent[0]["id"],
                )
            except asyncpg.UniqueViolationError:
                refused = True
            else:
                refused = False
        finally:
            await conn.close()
        assert refused


async def test_a_task_interrupted_by_a_restart_is_retried(
    database_url: str, llm_server: LLMServer
) -> None:
    providers = {"loop": {"base_url": llm_server.base_url, "wire": "openai"}}
    llm_server.fake.hang = True
    async with run_instance(database_url, llm_providers=providers, **LEASE) as instance:
        alice = await instance.register("alice")
        await set_model(database_url, alice, "brain", "loop", "m")
        conversation_id = await talk_to_agent(alice)
        await alice.send(conversation_id, "are you there?")
        for _ in range(100):
            if llm_server.fake.requests:
                break
            await asyncio.sleep(0.05)
        assert llm_server.fake.requests, "the provider was never called"
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT status FROM agent_tasks") == "running"
    finally:
        await conn.close()
    llm_server.fake.hang = False
    port = int(alice.instance.base_url.rsplit(":", 1)[1])  # same public URL, same DIDs
    async with run_instance(database_url, port=port, llm_providers=providers, **LEASE) as instance:
        login = await instance.client.post(
            "/v1/auth/login", json={"username": "alice", "password": "correct horse battery"}
        )
        alice.instance, alice.token = instance, login.json()["access_token"]
        [reply] = await wait_for_reply(alice, conversation_id)
        assert reply["content"] == "echo: are you there?"
    conn = await asyncpg.connect(database_url)
    try:
        task = await conn.fetchrow("SELECT status, attempts FROM agent_tasks")
    finally:
        await conn.close()
    assert task["status"] == "done" and task["attempts"] == 2


async def test_a_live_process_keeps_its_task_and_a_dead_ones_is_retried_once(
    database_url: str, llm_server: LLMServer
) -> None:
    """Two processes on one database: the second one's start and sweeps never take the first
    one's running task (its lease is renewed); when the first dies, the second retries it
    after the lease, and exactly one answer is stored."""
    providers = {"loop": {"base_url": llm_server.base_url, "wire": "openai"}}
    llm_server.fake.hang = True
    conn = await asyncpg.connect(database_url)
    try:
        async with run_instance(database_url, llm_providers=providers, **LEASE) as first:
            alice = await first.register("alice")
            await set_model(database_url, alice, "brain", "loop", "m")
            conversation_id = await talk_to_agent(alice)
            await alice.send(conversation_id, "are you there?")
            for _ in range(100):
                if llm_server.fake.requests:
                    break
                await asyncio.sleep(0.05)
            async with run_instance(database_url, llm_providers=providers, **LEASE):
                await asyncio.sleep(5)  # 2.5 leases: the second process sweeps and recovers
                task = await conn.fetchrow("SELECT status, attempts FROM agent_tasks")
                assert dict(task) == {"status": "running", "attempts": 1}  # still the first's
                assert len(llm_server.fake.requests) == 1
        # the first process is gone (its task still "running"); a new one takes over
        llm_server.fake.hang = False
        async with run_instance(database_url, llm_providers=providers, **LEASE) as second:
            login = await second.client.post(
                "/v1/auth/login", json={"username": "alice", "password": "correct horse battery"}
            )
            alice.instance, alice.token = second, login.json()["access_token"]
            [reply] = await wait_for_reply(alice, conversation_id)
            assert reply["content"] == "echo: are you there?"
            await asyncio.sleep(1)
            answers = await conn.fetchval(
                "SELECT count(*) FROM messages WHERE sender_type = 'own_agent'"
            )
        task = await conn.fetchrow("SELECT status, attempts FROM agent_tasks")
    finally:
        await conn.close()
    assert answers == 1
    assert dict(task) == {"status": "done", "attempts": 2}
