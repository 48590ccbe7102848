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
    """The tool's structured result; a failure (``ok: false``) must also be flagged with MCP's
    ``isError``, a success must not."""
    result = await client.call_tool(name, arguments)
    content = dict(result.structured_content or {})
    assert result.is_error is (content.get("ok") is False), result
    return content


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
            hints = {t.name: t.annotations.read_only_hint for t in listed.tools if t.annotations}
            assert hints == {name: name in READ_TOOLS for name in READ_TOOLS | WRITE_TOOLS}

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


async def test_every_failing_tool_sets_is_error_with_a_structured_code(database_url: str) -> None:
    """MCP 2025-06-18 Tools §Error Handling: a tool execution error is a result with
    ``isError: true``; Confer's keeps ``{"ok": false, "code", "error"}`` in it, for every tool,
    whatever failed (the tool's own refusal, its schema, an unknown tool, a crash)."""
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        carol = await instance.register("carol")
        theirs = await bob.direct_with(carol.did)
        unknown_id = "01J9Z8Q6X3V5N2K7M4R1T0W8YB"
        cases: dict[str, tuple[dict[str, Any], str | None]] = {
            "confer_list_conversations": ({"limit": 0}, "validation_failed"),
            "confer_read_messages": ({"conversation_id": theirs["id"]}, "conversation_not_found"),
            "confer_search_memory": ({"query": "a\x00b"}, "invalid_text"),
            "confer_get_session_context": ({"topic": "t", "queries": []}, "validation_failed"),
            "confer_list_pending_permissions": ({"limit": "many"}, "validation_failed"),
            "confer_get_audit_log": ({"since": "yesterday"}, "validation_failed"),
            "confer_send_message": (
                {"conversation_id": theirs["id"], "content": "hi"},
                "conversation_not_found",
            ),
            "confer_record_memory": ({"type": "whim", "content": "x"}, "validation_failed"),
            "confer_update_project_memory": (
                {"project_id": "p", "peer_did": bob.did, "base_version": 7, "facts_md": "x"},
                None,
            ),
            "confer_decide_permission": (
                {"permission_id": unknown_id, "decision": "allow_once"},
                "permission_not_found",
            ),
            "confer_search_concepts": ({"query": ""}, "validation_failed"),
            "confer_get_active_concepts": ({"concept_type": "idea"}, "validation_failed"),
            "confer_get_concept_graph": ({"concept_name": "nope"}, "concept_not_found"),
            "confer_get_domain_summary": ({"domain": 5}, "validation_failed"),
            "confer_get_concept_context": ({"format": "html"}, "validation_failed"),
            "confer_get_concept_alerts": ({"project": ["a"]}, "validation_failed"),
            "confer_open_concept_session": ({"topic": "t", "queries": []}, "validation_failed"),
            "confer_audit_concept_thread": ({"concepts": []}, "validation_failed"),
            "confer_record_concept_occurrence": ({"concept": "nope"}, None),
            "confer_record_concept_relation": (
                {"source": "a", "target": "b", "kind": "loves"},
                "validation_failed",
            ),
            "confer_promote_concept": ({"concept": "nope"}, "concept_not_found"),
            "confer_archive_concept": ({"concept": "nope"}, "concept_not_found"),
            "confer_record_measurement": (
                {"context": "c", "outcome": "resolved", "domains": ["nope"]},
                "validation_failed",
            ),
            "confer_import_concepts": ({"content": "concepts: ["}, None),
        }
        async with mcp_client(instance, alice) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == set(cases)  # a new tool needs its failing case here
            for name, (arguments, code) in cases.items():
                result = await client.call_tool(name, arguments)
                content = dict(result.structured_content or {})
                assert result.is_error is True, (name, result)
                assert content["ok"] is False and content["code"] != "internal_error", content
                assert code is None or content["code"] == code, (name, content)
                assert json.loads(result.content[0].text) == content  # type: ignore[union-attr]
                assert ("audit_id" in content) is (name in WRITE_TOOLS), (name, content)

            unknown = await client.call_tool("confer_no_such_tool", {})
            assert unknown.is_error is True
            assert (unknown.structured_content or {})["code"] == "not_found"

            # a crash in a tool: isError and internal_error, nothing of the exception sent
            conn = await asyncpg.connect(database_url)
            try:
                await conn.execute("ALTER TABLE agent_memories RENAME TO agent_memories_x")
                crashed = await client.call_tool("confer_search_memory", {"query": "anything"})
            finally:
                await conn.execute("ALTER TABLE agent_memories_x RENAME TO agent_memories")
                await conn.close()
            assert crashed.is_error is True
            assert crashed.structured_content == {
                "ok": False,
                "code": "internal_error",
                "error": "unexpected error",
            }
            fine = await client.call_tool("confer_search_memory", {"query": "anything"})
            assert fine.is_error is False and (fine.structured_content or {})["hits"] == []
