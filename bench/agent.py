"""The own-agent path: user message → agent task → streamed, stored answer, and context assembly.

Run: ``python bench/agent.py`` (PostgreSQL as ``bench/databases.py`` picks
it; a scratch database is created and dropped). One Confer instance runs in this process
on loopback, beside a loopback LLM provider speaking the OpenAI-compatible streaming wire
format that answers at once (so the figures are Confer's own overhead, not a model's):

1. Offline provider: sequential POST → the agent's ``message.created`` on the user's
   WebSocket (p50/p99), and answers per second with several users talking at once.
2. OpenAI-compatible provider over HTTP: time to the first ``message.delta`` and to the
   stored answer (p50/p99).
3. Context assembly: ``GET …/agent-context`` with 300 memories, 100 knowledge entries and
   400 messages of history (p50/p99).
4. With ``--nats`` (the local NATS with JetStream): the offline round trip and answers per
   second again, tasks dispatched through the JetStream work queue instead of PostgreSQL
   NOTIFY.

Clients and server share one process and one event loop: compare the figures with each
other and across commits, not with a dedicated deployment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from fanout import percentile, scratch_database  # noqa: E402  (bench/ is on the path)

from tests.agents.helpers import talk_to_agent  # noqa: E402
from tests.agents.llmserver import FakeLLM  # noqa: E402  (a real loopback provider)
from tests.gateway.harness import (  # noqa: E402
    Instance,
    User,
    free_port,
    nats_task_queue,
    run_instance,
    serve,
)


def report(label: str, values: list[float]) -> None:
    print(
        f"{label:<46} p50 {percentile(values, 0.5) * 1000:7.1f} ms   "
        f"p99 {percentile(values, 0.99) * 1000:7.1f} ms   (n={len(values)})"
    )


async def answer_of(ws: Any, conversation_id: str) -> tuple[float | None, float]:
    """Wait for the agent's stored answer; (first delta time, answer time), monotonic."""
    first_delta = None
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
        data = frame.get("data") or {}
        if frame.get("type") == "message.delta" and first_delta is None:
            first_delta = time.perf_counter()
        if (
            frame.get("type") == "message.created"
            and data.get("conversation_id") == conversation_id
            and data.get("sender_type") in ("own_agent", "system")
        ):
            assert data["sender_type"] == "own_agent", data["content"]
            return first_delta, time.perf_counter()


async def round_trips(user: User, rounds: int) -> tuple[list[float], list[float]]:
    """Sequential messages to the user's agent: (to first delta, to stored answer)."""
    conversation_id = await talk_to_agent(user)
    firsts: list[float] = []
    answers: list[float] = []
    async with user.websocket() as ws:
        for i in range(rounds):
            started = time.perf_counter()
            await user.send(conversation_id, f"question number {i}: what is on my list?")
            first, done = await answer_of(ws, conversation_id)
            if first is not None:
                firsts.append(first - started)
            answers.append(done - started)
    return firsts, answers


async def offline_path(instance: Instance, rounds: int, users: int, label: str = "") -> None:
    alice = await instance.register("alice")
    await alice.request(
        "POST",
        f"/v1/agents/{alice.profile['agent_did'].rsplit(':', 1)[1]}/memories",
        json={"type": "fact", "content": "My list: ship the agent benchmark, then rest."},
    )
    _, answers = await round_trips(alice, rounds)
    report(f"offline provider{label}: POST → stored answer on WS", answers)

    people = [await instance.register(f"user{i}") for i in range(users)]
    per_user = max(1, rounds // 4)
    started = time.perf_counter()
    await asyncio.gather(*(round_trips(p, per_user) for p in people))
    elapsed = time.perf_counter() - started
    print(
        f"offline provider{label}, {users} users at once: "
        f"{users * per_user / elapsed:.1f} answers/s ({users * per_user} answers)"
    )


async def openai_path(database_url: str, rounds: int) -> None:
    fake = FakeLLM(reply_prefix="noted: ")
    port = free_port()
    async with serve(fake.app(), port):
        providers = {"loop": {"base_url": f"http://127.0.0.1:{port}/v1", "wire": "openai"}}
        async with run_instance(
            database_url, llm_providers=providers, rate_limit_register_ip="1000/hour"
        ) as instance:
            bob = await instance.register("bob")
            agent_id = bob.profile["agent_did"].rsplit(":", 1)[1]
            async with instance.state.pool.acquire() as conn:
                await conn.execute(
                    """UPDATE agents SET model_config_json = jsonb_set(model_config_json,
                       '{brain}', '{"provider": "loop", "model": "loop-chat"}') WHERE id = $1""",
                    agent_id,
                )
            firsts, answers = await round_trips(bob, rounds)
    report("OpenAI-compatible loopback: POST → first delta", firsts)
    report("OpenAI-compatible loopback: POST → stored answer", answers)


async def assembly(instance: Instance, rounds: int) -> None:
    carol = await instance.register("carol")
    agent_id = carol.profile["agent_did"].rsplit(":", 1)[1]
    conversation_id = await talk_to_agent(carol)
    async with instance.state.pool.acquire() as conn:
        await conn.executemany(
            """INSERT INTO agent_memories (id, agent_id, type, content, importance)
               VALUES ($1, $2, 'fact', $3, $4)""",
            [
                (new_ulid(), agent_id, f"fact {i}: service on port {8000 + i} is ok", 1 + i % 10)
                for i in range(300)
            ],
        )
        await conn.executemany(
            """INSERT INTO knowledge (id, user_id, category, title, content, content_hash)
               VALUES ($1, $2, 'runbook', $3, $4, $5)""",
            [
                (new_ulid(), carol.profile["id"], f"runbook {i}", f"step {i}: restart", f"h{i}")
                for i in range(100)
            ],
        )
        await conn.executemany(
            """INSERT INTO messages (id, conversation_id, sender_type, sender_id, content)
               VALUES ($1, $2, 'user', $3, $4)""",
            [
                (new_ulid(), conversation_id, carol.profile["id"], f"message {i} " + "word " * 20)
                for i in range(400)
            ],
        )
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        response = await carol.request("GET", f"/v1/conversations/{conversation_id}/agent-context")
        timings.append(time.perf_counter() - started)
        assert response.status_code == 200, response.text
    body = response.json()
    print(
        "context: "
        + ", ".join(f"{p['name']} {p['tokens']}" for p in body["parts"])
        + f" — total {body['total_tokens']} of {body['budget_tokens']} tokens"
    )
    report("context assembly (300 memories, 100 knowledge, 400 msgs)", timings)


def new_ulid() -> str:
    from gateway.ids import new_id

    return new_id()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--nats", action="store_true", help="also through the NATS task queue")
    args = parser.parse_args()
    logging.disable(logging.INFO)  # request logs would drown the figures
    async with scratch_database() as url:
        async with run_instance(url, rate_limit_register_ip="1000/hour") as instance:
            await offline_path(instance, args.rounds, args.users)
            await assembly(instance, max(10, args.rounds // 2))
    async with scratch_database() as url:
        await openai_path(url, args.rounds)
    if args.nats:
        async with nats_task_queue() as queue, scratch_database() as url:
            async with run_instance(url, rate_limit_register_ip="1000/hour", **queue) as instance:
                await offline_path(instance, args.rounds, args.users, " (NATS queue)")
    print(f"(one process on {os.cpu_count()} cores; percentiles by rank)")


if __name__ == "__main__":
    asyncio.run(main())
