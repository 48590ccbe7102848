"""MCP tools refuse what the REST API refuses, with the same stable codes and one result shape.

Driven by the official ``mcp`` client over real HTTP; REST calls go to the same instance.
"""

from __future__ import annotations

from typing import Any

from tests.agents.helpers import agent_id
from tests.agents.test_mcp import _audit_rows, call, mcp_client
from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import run_instance


def _refused(result: dict[str, Any], code: str) -> None:
    assert result["ok"] is False, result
    assert result["code"] == code, result
    assert isinstance(result["error"], str) and result["error"], result


async def test_update_project_memory_refuses_the_project_ids_rest_refuses(
    database_url: str,
) -> None:
    async with run_fake_peer() as peer, run_instance(database_url) as instance:
        alice = await instance.register("alice")
        await alice.request("POST", "/v1/contacts", json={"did": peer.did})
        q = {"peer": peer.did}
        async with mcp_client(instance, alice) as client:
            for bad in ("../etc", "-leading-dash", "a" * 256, ""):
                refused = await call(
                    client,
                    "confer_update_project_memory",
                    {"project_id": bad, "peer_did": peer.did, "facts_md": "x"},
                )
                _refused(refused, "validation_failed")
                assert "audit_id" in refused
            rest = await alice.request(
                "PUT", "/v1/project-memory/-leading-dash", params=q, json={"facts_md": "x"}
            )
            assert rest.status_code == 422 and rest.json()["code"] == "validation_failed"
            fine = await call(
                client,
                "confer_update_project_memory",
                {"project_id": "Confer_2.x-beta", "peer_did": peer.did, "facts_md": "x"},
            )
            assert fine["ok"] is True, fine
        async with instance.state.pool.acquire() as conn:
            projects = await conn.fetch("SELECT project_id FROM project_memory")
        assert [r["project_id"] for r in projects] == ["Confer_2.x-beta"]
        rows = await _audit_rows(database_url)
        assert [r["success"] for r in rows] == [False] * 4 + [True]
        assert all(r["error_message"].startswith("validation_failed") for r in rows[:4])


async def test_update_project_memory_keeps_the_fields_it_was_not_sent(database_url: str) -> None:
    async with run_fake_peer() as peer, run_instance(database_url) as instance:
        alice = await instance.register("alice")
        await alice.request("POST", "/v1/contacts", json={"did": peer.did})
        q = {"peer": peer.did}
        async with mcp_client(instance, alice) as client:
            created = await call(
                client,
                "confer_update_project_memory",
                {
                    "project_id": "confer",
                    "peer_did": peer.did,
                    "facts_md": "facts 1",
                    "decisions_md": "decisions 1",
                    "meta": {"tags": ["a"]},
                },
            )
            assert created["ok"] is True and created["version"] == 1
            facts_only = await call(
                client,
                "confer_update_project_memory",
                {"project_id": "confer", "peer_did": peer.did, "facts_md": "f2", "base_version": 1},
            )
            assert facts_only["ok"] is True and facts_only["version"] == 2
            document = (await alice.request("GET", "/v1/project-memory/confer", params=q)).json()
            assert (document["facts_md"], document["decisions_md"], document["meta"]) == (
                "f2",
                "decisions 1",
                {"tags": ["a"]},
            )
            explicit_null = await call(
                client,
                "confer_update_project_memory",
                {
                    "project_id": "confer",
                    "peer_did": peer.did,
                    "facts_md": None,
                    "decisions_md": "",
                    "meta": {"tags": ["b"]},
                    "base_version": 2,
                },
            )
            assert explicit_null["ok"] is True, explicit_null
            document = (await alice.request("GET", "/v1/project-memory/confer", params=q)).json()
            assert (document["facts_md"], document["decisions_md"], document["meta"]) == (
                "f2",
                "",
                {"tags": ["b"]},
            )
            blind = await call(
                client,
                "confer_update_project_memory",
                {"project_id": "confer", "peer_did": peer.did, "facts_md": "lost"},
            )
            _refused(blind, "precondition_required")
            # what to send is the tool's argument, not REST's header
            assert "send base_version 3" in blind["error"] and "If-Match" not in blind["error"]
        history = await alice.request("GET", "/v1/project-memory/confer/versions", params=q)
        assert [v["version"] for v in history.json()] == [3, 2, 1]
        rows = await _audit_rows(database_url)
        assert [r["success"] for r in rows] == [True] * 3 + [False]


async def test_read_tools_refuse_what_rest_refuses_with_the_same_codes(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        conversation = await alice.direct_with(bob.did)
        messages = f"/v1/conversations/{conversation['id']}/messages"
        async with mcp_client(instance, alice) as client:
            cases: list[tuple[str, dict[str, Any], str, dict[str, Any], str]] = [
                (
                    "confer_search_memory",
                    {"query": ""},
                    "/v1/search",
                    {"q": ""},
                    "validation_failed",
                ),
                (
                    "confer_search_memory",
                    {"query": "x", "threshold": 5},
                    "/v1/search",
                    {"q": "x", "threshold": 5},
                    "validation_failed",
                ),
                (
                    "confer_search_memory",
                    {"query": "x" * 1001},
                    "/v1/search",
                    {"q": "x" * 1001},
                    "validation_failed",
                ),
                (
                    "confer_search_memory",
                    {"query": "x", "limit": 101},
                    "/v1/search",
                    {"q": "x", "limit": 101},
                    "validation_failed",
                ),
                (
                    "confer_search_memory",
                    {"query": "x", "method": "magic"},
                    "/v1/search",
                    {"q": "x", "method": "magic"},
                    "validation_failed",
                ),
                (
                    "confer_search_memory",
                    {"query": "a\x00b"},
                    "/v1/search",
                    {"q": "a\x00b"},
                    "invalid_text",
                ),
                (
                    "confer_read_messages",
                    {"conversation_id": conversation["id"], "before": "garbage"},
                    messages,
                    {"before": "garbage"},
                    "validation_failed",
                ),
                (
                    "confer_read_messages",
                    {"conversation_id": conversation["id"], "limit": 0},
                    messages,
                    {"limit": 0},
                    "validation_failed",
                ),
                (
                    "confer_read_messages",
                    {"conversation_id": "x" * 500},
                    "/v1/conversations/" + "x" * 500 + "/messages",
                    {},
                    "validation_failed",
                ),
            ]
            for tool, arguments, path, params, code in cases:
                rest = await alice.request("GET", path, params=params)
                assert rest.status_code == 422 and rest.json()["code"] == code, (path, rest.text)
                result = await client.call_tool(tool, arguments)
                assert result.is_error, (tool, arguments, result)
                _refused(dict(result.structured_content or {}), code)
                assert "audit_id" not in (result.structured_content or {})

            within = await call(client, "confer_search_memory", {"query": "x", "threshold": 0.9})
            assert within["hits"] == []
        assert await _audit_rows(database_url) == []  # read tools never write, even failing


async def test_write_tools_use_the_rest_codes_and_audit_argument_errors(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        conversation = await alice.direct_with(bob.did)
        rest_message = await alice.request(
            "POST",
            f"/v1/conversations/{conversation['id']}/messages",
            json={"content": "a\x00b"},
        )
        rest_memory = await alice.request(
            "POST",
            f"/v1/agents/{agent_id(alice)}/memories",
            json={"type": "fact", "content": "a\x00b"},
        )
        assert rest_message.status_code == rest_memory.status_code == 422
        assert rest_memory.json()["code"] == "invalid_text", rest_memory.text
        async with mcp_client(instance, alice) as client:
            nul = await call(
                client,
                "confer_send_message",
                {"conversation_id": conversation["id"], "content": "a\x00b"},
            )
            _refused(nul, rest_message.json()["code"])
            memory_nul = await call(
                client, "confer_record_memory", {"type": "fact", "content": "a\x00b"}
            )
            _refused(memory_nul, "invalid_text")

            wrong_type = await client.call_tool(
                "confer_record_memory",
                {"type": "fact", "content": "x", "importance": "high", "agent": "typo-bot"},
            )
            assert wrong_type.is_error, wrong_type
            result = dict(wrong_type.structured_content or {})
            _refused(result, "validation_failed")
            assert "importance" in result["error"]
        rows = await _audit_rows(database_url)
        assert [(r["tool_name"], r["success"]) for r in rows] == [
            ("confer_send_message", False),
            ("confer_record_memory", False),
            ("confer_record_memory", False),
        ]
        assert rows[1]["error_message"].startswith("invalid_text")
        assert rows[2]["id"] == result["audit_id"] and rows[2]["agent"] == "typo-bot"
        assert rows[2]["error_message"].startswith("validation_failed")
