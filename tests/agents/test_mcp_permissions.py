"""``confer_decide_permission`` and API-key authentication on /mcp, over real HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.harness import Instance, User, next_event, run_instance


@pytest.fixture
async def pair(make_database) -> AsyncIterator[tuple[Instance, Instance]]:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        yield a, b


@contextlib.asynccontextmanager
async def mcp_with(instance: Instance, credential: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {credential}"}
    async with httpx2.AsyncClient(headers=headers, timeout=10) as http:
        transport = streamable_http_client(f"{instance.base_url}/mcp", http_client=http)
        async with Client(transport) as client:  # type: ignore[arg-type]
            yield client


async def call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's structured result; a failure (``ok: false``) must also be flagged with MCP's
    ``isError``, a success must not."""
    result = await client.call_tool(name, arguments)
    content = dict(result.structured_content or {})
    assert result.is_error is (content.get("ok") is False), result
    return content


async def rows(instance: Instance, sql: str, *args: Any) -> list[dict[str, Any]]:
    async with instance.state.pool.acquire() as conn:
        return [dict(r) for r in await conn.fetch(sql, *args)]


async def api_key(user: User) -> str:
    response = await user.request("POST", "/v1/api-keys", json={"name": "editor"})
    assert response.status_code == 201, response.text
    return response.json()["key"]


async def pending_request(a: Instance, b: Instance, text: str) -> tuple[User, User, dict]:
    """alice@A writes to bob's agent@B; policy asks, so bob@B has a pending request."""
    alice = await a.register("alice")
    bob = await b.register("bob")
    conversation = await alice.direct_with(bob.profile["agent_did"])
    async with bob.websocket() as bob_ws:
        await alice.send(conversation["id"], text)
        await next_event(bob_ws, "permission.requested")
    return alice, bob, conversation


async def test_an_api_key_authenticates_and_allow_once_delivers(pair) -> None:
    a, b = pair
    alice, bob, _ = await pending_request(a, b, "May I see the Q3 plan?")
    key = await api_key(bob)
    async with mcp_with(b, key) as client, alice.websocket() as alice_ws:
        listed = await call(client, "confer_list_pending_permissions", {})
        [pending] = listed["permissions"]
        decided = await call(
            client,
            "confer_decide_permission",
            {"permission_id": pending["id"], "decision": "allow_once", "agent": "editor"},
        )
        assert decided["ok"] is True, decided
        assert decided["permission"]["decision"] == "allow_once"
        reply = (await next_event(alice_ws, "message.created"))["data"]
        while reply["sender_did"] != bob.profile["agent_did"]:
            reply = (await next_event(alice_ws, "message.created"))["data"]
        assert reply["content"] == "Approved: your request was delivered."
        again = await call(
            client,
            "confer_decide_permission",
            {"permission_id": pending["id"], "decision": "deny", "agent": "editor"},
        )
        assert again["ok"] is False and again["code"] == "permission_decided"
        assert (await call(client, "confer_list_pending_permissions", {}))["permissions"] == []
    delivered = "SELECT content FROM messages WHERE sender_type = 'peer_agent'"
    assert await rows(b, delivered) == [{"content": "May I see the Q3 plan?"}]
    audit = await rows(
        b,
        "SELECT tool_name, target_id, success, agent, payload_json FROM mcp_audit_log ORDER BY id",
    )
    assert [(r["success"], r["target_id"]) for r in audit] == [(True, pending["id"]), (False, None)]
    assert {r["tool_name"] for r in audit} == {"confer_decide_permission"}
    assert audit[0]["agent"] == "editor"
    [task] = await rows(b, "SELECT state FROM a2a_tasks")
    assert task["state"] == "TASK_STATE_COMPLETED"


async def test_bad_decisions_leave_no_decision_but_an_audit_row(pair) -> None:
    a, b = pair
    _, bob, _ = await pending_request(a, b, "Share the roadmap?")
    async with mcp_with(b, bob.token) as client:
        [pending] = (await call(client, "confer_list_pending_permissions", {}))["permissions"]
        for arguments, code in (
            ({"decision": "maybe"}, "validation_failed"),
            ({"decision": "allow_always", "scope": "universe"}, "validation_failed"),
            ({"decision": "deny", "permission_id": "01J00000000000000000000000"}, None),
        ):
            result = await call(
                client,
                "confer_decide_permission",
                {"permission_id": pending["id"], **arguments},
            )
            assert result["ok"] is False
            assert result["code"] == (code or "permission_not_found")
        decided = await call(
            client,
            "confer_decide_permission",
            {"permission_id": pending["id"], "decision": "allow_always", "scope": "peer"},
        )
        assert decided["ok"] is True
        assert decided["permission"]["decision_scope"] == "peer"
    audit = await rows(b, "SELECT success FROM mcp_audit_log ORDER BY id")
    assert [r["success"] for r in audit] == [False, False, False, True]
    [row] = await rows(b, "SELECT decision, decision_scope FROM permissions")
    assert row == {"decision": "allow_always", "decision_scope": "peer"}


async def test_revoked_or_unknown_api_keys_are_refused(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        bob = await instance.register("bob")
        key = await api_key(bob)
        listed = (await bob.request("GET", "/v1/api-keys")).json()
        revoke = await bob.request("DELETE", f"/v1/api-keys/{listed[0]['id']}")
        assert revoke.status_code in (200, 204), revoke.text
        for credential in (key, "cfk_" + "x" * 43):
            response = await instance.client.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={
                    "Authorization": f"Bearer {credential}",
                    "Accept": "application/json, text/event-stream",
                },
            )
            assert response.status_code == 401
            assert response.json()["code"] == "api_key_invalid"
