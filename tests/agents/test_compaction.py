"""Compaction: old history is summarised by the ``summarize`` model; nothing is deleted."""

from __future__ import annotations

import asyncpg

from tests.agents.conftest import LLMServer
from tests.agents.helpers import set_model, talk_to_agent, wait_for_reply
from tests.gateway.harness import run_instance


async def test_old_messages_are_summarised_and_kept(database_url: str) -> None:
    async with run_instance(database_url, agent_history_tokens=80) as instance:
        alice = await instance.register("alice")
        conversation_id = await talk_to_agent(alice)
        for i in range(4):
            await alice.send(conversation_id, f"note number {i}: the deploy window is friday")
            await wait_for_reply(alice, conversation_id, i + 1)

        page = await alice.request(
            "GET", f"/v1/conversations/{conversation_id}/messages", params={"limit": 50}
        )
        everything = page.json()["items"]
        assert len(everything) == 8  # nothing deleted: 4 questions, 4 answers

        conn = await asyncpg.connect(database_url)
        try:
            summary = await conn.fetchrow("SELECT * FROM conversation_summaries")
            compacted = {
                r["message_id"]
                for r in await conn.fetch("SELECT message_id FROM message_compactions")
            }
        finally:
            await conn.close()
        assert summary is not None and summary["provider"] == "offline"
        assert "note number 0" in summary["summary"]
        assert compacted and min(m["id"] for m in everything) in compacted

        context = (
            await alice.request("GET", f"/v1/conversations/{conversation_id}/agent-context")
        ).json()
        parts = {p["name"]: p for p in context["parts"]}
        assert "note number 0" in parts["summary"]["content"]
        assert not compacted & set(parts["history"]["items"])
        assert parts["history"]["tokens"] <= 80


async def test_compaction_uses_the_summarize_model(
    database_url: str, llm_server: LLMServer
) -> None:
    llm_server.fake.reply_prefix = "SUMMARY "
    providers = {"loop": {"base_url": llm_server.base_url, "wire": "openai"}}
    async with run_instance(
        database_url, agent_history_tokens=60, llm_providers=providers
    ) as instance:
        alice = await instance.register("alice")
        await set_model(database_url, alice, "summarize", "loop", "summarizer-1")
        conversation_id = await talk_to_agent(alice)
        for i in range(3):
            await alice.send(conversation_id, f"point {i} about the quarterly roadmap planning")
            await wait_for_reply(alice, conversation_id, i + 1)
        conn = await asyncpg.connect(database_url)
        try:
            summary = await conn.fetchrow("SELECT * FROM conversation_summaries")
        finally:
            await conn.close()
        assert summary["model"] == "summarizer-1" and summary["summary"].startswith("SUMMARY")
        [call, *_] = [r for r in llm_server.fake.requests if r["model"] == "summarizer-1"]
        assert call["messages"][0]["content"].startswith("Summarise the conversation")
