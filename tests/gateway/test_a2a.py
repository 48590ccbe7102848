"""A2A 1.0 surface over real HTTP: Agent Cards, AgentFacts, API keys, every JSON-RPC method."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.gateway.fakepeer import FakePeer, run_fake_peer
from tests.gateway.harness import Instance, User, next_event, run_instance

A2A = {"A2A-Version": "1.0", "Content-Type": "application/json"}


@pytest.fixture
async def b(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as instance:
        yield instance


async def make_public(instance: Instance, user: User, **fields: Any) -> str:
    """Make the user's main agent public (agents API is another issue's) and return its id."""
    agent_id = user.profile["agent_did"].rsplit(":", 1)[1]
    async with instance.state.pool.acquire() as conn:
        await conn.execute(
            "UPDATE agents SET is_public = true, name = COALESCE($2, name) WHERE id = $1",
            agent_id,
            fields.get("name"),
        )
    return str(agent_id)


async def issue_key(user: User, name: str = "cli") -> str:
    response = await user.request("POST", "/v1/api-keys", json={"name": name})
    assert response.status_code == 201, response.text
    return str(response.json()["key"])


def call(method: str, params: Any, rpc_id: int | str = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}


def text_message(text: str, message_id: str | None = None) -> dict[str, Any]:
    return {
        "message": {
            "messageId": message_id or uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
    }


async def rpc(
    instance: Instance, path: str, key: str, body: dict[str, Any], **headers: str
) -> dict[str, Any]:
    response = await instance.client.post(
        path, json=body, headers={**A2A, "Authorization": f"Bearer {key}", **headers}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


# --- Agent Cards and AgentFacts ------------------------------------------------------------


async def test_instance_card_is_a2a_1_0_with_etag_and_cache_control(b: Instance) -> None:
    bob = await b.register("bob")
    agent_id = await make_public(b, bob, name="Bob's helper")
    response = await b.client.get("/.well-known/agent-card.json")
    assert response.status_code == 200
    card = response.json()
    assert card["supportedInterfaces"] == [
        {"url": f"{b.base_url}/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    assert agent_id in [s["id"] for s in card["skills"]]
    extension = card["capabilities"]["extensions"][0]
    assert extension["uri"] == "urn:confer:a2a:ext:rfc9421-did-web:v1"
    assert extension["params"]["tag"] == "confer-a2a"
    assert response.headers["cache-control"] == "public, max-age=60"
    etag = response.headers["etag"]
    again = await b.client.get("/.well-known/agent-card.json", headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.headers["etag"] == etag
    # A change to the agents changes the card and its ETag.
    async with b.state.pool.acquire() as conn:
        await conn.execute("UPDATE agents SET name = 'Renamed' WHERE id = $1", agent_id)
    changed = await b.client.get("/.well-known/agent-card.json", headers={"If-None-Match": etag})
    assert changed.status_code == 200
    assert changed.headers["etag"] != etag


async def test_agent_card_and_facts_only_for_public_agents(b: Instance) -> None:
    bob = await b.register("bob")
    agent_id = bob.profile["agent_did"].rsplit(":", 1)[1]
    for path in (
        f"/agents/{agent_id}/.well-known/agent-card.json",
        f"/agents/{agent_id}/agent-facts.json",
    ):
        hidden = await b.client.get(path)
        assert hidden.status_code == 404
        assert hidden.json()["code"] == "not_found"
    await make_public(b, bob)
    card = (await b.client.get(f"/agents/{agent_id}/.well-known/agent-card.json")).json()
    assert card["supportedInterfaces"][0]["url"] == f"{b.base_url}/agents/{agent_id}/a2a"
    assert card["supportedInterfaces"][0]["protocolVersion"] == "1.0"
    assert card["securitySchemes"]["conferApiKey"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert card["skills"][0]["id"] == "relay-message"
    facts = (await b.client.get(f"/agents/{agent_id}/agent-facts.json")).json()
    required = {"id", "agent_name", "label", "description", "version", "provider", "endpoints"}
    assert required | {"capabilities", "skills"} <= set(facts)
    assert facts["id"] == bob.profile["agent_did"]
    assert facts["endpoints"]["static"] == [f"{b.base_url}/agents/{agent_id}/a2a"]
    assert {"id", "description", "inputModes", "outputModes"} <= set(facts["skills"][0])


# --- API keys -------------------------------------------------------------------------------


async def test_api_keys_create_list_revoke(b: Instance) -> None:
    bob = await b.register("bob")
    agent_id = bob.profile["agent_did"].rsplit(":", 1)[1]
    key = await issue_key(bob, "my client")
    listed = (await bob.request("GET", "/v1/api-keys")).json()
    assert [(k["name"], k["prefix"], k["revoked_at"]) for k in listed] == [
        ("my client", key[:12], None)
    ]
    assert "key" not in listed[0]
    body = call("SendMessage", text_message("hello agent"))
    ok = await rpc(b, f"/agents/{agent_id}/a2a", key, body)
    assert ok["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    revoked = await bob.request("DELETE", f"/v1/api-keys/{listed[0]['id']}")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    refused = await b.client.post(
        f"/agents/{agent_id}/a2a", json=body, headers={**A2A, "Authorization": f"Bearer {key}"}
    )
    assert refused.status_code == 401
    assert refused.json()["code"] == "api_key_invalid"
    missing = await bob.request("DELETE", "/v1/api-keys/01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert missing.status_code == 404
    assert missing.json()["code"] == "api_key_not_found"
    other = await b.register("carol")
    assert (await other.request("GET", "/v1/api-keys")).json() == []


async def test_api_key_names_are_cleaned(b: Instance) -> None:
    """A key's name is shown back in lists: bidi and zero-width characters are removed, and a
    name with nothing visible left is refused like a display name."""
    dave = await b.register("dave")
    made = await dave.request("POST", "/v1/api-keys", json={"name": "key\u202eabc\u200b "})
    assert made.status_code == 201, made.text
    assert made.json()["name"] == "keyabc"
    listed = (await dave.request("GET", "/v1/api-keys")).json()
    assert [k["name"] for k in listed] == ["keyabc"]
    for name in ("\u202e", " \u200b\t"):
        refused = await dave.request("POST", "/v1/api-keys", json={"name": name})
        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "validation_failed"


async def test_api_key_reaches_own_and_public_agents_only(b: Instance) -> None:
    bob = await b.register("bob")
    carol = await b.register("carol")
    carol_agent = carol.profile["agent_did"].rsplit(":", 1)[1]
    key = await issue_key(bob)
    body = call("SendMessage", text_message("hi carol's agent"))
    private = await b.client.post(
        f"/agents/{carol_agent}/a2a", json=body, headers={**A2A, "Authorization": f"Bearer {key}"}
    )
    assert private.status_code == 403
    assert private.json()["code"] == "api_key_scope"
    user_endpoint = await b.client.post(
        "/users/carol/a2a", json=body, headers={**A2A, "Authorization": f"Bearer {key}"}
    )
    assert user_endpoint.status_code == 403
    async with b.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM messages") == 0
    await make_public(b, carol)
    async with b.state.pool.acquire() as conn:  # carol's policy lets anyone through
        await conn.execute(
            """UPDATE agents SET policies_json = '{"default": "auto", "rules": []}'
               WHERE id = $1""",
            carol_agent,
        )
    async with carol.websocket() as ws:
        ok = await rpc(b, f"/agents/{carol_agent}/a2a", key, body)
        event = await next_event(ws, "message.created")
    assert ok["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert event["data"]["content"] == "hi carol's agent"
    assert event["data"]["sender_did"] == bob.did
    assert event["data"]["via"] == "api"


# --- JSON-RPC methods -------------------------------------------------------------------------


@pytest.fixture
async def agent(b: Instance) -> tuple[User, str, str]:
    bob = await b.register("bob")
    return bob, bob.profile["agent_did"].rsplit(":", 1)[1], await issue_key(bob)


async def test_send_get_and_retry_of_a_message(b: Instance, agent) -> None:
    _, agent_id, key = agent
    path = f"/agents/{agent_id}/a2a"
    body = call("SendMessage", text_message("do the thing", message_id="m-1"))
    first = (await rpc(b, path, key, body))["result"]["task"]
    assert first["history"][0]["parts"] == [{"text": "do the thing"}]
    assert first["history"][0]["taskId"] == first["id"]
    assert first["status"]["message"]["role"] == "ROLE_AGENT"
    assert first["status"]["timestamp"].endswith("Z")
    retry = (await rpc(b, path, key, body))["result"]["task"]
    assert retry["id"] == first["id"]
    got = (await rpc(b, path, key, call("GetTask", {"id": first["id"]})))["result"]
    assert got["id"] == first["id"] and got["contextId"] == first["contextId"]
    assert (
        "history"
        not in (await rpc(b, path, key, call("GetTask", {"id": first["id"], "historyLength": 0})))[
            "result"
        ]
    )
    async with b.state.pool.acquire() as conn:  # the question once (and the agent's answer)
        assert await conn.fetchval("SELECT count(*) FROM messages WHERE sender_type = 'user'") == 1
        assert await conn.fetchval("SELECT count(*) FROM a2a_tasks") == 1


async def test_tasks_are_private_to_their_caller(b: Instance, agent) -> None:
    bob, agent_id, key = agent
    path = f"/agents/{agent_id}/a2a"
    task = (await rpc(b, path, key, call("SendMessage", text_message("secret"))))["result"]["task"]
    other_key = await issue_key(bob, "second client")
    for method in ("GetTask", "CancelTask", "SubscribeToTask"):
        answer = await rpc(b, path, other_key, call(method, {"id": task["id"]}))
        assert answer["error"]["code"] == -32001, method
        assert answer["error"]["data"][0]["reason"] == "TASK_NOT_FOUND"
    listed = await rpc(b, path, other_key, call("ListTasks", {}))
    assert listed["result"]["tasks"] == [] and listed["result"]["totalSize"] == 0


async def test_a_message_naming_an_unknown_task_is_task_not_found(b: Instance, agent) -> None:
    bob, agent_id, key = agent
    path = f"/agents/{agent_id}/a2a"
    mine = (await rpc(b, path, key, call("SendMessage", text_message("first"))))["result"]["task"]
    other_key = await issue_key(bob, "second client")
    for task_id, caller in (("no-such-task", key), (mine["id"], other_key)):
        for method in ("SendMessage", "SendStreamingMessage"):
            body = text_message("follow-up")
            body["message"]["taskId"] = task_id
            response = await b.client.post(
                path,
                json=call(method, body),
                headers={**A2A, "Authorization": f"Bearer {caller}"},
            )
            if method == "SendMessage":
                answer = response.json()
            else:  # a streaming call that fails at once answers with one JSON-RPC error
                answer = json.loads(response.text.removeprefix("data: ").strip() or response.text)
            assert answer["error"]["code"] == -32001, (task_id, method, answer)
    # nothing was stored for those calls
    listed = await rpc(b, path, key, call("ListTasks", {}))
    assert [t["id"] for t in listed["result"]["tasks"]] == [mine["id"]]
    # naming the caller's own task is accepted
    body = text_message("more")
    body["message"]["taskId"] = mine["id"]
    assert "result" in await rpc(b, path, key, call("SendMessage", body))


async def test_list_tasks_pages_newest_first(b: Instance, agent) -> None:
    _, agent_id, key = agent
    path = f"/agents/{agent_id}/a2a"
    ids = []
    for i in range(3):
        sent = await rpc(b, path, key, call("SendMessage", text_message(f"n{i}")))
        ids.append(sent["result"]["task"]["id"])
    seen, token = [], None
    while True:
        params = {"pageSize": 2, **({"pageToken": token} if token else {})}
        page = (await rpc(b, path, key, call("ListTasks", params)))["result"]
        assert page["totalSize"] == 3 and page["pageSize"] == 2
        seen += [t["id"] for t in page["tasks"]]
        token = page["nextPageToken"]
        if not token:
            break
    assert seen == list(reversed(ids))
    filtered = await rpc(b, path, key, call("ListTasks", {"status": "TASK_STATE_CANCELED"}))
    assert filtered["result"]["tasks"] == []
    bad = await rpc(b, path, key, call("ListTasks", {"pageToken": "garbage!"}))
    assert bad["error"]["code"] == -32602


async def test_a_deeply_nested_api_key_body_is_a_parse_error(b: Instance, agent) -> None:
    _, agent_id, key = agent
    body = '{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": ' + "[" * 100_000
    response = await b.client.post(
        f"/agents/{agent_id}/a2a",
        content=body,
        headers={**A2A, "Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == -32700


@pytest.mark.parametrize(
    ("body", "headers", "code"),
    [
        (call("SendMessage", text_message("x")), {"A2A-Version": ""}, -32009),
        (call("SendMessage", text_message("x")), {"A2A-Version": "0.3"}, -32009),
        (call("message/send", text_message("x")), {}, -32601),
        (call("SendMessage", {"message": {"role": "ROLE_USER"}}), {}, -32602),
        (
            call(
                "SendMessage",
                {"message": {"messageId": "1", "role": "ROLE_USER", "parts": [{"data": {}}]}},
            ),
            {},
            -32005,
        ),
        (call("GetTask", {"id": "nope"}), {}, -32001),
        # push configs of a task that is not the caller's (docs/federation.md#push-notifications)
        (call("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "https://x"}), {}, -32001),
        (call("GetTaskPushNotificationConfig", {"taskId": "t", "id": "c"}), {}, -32001),
        (call("ListTaskPushNotificationConfigs", {"taskId": "t"}), {}, -32001),
        (call("DeleteTaskPushNotificationConfig", {"taskId": "t", "id": "c"}), {}, -32001),
        (call("CreateTaskPushNotificationConfig", {"taskId": "t"}), {}, -32602),
        # §3.1.11: no capabilities.extendedAgentCard
        (call("GetExtendedAgentCard", {}), {}, -32004),
    ],
)
async def test_protocol_errors_are_a2a_error_codes(b: Instance, agent, body, headers, code) -> None:
    _, agent_id, key = agent
    answer = await rpc(b, f"/agents/{agent_id}/a2a", key, body, **headers)
    assert answer["error"]["code"] == code
    assert answer["error"]["data"][0]["domain"] == "a2a-protocol.org"
    async with b.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM messages") == 0


async def test_streaming_message_sends_task_then_final_status(b: Instance, agent) -> None:
    _, agent_id, key = agent
    response = await b.client.post(
        f"/agents/{agent_id}/a2a",
        json=call("SendStreamingMessage", text_message("streamed"), rpc_id="s-1"),
        headers={**A2A, "Authorization": f"Bearer {key}", "Accept": "text/event-stream"},
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    # submitted, working (the agent answers), then completed with the answer
    assert [e["id"] for e in events] == ["s-1", "s-1", "s-1"]
    first, working, last = (e["result"] for e in events)
    assert first["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert working["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"
    assert last["statusUpdate"]["taskId"] == first["task"]["id"]
    assert last["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_cancel_and_subscribe_on_terminal_tasks_are_refused(b: Instance, agent) -> None:
    _, agent_id, key = agent
    path = f"/agents/{agent_id}/a2a"
    task = (await rpc(b, path, key, call("SendMessage", text_message("x"))))["result"]["task"]
    cancel = await rpc(b, path, key, call("CancelTask", {"id": task["id"]}))
    assert cancel["error"]["code"] == -32002
    subscribe = await rpc(b, path, key, call("SubscribeToTask", {"id": task["id"]}))
    assert subscribe["error"]["code"] == -32004


async def test_subscriber_sees_a_cancel_of_an_open_task(b: Instance, agent) -> None:
    _, agent_id, key = agent
    path = f"/agents/{agent_id}/a2a"
    task = (await rpc(b, path, key, call("SendMessage", text_message("x"))))["result"]["task"]
    async with b.state.pool.acquire() as conn:  # an open task, as one awaiting its owner
        await conn.execute(
            "UPDATE a2a_tasks SET state = 'TASK_STATE_WORKING' WHERE id = $1", task["id"]
        )
    headers = {**A2A, "Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
    events: list[dict[str, Any]] = []
    first = asyncio.Event()

    async def subscribe() -> None:
        body = call("SubscribeToTask", {"id": task["id"]}, rpc_id=7)
        async with b.client.stream("POST", path, json=body, headers=headers) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                    first.set()

    subscriber = asyncio.create_task(subscribe())
    await asyncio.wait_for(first.wait(), 5)
    canceled = await rpc(b, path, key, call("CancelTask", {"id": task["id"]}))
    assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    await asyncio.wait_for(subscriber, 5)
    assert events[0]["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
    again = await rpc(b, path, key, call("CancelTask", {"id": task["id"]}))
    assert again["error"]["code"] == -32002


async def test_instance_endpoint_routes_by_tenant(b: Instance, agent) -> None:
    _, agent_id, key = agent
    params = {"tenant": agent_id, **text_message("via the instance")}
    task = (await rpc(b, "/a2a", key, call("SendMessage", params)))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    # no tenant, or one this instance does not have: a JSON-RPC error (A2A §9.5), not a 404
    for params in (text_message("to whom?"), {"tenant": "nobody", **text_message("?")}):
        nobody = await b.client.post(
            "/a2a",
            json=call("SendMessage", params, rpc_id="x"),
            headers={**A2A, "Authorization": f"Bearer {key}"},
        )
        assert nobody.status_code == 200, nobody.text
        answer = nobody.json()
        assert answer["id"] == "x" and answer["jsonrpc"] == "2.0"
        assert answer["error"]["code"] == -32602
        assert answer["error"]["data"][0]["reason"] == "INVALID_PARAMS"
        assert "None" not in answer["error"]["message"]
    assert "tenant" in answer["error"]["message"] or "nobody" in answer["error"]["message"]
    async with b.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM a2a_tasks") == 1


async def test_signed_peer_gets_tasks_too(database_url: str) -> None:
    async with run_instance(database_url) as b, run_fake_peer() as peer:
        await b.register("bob")
        url = f"{b.base_url}/users/bob/a2a"
        body = peer.rpc("signed")
        sent = await b.client.post(
            "/users/bob/a2a", content=body, headers=peer.signed_headers(url, body)
        )
        task = sent.json()["result"]["task"]
        get = json.dumps(call("GetTask", {"id": task["id"]})).encode()
        got = await b.client.post(
            "/users/bob/a2a", content=get, headers=peer.signed_headers(url, get)
        )
        assert got.json()["result"]["id"] == task["id"]
        async with b.state.pool.acquire() as conn:
            caller = await conn.fetchval("SELECT caller FROM a2a_tasks")
        assert caller == f"peer:{peer.did}"
        assert isinstance(peer, FakePeer)


async def test_peers_cache_the_agent_facts_of_public_agents(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        alice = await a.register("alice")
        bob = await b.register("bob")
        private = await alice.request(
            "POST", "/v1/contacts", json={"did": bob.profile["agent_did"]}
        )
        assert private.status_code == 201, private.text
        await make_public(b, bob, name="Bob's public helper")
        carol = await a.register("carol")
        # carol's contact re-resolves once the cached document is stale.
        a.state.clock.offset = 120
        try:
            public = await carol.request(
                "POST", "/v1/contacts", json={"did": bob.profile["agent_did"]}
            )
        finally:
            a.state.clock.offset = 0
        assert public.status_code == 201
        assert public.json()["name"] == "Bob's public helper"
        async with a.state.pool.acquire() as conn:
            facts = await conn.fetchval(
                "SELECT agent_facts_json FROM peer_agents WHERE did = $1", bob.profile["agent_did"]
            )
        assert facts["id"] == bob.profile["agent_did"]
        assert facts["label"] == "Bob's public helper"
        assert facts["endpoints"]["static"][0].endswith("/a2a")


async def test_did_documents_carry_an_etag_and_answer_304(b: Instance) -> None:
    await b.register("bob")
    first = await b.client.get("/users/bob/did.json")
    etag = first.headers["etag"]
    again = await b.client.get("/users/bob/did.json", headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert (await b.client.get("/.well-known/did.json")).headers["etag"] != etag
