"""Interoperability: the real a2a-sdk client (its own venv) against a running Confer.

The client lives in ``.interop-venv`` (``scripts/interop-venv.sh`` creates it): a2a-sdk installs
a top-level ``a2a`` package that would shadow Confer's, so it never enters Confer's venv. The
client runs as a subprocess with ``python -I`` from a temporary directory for the same reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.did.httpserver import LoopbackServer, respond
from tests.gateway.harness import Instance, next_event, run_instance

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = Path(os.environ.get("CONFER_INTEROP_VENV", ROOT / ".interop-venv")) / "bin/python"
CLIENT = Path(__file__).with_name("a2a_sdk_client.py")

pytestmark = pytest.mark.skipif(
    not VENV_PYTHON.exists(),
    reason=f"no a2a-sdk venv at {VENV_PYTHON.parent.parent}: run scripts/interop-venv.sh",
)


async def run_sdk(tmp_path: Path, *args: str, stdin: bytes | None = None) -> Any:
    """Run the client script in the a2a-sdk venv; its printed JSON."""
    process = await asyncio.create_subprocess_exec(
        str(VENV_PYTHON),
        "-I",
        str(CLIENT),
        *args,
        cwd=tmp_path,
        stdin=asyncio.subprocess.PIPE if stdin is not None else None,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(stdin), 60)
    assert process.returncode == 0, stderr.decode()[-3000:]
    return json.loads(stdout)


async def run_client(base_url: str, key: str, tmp_path: Path, *flags: str) -> dict[str, Any]:
    return dict(await run_sdk(tmp_path, base_url, key, *flags))


async def public_agent_with_key(b: Instance) -> tuple[Any, str, str]:
    bob = await b.register("bob")
    agent_id = bob.profile["agent_did"].rsplit(":", 1)[1]
    async with b.state.pool.acquire() as conn:
        await conn.execute("UPDATE agents SET is_public = true WHERE id = $1", agent_id)
    response = await bob.request("POST", "/v1/api-keys", json={"name": "a2a-sdk"})
    return bob, agent_id, response.json()["key"]


@pytest.mark.parametrize("flags", [(), ("--stream",)], ids=["send", "stream"])
async def test_a2a_sdk_client_fetches_card_sends_and_reads_the_task(
    database_url: str, tmp_path: Path, flags: tuple[str, ...]
) -> None:
    async with run_instance(database_url) as b:
        bob, agent_id, key = await public_agent_with_key(b)
        async with bob.websocket() as ws:
            out = await run_client(f"{b.base_url}/agents/{agent_id}", key, tmp_path, *flags)
            event = await next_event(ws, "message.created")
        assert out["card"]["supportedInterfaces"][0]["url"] == f"{b.base_url}/agents/{agent_id}/a2a"
        assert out["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert out["task"]["history"][0]["parts"] == [{"text": "hello from a2a-sdk"}]
        assert event["data"]["content"] == "hello from a2a-sdk"
        async with b.state.pool.acquire() as conn:
            row = await conn.fetchrow("SELECT id, caller, state FROM a2a_tasks")
            answer = await conn.fetchval(
                "SELECT content FROM messages WHERE sender_type = 'own_agent' AND in_reply_to = "
                "(SELECT id FROM messages WHERE content = 'hello from a2a-sdk')"
            )
        assert row["id"] == out["task"]["id"]
        assert row["caller"].startswith("key:")
        # The task's result is the agent's answer, not a delivery notice.
        assert answer and out["task"]["status"]["message"]["parts"][0]["text"] == answer


async def test_a2a_sdk_client_gets_push_notifications(database_url: str, tmp_path: Path) -> None:
    """The SDK client, with alice's API key, asks bob's public agent (his consent: the task
    waits in ``TASK_STATE_AUTH_REQUIRED``) with a push config in ``SendMessage`` and creates a
    second one by ``CreateTaskPushNotificationConfig``; a loopback webhook receives each
    notification with the config's token or Bearer credentials, each body parses strictly as
    the SDK's own ``StreamResponse``, and bob's approval reaches both as the final state."""
    async with LoopbackServer() as hooks, run_instance(database_url) as b:
        hooks.routes["/hook"] = respond(200, b"", "text/plain")
        hooks.routes["/hook/second"] = respond(200, b"", "text/plain")
        bob, agent_id, _ = await public_agent_with_key(b)
        alice = await b.register("alice")
        key = (await alice.request("POST", "/v1/api-keys", json={"name": "sdk"})).json()["key"]
        webhook = f"http://127.0.0.1:{hooks.port}/hook"
        out = await run_client(f"{b.base_url}/agents/{agent_id}", key, tmp_path, "--push", webhook)
        assert out["card"]["capabilities"]["pushNotifications"] is True
        task = out["task"]
        assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"  # bob decides
        push = out["push"]
        assert push["created"]["taskId"] == task["id"]
        assert push["created"]["authentication"] == {
            "scheme": "Bearer",
            "credentials": "sdk-credentials-2",
        }
        assert push["got"] == push["created"]
        listed = {c["url"]: c for c in push["listed"]["configs"]}
        assert set(listed) == {webhook, webhook + "/second"}
        assert listed[webhook]["token"] == "sdk-token-1"

        (pending,) = (await bob.request("GET", "/v1/permissions")).json()
        decided = await bob.request(
            "POST", f"/v1/permissions/{pending['id']}/decision", json={"decision": "allow_once"}
        )
        assert decided.status_code == 200, decided.text
        deadline = time.monotonic() + 30
        while len([r for r in hooks.requests if r.path == "/hook"]) < 2 or not any(
            r.path == "/hook/second" for r in hooks.requests
        ):
            assert time.monotonic() < deadline, f"notifications missing: {hooks.requests}"
            await asyncio.sleep(0.05)
    first, final = [r for r in hooks.requests if r.path == "/hook"]
    (second,) = [r for r in hooks.requests if r.path == "/hook/second"]
    for request in (first, final):
        assert request.headers["x-a2a-notification-token"] == "sdk-token-1"
        assert request.headers["content-type"] == "application/a2a+json"
    assert second.headers["authorization"] == "Bearer sdk-credentials-2"
    bodies = [r.body.decode() for r in (first, final, second)]
    parsed = await run_sdk(tmp_path, "--parse", stdin=json.dumps(bodies).encode())
    assert [p["payload"] for p in parsed] == ["task", "status_update", "status_update"]
    assert parsed[0]["task"]["id"] == task["id"]
    assert parsed[0]["task"]["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    for update in parsed[1:]:
        assert update["statusUpdate"]["taskId"] == task["id"]
        assert update["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
