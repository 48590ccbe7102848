"""A2A push notifications over real HTTP: configs per task, the outbox, the webhook worker.

A stock A2A client (API key) talks to a real Confer (uvicorn on loopback); webhooks are a raw
loopback HTTP server that records every request. A signed peer's task waits for the owner's
consent (``TASK_STATE_AUTH_REQUIRED``) and completes when the owner approves, so a real status
update travels from the task's transaction to the webhook; an API-key task completes at once,
and its config hears that state.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from a2a.signatures import parse_signature, verify_request
from gateway.clock import Clock
from gateway.workers.retention import retain_once
from tests.did.httpserver import LoopbackServer, SeenRequest, respond
from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import Instance, User, run_instance
from tests.gateway.test_a2a import call, issue_key, make_public, rpc, text_message

TOKEN_HEADER = "x-a2a-notification-token"


class FixedClock(Clock):
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


@pytest.fixture
async def hooks() -> AsyncIterator[LoopbackServer]:
    async with LoopbackServer() as server:
        server.routes["/hook"] = respond(200, b"", "text/plain")
        yield server


async def agent_with_key(b: Instance) -> tuple[User, str, str]:
    bob = await b.register("bob")
    agent_id = await make_public(b, bob)
    return bob, agent_id, await issue_key(bob)


async def requests_to(server: LoopbackServer, path: str, count: int) -> list[SeenRequest]:
    """The first ``count`` requests to ``path``, waiting for them (generous: a loaded box)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        seen = [r for r in server.requests if r.path == path]
        if len(seen) >= count:
            return seen[:count]
        await asyncio.sleep(0.05)
    raise AssertionError(f"{len(seen)} of {count} requests reached {path}: {server.requests}")


async def counts(b: Instance) -> tuple[int, int, int]:
    async with b.state.pool.acquire() as conn:
        row = await conn.fetchrow(
            """SELECT (SELECT count(*) FROM a2a_push_configs) AS configs,
                      (SELECT count(*) FROM a2a_push_outbox) AS outbox,
                      (SELECT count(*) FROM messages) AS messages"""
        )
    assert row is not None
    return int(row["configs"]), int(row["outbox"]), int(row["messages"])


async def test_configs_deliver_each_update_signed_with_their_credentials(
    database_url: str, hooks: LoopbackServer
) -> None:
    async with run_instance(database_url) as b, run_fake_peer() as peer:
        bob = await b.register("bob")
        agent_id = await make_public(b, bob)
        card = (await b.client.get("/.well-known/agent-card.json")).json()
        assert card["capabilities"]["pushNotifications"] is True
        endpoint = f"/agents/{agent_id}/a2a"
        url = f"{b.base_url}{endpoint}"
        hook = f"http://127.0.0.1:{hooks.port}/hook"

        async def signed(method: str, params: dict[str, Any]) -> dict[str, Any]:
            body = json.dumps(call(method, params)).encode()
            sent = await b.client.post(
                endpoint, content=body, headers=peer.signed_headers(url, body)
            )
            assert sent.status_code == 200, sent.text
            return dict(sent.json())

        params = json.loads(peer.rpc("tell me when"))["params"]
        params["configuration"] = {"taskPushNotificationConfig": {"url": hook, "token": "tok-1"}}
        task = (await signed("SendMessage", params))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"  # bob's consent

        # the config given with the message hears the state the message left the task in,
        # signed by the agent's DID (the caller is a Confer peer)
        (first,) = await requests_to(hooks, "/hook", 1)
        assert first.headers[TOKEN_HEADER] == "tok-1"
        assert first.headers["content-type"] == "application/a2a+json"
        assert "authorization" not in first.headers
        parsed = parse_signature(first.headers)
        assert parsed.keyid.startswith(bob.profile["agent_did"] + "#")
        verify_request(  # what a Confer peer checks: RFC 9421 over the real URL, RFC 9530 digest
            parsed,
            method="POST",
            url=hook,
            headers=first.headers,
            body=first.body,
            public_key=b.state.identity.signing_key.public_key,
            now=int(time.time()),
        )
        sent = json.loads(first.body)
        assert sent["task"]["id"] == task["id"]
        assert sent["task"]["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"

        second = {
            "taskId": task["id"],
            "id": "second",
            "url": f"http://127.0.0.1:{hooks.port}/hook2",
            "authentication": {"scheme": "Bearer", "credentials": "cred-2"},
        }
        created = await signed("CreateTaskPushNotificationConfig", second)
        assert created["result"]["id"] == "second"
        assert created["result"]["authentication"] == {"scheme": "Bearer", "credentials": "cred-2"}
        hooks.routes["/hook2"] = respond(204, b"", "text/plain")
        listed = await signed("ListTaskPushNotificationConfigs", {"taskId": task["id"]})
        configs = listed["result"]["configs"]
        assert sorted(c["url"] for c in configs) == [hook, second["url"]]
        assert all(c["confer"]["active"] for c in configs)
        assert listed["result"]["nextPageToken"] == ""

        (pending,) = (await bob.request("GET", "/v1/permissions")).json()
        decided = await bob.request(
            "POST", f"/v1/permissions/{pending['id']}/decision", json={"decision": "allow_once"}
        )
        assert decided.status_code == 200, decided.text  # the task completes
        (_, done) = await requests_to(hooks, "/hook", 2)
        (done2,) = await requests_to(hooks, "/hook2", 1)
        for request in (done, done2):
            update = json.loads(request.body)["statusUpdate"]
            assert update["taskId"] == task["id"]
            assert update["contextId"] == task["contextId"]
            assert update["status"]["state"] == "TASK_STATE_COMPLETED"
        assert done.headers[TOKEN_HEADER] == "tok-1"
        assert done2.headers["authorization"] == "Bearer cred-2"
        assert TOKEN_HEADER not in done2.headers

        ref = {"taskId": task["id"], "id": "second"}
        got = await signed("GetTaskPushNotificationConfig", ref)
        assert got["result"]["confer"] == {"active": True, "failures": 0}
        assert (await signed("DeleteTaskPushNotificationConfig", ref))["result"] == {}
        again = await signed("GetTaskPushNotificationConfig", ref)
        assert again["error"]["code"] == -32001
        async with b.state.pool.acquire() as conn:  # delivered rows leave the outbox
            assert await conn.fetchval("SELECT count(*) FROM a2a_push_outbox") == 0


async def test_only_the_tasks_caller_sees_or_changes_its_configs(
    database_url: str, hooks: LoopbackServer
) -> None:
    async with run_instance(database_url) as b:
        bob, agent_id, key = await agent_with_key(b)
        other_key = await issue_key(bob, "another client")
        path = f"/agents/{agent_id}/a2a"
        task = (await rpc(b, path, key, call("SendMessage", text_message("mine"))))["result"]
        task_id = task["task"]["id"]
        hook = f"http://127.0.0.1:{hooks.port}/hook"
        made = await rpc(
            b, path, key, call("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": hook})
        )
        config_id = made["result"]["id"]
        ref = {"taskId": task_id, "id": config_id}
        for method, params in (
            ("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": hook}),
            ("GetTaskPushNotificationConfig", ref),
            ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
            ("DeleteTaskPushNotificationConfig", ref),
        ):
            answer = await rpc(b, path, other_key, call(method, params))
            assert answer["error"]["code"] == -32001, (method, answer)
        assert (await counts(b))[0] == 1
        # a retried create (same URL and token, no id) is the same config
        again = await rpc(
            b, path, key, call("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": hook})
        )
        assert again["result"]["id"] == config_id


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"url": "http://127.0.0.1/" + "x" * 2100}, "too long"),
        ({"url": "ftp://example.com/hook"}, "scheme"),
        ({"url": "http://user:pw@example.com/hook"}, "user info"),
        ({"url": "http:///nohost"}, "no host"),
        ({"url": "http://example.com/hook", "token": "a\r\nX-Evil: 1"}, "header injection"),
        ({"url": "http://example.com/hook", "token": "t" * 600}, "token too long"),
        (
            {
                "url": "http://example.com/h",
                "authentication": {"scheme": "Bearer\n", "credentials": "c"},
            },
            "bad scheme",
        ),
        ({"token": "no url"}, "missing url"),
    ],
)
async def test_bad_configs_are_invalid_params_and_write_nothing(
    database_url: str, config: dict[str, Any], why: str
) -> None:
    async with run_instance(database_url) as b:
        _, agent_id, key = await agent_with_key(b)
        path = f"/agents/{agent_id}/a2a"
        params = {**text_message(why), "configuration": {"taskPushNotificationConfig": config}}
        answer = await rpc(b, path, key, call("SendMessage", params))
        assert answer["error"]["code"] == -32602, answer
        assert await counts(b) == (0, 0, 0)  # not even the message
        task = (await rpc(b, path, key, call("SendMessage", text_message("ok"))))["result"]
        create = await rpc(
            b,
            path,
            key,
            call("CreateTaskPushNotificationConfig", {**config, "taskId": task["task"]["id"]}),
        )
        assert create["error"]["code"] == -32602, create
        assert (await counts(b))[:2] == (0, 0)


async def test_configs_per_task_are_bounded(database_url: str, hooks: LoopbackServer) -> None:
    async with run_instance(database_url, a2a_push_max_configs_per_task=2) as b:
        _, agent_id, key = await agent_with_key(b)
        path = f"/agents/{agent_id}/a2a"
        task_id = (await rpc(b, path, key, call("SendMessage", text_message("x"))))["result"][
            "task"
        ]["id"]
        answers = [
            await rpc(
                b,
                path,
                key,
                call(
                    "CreateTaskPushNotificationConfig",
                    {"taskId": task_id, "url": f"http://127.0.0.1:{hooks.port}/h{n}"},
                ),
            )
            for n in range(3)
        ]
        assert ["result" in a for a in answers] == [True, True, False]
        assert answers[2]["error"]["code"] == -32602
        # replacing an existing config by its id is not a new one
        first = answers[0]["result"]["id"]
        replaced = await rpc(
            b,
            path,
            key,
            call(
                "CreateTaskPushNotificationConfig",
                {"taskId": task_id, "id": first, "url": f"http://127.0.0.1:{hooks.port}/new"},
            ),
        )
        assert replaced["result"]["url"].endswith("/new")
        assert (await counts(b))[0] == 2
        # paged by id: one a page, then the end
        ids = []
        token = None
        for _ in range(3):
            page = await rpc(
                b,
                path,
                key,
                call(
                    "ListTaskPushNotificationConfigs",
                    {"taskId": task_id, "pageSize": 1, **({"pageToken": token} if token else {})},
                ),
            )
            ids += [c["id"] for c in page["result"]["configs"]]
            token = page["result"]["nextPageToken"]
            if not token:
                break
        assert ids == sorted(a["result"]["id"] for a in answers[:2])
        too_big = {"taskId": task_id, "pageSize": 1000}
        answer = await rpc(b, path, key, call("ListTaskPushNotificationConfigs", too_big))
        assert answer["error"]["code"] == -32602


async def test_a_failing_webhook_backs_off_then_is_disabled_and_the_worker_goes_on(
    database_url: str, hooks: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    hooks.routes["/broken"] = respond(500, b"oops", "text/plain")
    hooks.routes["/garbage"] = respond(302, b"", "text/plain", Location="http://10.0.0.1/")
    overrides = {"a2a_push_disable_after_failures": 4, "a2a_push_backoff_base_seconds": 0.2}
    async with run_instance(database_url, **overrides) as b:
        _, agent_id, key = await agent_with_key(b)
        path = f"/agents/{agent_id}/a2a"
        base = f"http://127.0.0.1:{hooks.port}"
        params = {
            **text_message("x"),
            "configuration": {"taskPushNotificationConfig": {"url": f"{base}/broken"}},
        }
        task_id = (await rpc(b, path, key, call("SendMessage", params)))["result"]["task"]["id"]
        made = await rpc(
            b,
            path,
            key,
            call(
                "CreateTaskPushNotificationConfig",
                {"taskId": task_id, "id": "garbage", "url": f"{base}/garbage"},
            ),
        )
        assert "result" in made, made
        started = time.monotonic()
        await requests_to(hooks, "/broken", 4)
        elapsed = time.monotonic() - started
        assert elapsed >= 0.2 + 0.4 + 0.8 - 0.1  # 1, 2, 4 × the base between the attempts
        configs = await wait_for_disabled(b, path, key, task_id, "/broken")
        broken = next(c for c in configs.values() if c["url"].endswith("/broken"))
        assert broken["confer"]["active"] is False
        assert broken["confer"]["failures"] == 4
        assert broken["confer"]["lastError"].startswith("HTTP 500")
        assert "disabledAt" in broken["confer"]
        # what was given up on stays for diagnosis, then retention deletes it
        failed = "SELECT count(*) FROM a2a_push_outbox WHERE state = 'failed'"
        async with b.state.pool.acquire() as conn:
            assert await conn.fetchval(failed) >= 1
        month = timedelta(seconds=b.settings.retention_outbox_failed_seconds + 60)
        later = FixedClock(datetime.now(UTC) + month)
        deleted = await retain_once(b.state.pool, later, b.settings)
        assert deleted["a2a_push_outbox"] >= 1
        async with b.state.pool.acquire() as conn:
            assert await conn.fetchval(failed) == 0
        # a healthy webhook still gets its notification; the disabled one gets nothing more
        healthy = {
            **text_message("y"),
            "configuration": {"taskPushNotificationConfig": {"url": f"{base}/hook"}},
        }
        assert "result" in await rpc(b, path, key, call("SendMessage", healthy))
        # the task as it was created (an API-key caller's task is working until the agent's
        # answer), then its final state
        first, final = await requests_to(hooks, "/hook", 2)
        assert json.loads(first.body)["task"]["status"]["state"] in (
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED",
        )
        assert json.loads(final.body)["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        await asyncio.sleep(1.0)
        assert len([r for r in hooks.requests if r.path == "/broken"]) == 4
        assert not [r for r in hooks.requests if r.path not in ("/broken", "/garbage", "/hook")]
        supervisor = b.state.supervisor
        assert supervisor is not None and supervisor.states()["a2a-push"] == "running"
    failures = [r.getMessage() for r in caplog.records if "'a2a-push'" in r.getMessage()]
    assert failures == []
    assert not [r for r in caplog.records if "failed unexpectedly" in r.getMessage()]


async def wait_for_disabled(
    b: Instance, path: str, key: str, task_id: str, suffix: str = ""
) -> dict[str, dict[str, Any]]:
    """The task's configs by id once the one whose URL ends with ``suffix`` is disabled (or
    after 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        listed = await rpc(
            b, path, key, call("ListTaskPushNotificationConfigs", {"taskId": task_id})
        )
        configs = {c["id"]: c for c in listed["result"]["configs"]}
        done = [c for c in configs.values() if c["url"].endswith(suffix)]
        if all(not c["confer"]["active"] for c in done) or time.monotonic() > deadline:
            return configs
        await asyncio.sleep(0.1)


async def test_the_address_policy_guards_webhook_urls(
    database_url: str, hooks: LoopbackServer
) -> None:
    async with run_instance(
        database_url,
        allow_private_networks=False,
        a2a_push_disable_after_failures=2,
        a2a_push_backoff_base_seconds=0.1,
    ) as b:
        _, agent_id, key = await agent_with_key(b)
        path = f"/agents/{agent_id}/a2a"
        literal = {
            **text_message("x"),
            "configuration": {
                "taskPushNotificationConfig": {"url": f"http://127.0.0.1:{hooks.port}/hook"}
            },
        }
        refused = await rpc(b, path, key, call("SendMessage", literal))
        assert refused["error"]["code"] == -32602
        assert "address policy" in refused["error"]["message"]
        named = {
            **text_message("y"),
            "configuration": {
                "taskPushNotificationConfig": {"url": f"http://localhost:{hooks.port}/hook"}
            },
        }
        task_id = (await rpc(b, path, key, call("SendMessage", named)))["result"]["task"]["id"]
        configs = await wait_for_disabled(b, path, key, task_id)
        (config,) = configs.values()
        assert config["confer"]["active"] is False
        assert "outbound address policy" in config["confer"]["lastError"]
        assert hooks.requests == []  # nothing ever reached the loopback address


async def trickle(_request: SeenRequest, writer: asyncio.StreamWriter) -> None:
    """A 200 whose headers never end: one byte a second."""
    writer.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    for _ in range(120):
        writer.write(b"x")
        await writer.drain()
        await asyncio.sleep(1)


async def endless_error(_request: SeenRequest, writer: asyncio.StreamWriter) -> None:
    """A 500 with a chunked body that goes on and on."""
    writer.write(b"HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n")
    for _ in range(2000):
        writer.write(b"400\r\n" + b"y" * 1024 + b"\r\n")
        await writer.drain()


async def not_http(_request: SeenRequest, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HELLO THERE\r\n\r\n")


async def hang_up(_request: SeenRequest, writer: asyncio.StreamWriter) -> None:
    writer.transport.abort()


async def test_hostile_webhooks_fail_alone_and_never_stop_the_worker(
    database_url: str, hooks: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    hostile = {"/trickle": trickle, "/endless": endless_error, "/nothttp": not_http}
    hooks.routes.update({**hostile, "/hangup": hang_up})
    overrides = {
        "outbound_timeout_seconds": 1.0,
        "a2a_push_disable_after_failures": 2,
        "a2a_push_backoff_base_seconds": 0.1,
    }
    async with run_instance(database_url, **overrides) as b:
        _, agent_id, key = await agent_with_key(b)
        path = f"/agents/{agent_id}/a2a"
        base = f"http://127.0.0.1:{hooks.port}"
        task_ids = []
        for route in (*hostile, "/hangup", "/hook"):
            params = {
                **text_message(route),
                "configuration": {"taskPushNotificationConfig": {"url": base + route}},
            }
            answer = await rpc(b, path, key, call("SendMessage", params))
            task_ids.append(answer["result"]["task"]["id"])
        (done,) = await requests_to(hooks, "/hook", 1)
        assert json.loads(done.body)["task"]["id"] == task_ids[-1]
        reasons = {}
        for task_id in task_ids[:-1]:
            (config,) = (await wait_for_disabled(b, path, key, task_id)).values()
            assert config["confer"]["active"] is False, config
            reasons[config["url"].removeprefix(base)] = config["confer"]["lastError"]
        assert reasons["/trickle"].startswith("no complete answer within 1 s")
        assert reasons["/endless"].startswith("HTTP 500")
        assert set(reasons) == {*hostile, "/hangup"}
        supervisor = b.state.supervisor
        assert supervisor is not None and supervisor.states()["a2a-push"] == "running"
    assert not [r for r in caplog.records if "'a2a-push'" in r.getMessage()]
    assert not [r for r in caplog.records if "failed unexpectedly" in r.getMessage()]
