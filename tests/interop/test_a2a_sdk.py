"""Interoperability: the real a2a-sdk client (its own venv) against a running Confer.

The client lives in ``.interop-venv`` (``scripts/interop-venv.sh`` creates it): a2a-sdk installs
a top-level ``a2a`` package that would shadow Confer's, so it never enters Confer's venv. The
client runs as a subprocess with ``python -I`` from a temporary directory for the same reason.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.harness import Instance, next_event, run_instance

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = Path(os.environ.get("CONFER_INTEROP_VENV", ROOT / ".interop-venv")) / "bin/python"
CLIENT = Path(__file__).with_name("a2a_sdk_client.py")

pytestmark = pytest.mark.skipif(
    not VENV_PYTHON.exists(),
    reason=f"no a2a-sdk venv at {VENV_PYTHON.parent.parent}: run scripts/interop-venv.sh",
)


async def run_client(base_url: str, key: str, tmp_path: Path, *flags: str) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        str(VENV_PYTHON),
        "-I",
        str(CLIENT),
        base_url,
        key,
        *flags,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, stderr.decode()[-3000:]
    return dict(json.loads(stdout))


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
