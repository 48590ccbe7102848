"""The /mcp endpoint driven by the official ``mcp`` client over real HTTP on loopback."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.agents.helpers import agent_id
from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import Instance, User, run_instance

READ_TOOLS = {
    "confer_list_conversations",
    "confer_read_messages",
    "confer_search_memory",
    "confer_get_session_context",
    "confer_list_pending_permissions",
    "confer_get_audit_log",
    # concept memory (tests/agents/test_concepts.py)
    "confer_search_concepts",
    "confer_get_active_concepts",
    "confer_get_concept_graph",
    "confer_get_domain_summary",
    "confer_get_concept_context",
    "confer_get_concept_alerts",
    "confer_open_concept_session",
    "confer_audit_concept_thread",
}
WRITE_TOOLS = {
    "confer_send_message",
    "confer_record_memory",
    "confer_update_project_memory",
    "confer_decide_permission",
    "confer_record_concept_occurrence",
    "confer_record_concept_relation",
    "confer_promote_concept",
    "confer_archive_concept",
    "confer_record_measurement",
    "confer_import_concepts",
}


@contextlib.asynccontextmanager
async def mcp_client(instance: Instance, user: User, mode: str = "auto") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {user.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=10) as http:
        transport = streamable_http_client(f"{instance.base_url}/mcp", http_client=http)
        async with Client(transport, mode=mode) as client:  # type: ignore[arg-type]
            yield client


async def call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result
    return dict(result.structured_content or {})


async def _audit_rows(database_url: str) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(database_url)
    try:
        return [dict(r) for r in await conn.fetch("SELECT * FROM mcp_audit_log ORDER BY id")]
    finally:
        await conn.close()


async def test_requests_without_a_valid_token_are_refused(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        for headers in ({}, {"Authorization": "Bearer nope"}):
            response = await instance.client.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={**headers, "Accept": "application/json, text/event-stream"},
            )
            assert response.status_code == 401
            assert response.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_tools_reads_and_audited_writes(database_url: str, mode: str) -> None:
    async with run_fake_peer() as peer, run_instance(database_url) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        await alice.request("POST", "/v1/contacts", json={"did": peer.did})
        conversation = await alice.direct_with(bob.did)
        async with mcp_client(instance, alice, mode) as client:
            listed = await client.list_tools()
            assert {t.name for t in listed.tools} == READ_TOOLS | WRITE_TOOLS

            recorded = await call(
                client,
                "confer_record_memory",
                {
                    "type": "decision",
                    "content": "Deploys happen on Fridays",
                    "importance": 7,
                    "project": "confer",
                    "agent": "claude-code-test",
                },
            )
            assert recorded["ok"] is True
            refused = await call(
                client,
                "confer_record_memory",
                {"type": "rumour", "content": "nope", "agent": "claude-code-test"},
            )
            assert refused["ok"] is False and refused["code"] == "validation_failed"

            sent = await call(
                client,
                "confer_send_message",
                {"conversation_id": conversation["id"], "content": "hi from my editor"},
            )
            assert sent["ok"] is True
            foreign = await call(
                client,
                "confer_send_message",
                {"conversation_id": "01J00000000000000000000000", "content": "x"},
            )
            assert foreign["ok"] is False and foreign["code"] == "conversation_not_found"

            created = await call(
                client,
                "confer_update_project_memory",
                {"project_id": "confer", "peer_did": peer.did, "facts_md": "- uses ULIDs"},
            )
            assert created == {
                "ok": True,
                "version": 1,
                "created": True,
                "audit_id": created["audit_id"],
            }
            stale = await call(
                client,
                "confer_update_project_memory",
                {"project_id": "confer", "peer_did": peer.did, "facts_md": "x", "base_version": 7},
            )
            assert stale["ok"] is False and stale["code"] == "version_conflict"

            writes = await _audit_rows(database_url)

            found = await call(client, "confer_search_memory", {"query": "deploys friday"})
            assert [h["id"] for h in found["hits"]] == [recorded["memory_id"]]
            assert found["hits"][0]["method"] == "fulltext"
            messages = await call(
                client, "confer_read_messages", {"conversation_id": conversation["id"]}
            )
            assert messages["messages"][0]["via"] == "claude-code"
            conversations = await call(client, "confer_list_conversations", {})
            assert [c["id"] for c in conversations["conversations"]] == [conversation["id"]]
            opened = await call(
                client,
                "confer_get_session_context",
                {
                    "topic": "release",
                    "queries": ["deploys", "friday"],
                    "project": "confer",
                    "token_budget": 2000,
                },
            )
            assert opened["project_memory"][0]["facts_md"] == "- uses ULIDs"
            assert [m["id"] for m in opened["memories"]] == [recorded["memory_id"]]
            assert opened["recent_threads"][0]["conversation_id"] == conversation["id"]
            assert 0 < opened["tokens"] <= 2000
            tiny = await call(
                client,
                "confer_get_session_context",
                {"topic": "release", "queries": ["deploys"], "token_budget": 100},
            )
            assert tiny["tokens"] <= 100 and tiny["dropped"] > 0
            pending = await call(client, "confer_list_pending_permissions", {})
            assert pending == {"permissions": []}

            failures = await call(client, "confer_get_audit_log", {"success": False})
            assert failures["count"] == 3
            by_agent = await call(client, "confer_get_audit_log", {"agent": "claude-code-test"})
            assert [e["success"] for e in by_agent["entries"]] == [False, True]

        assert await _audit_rows(database_url) == writes  # read tools wrote nothing
        assert [(w["tool_name"], w["success"]) for w in writes] == [
            ("confer_record_memory", True),
            ("confer_record_memory", False),
            ("confer_send_message", True),
            ("confer_send_message", False),
            ("confer_update_project_memory", True),
            ("confer_update_project_memory", False),
        ]
        assert writes[0]["target_id"] == recorded["memory_id"]
        assert writes[2]["target_id"] == sent["message_id"]
        assert json.loads(writes[1]["payload_json"])["type"] == "rumour"
        assert writes[3]["error_message"].startswith("conversation_not_found")

        memories = (await alice.request("GET", f"/v1/agents/{agent_id(alice)}/memories")).json()
        assert [m["content"] for m in memories] == ["Deploys happen on Fridays"]
        bobs_view = await bob.request("GET", f"/v1/conversations/{conversation['id']}/messages")
        assert [m["content"] for m in bobs_view.json()["items"]] == ["hi from my editor"]


async def test_the_audit_log_is_append_only(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        async with mcp_client(instance, alice) as client:
            await call(client, "confer_record_memory", {"type": "fact", "content": "x"})
    conn = await asyncpg.connect(database_url)
    try:
        for statement in (
            "UPDATE mcp_audit_log SET success = false",
            "DELETE FROM mcp_audit_log",
            "TRUNCATE mcp_audit_log",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement)
        assert await conn.fetchval("SELECT count(*) FROM mcp_audit_log") == 1
    finally:
        await conn.close()


async def test_another_users_token_sees_only_their_own_data(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        mallory = await instance.register("mallory")
        await alice.request(
            "POST",
            f"/v1/agents/{agent_id(alice)}/memories",
            json={"type": "fact", "content": "Alice's locker code is 4711"},
        )
        async with mcp_client(instance, mallory) as client:
            found = await call(client, "confer_search_memory", {"query": "locker code"})
            assert found["hits"] == []
            audit = await call(client, "confer_get_audit_log", {})
            assert audit["count"] == 0


async def test_caller_mistakes_are_tool_results_and_hostile_writes_still_audited(
    database_url: str,
) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        carol = await instance.register("carol")
        theirs = await bob.direct_with(carol.did)
        mine = await alice.direct_with(bob.did)
        async with mcp_client(instance, alice) as client:
            hidden = await call(client, "confer_read_messages", {"conversation_id": theirs["id"]})
            assert hidden == {
                "ok": False,
                "code": "conversation_not_found",
                "error": f"no conversation {theirs['id']}",
            }
            bad = await call(client, "confer_read_messages", {"conversation_id": "x" * 500})
            assert bad == {  # refused by the tool's schema before any query, same shape
                "ok": False,
                "code": "validation_failed",
                "error": "invalid fields: conversation_id",
            }
            nul = await call(
                client, "confer_send_message", {"conversation_id": mine["id"], "content": "a\x00b"}
            )
            assert nul["ok"] is False and nul["code"] == "validation_failed"
        rows = await _audit_rows(database_url)
        failed = [r for r in rows if r["tool_name"] == "confer_send_message"]
        assert len(failed) == 1 and failed[0]["success"] is False
        async with instance.state.pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM messages") == 0
