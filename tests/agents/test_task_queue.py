"""The agent task queue over NATS JetStream (``agent.{agent_id}.tasks``) with PostgreSQL as the
ledger: dispatches go through a work-queue stream and one durable consumer shared by every
worker, each task runs exactly once and one at a time per conversation, a lost dispatch is swept
up, and an interrupted task is retried after a restart."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import nats
import pytest
from nats.js.api import RetentionPolicy

from gateway.agents.nats_queue import NatsTaskQueue
from gateway.agents.worker import AgentWorker
from gateway.clock import Clock
from gateway.db import create_pool, transaction
from gateway.ids import new_id
from gateway.store import agent_tasks as tasks_store
from gateway.store import messages as messages_store
from gateway.store.agent_tasks import Dispatch
from tests.agents.conftest import LLMServer
from tests.agents.helpers import agent_id, set_model, talk_to_agent, wait_for_reply
from tests.gateway.harness import NATS_URL, User, nats_task_queue, reachable, run_instance

pytestmark = pytest.mark.skipif(
    not reachable(NATS_URL), reason="needs the local NATS with JetStream (4222); .ci/run starts it"
)

LEASE = {"agent_task_lease_seconds": 2.0}  # a crashed process's task is retried quickly


async def jetstream_state(settings: dict[str, Any]) -> tuple[Any, Any]:
    """``(StreamInfo, ConsumerInfo)`` of the queue named in ``settings``."""
    nc = await nats.connect(NATS_URL)
    try:
        js = nc.jetstream()
        stream = await js.stream_info(settings["agent_queue_stream"])
        consumer = await js.consumer_info(
            settings["agent_queue_stream"], settings["agent_queue_consumer"]
        )
        return stream, consumer
    finally:
        await nc.close()


def queue_for(settings: dict[str, Any], *, sweep_seconds: float = 600.0) -> NatsTaskQueue:
    """A queue like the app builds from ``settings`` (sweep: 10 min unless told)."""
    return NatsTaskQueue(
        settings["nats_url"],
        stream=settings["agent_queue_stream"],
        consumer=settings["agent_queue_consumer"],
        subject_prefix=settings["agent_queue_subject_prefix"],
        sweep_seconds=sweep_seconds,
    )


async def test_a_message_to_the_agent_is_dispatched_through_jetstream(database_url: str) -> None:
    # The sweep is ten minutes: a reply within seconds came through the dispatch.
    async with (
        nats_task_queue(agent_queue_sweep_seconds=600) as queue_settings,
        run_instance(database_url, **queue_settings) as a,
        run_instance(database_url, **queue_settings),  # a second process, same database
    ):
        notified: list[str] = []
        listener = await asyncpg.connect(database_url)
        await listener.add_listener(tasks_store.CHANNEL, lambda *args: notified.append(args[-1]))
        try:
            alice = await a.register("alice")
            conversation_id = await talk_to_agent(alice)
            sent = await alice.send(conversation_id, "Is the queue on NATS?")
            [reply] = await wait_for_reply(alice, conversation_id)
            await asyncio.sleep(0.2)  # a second run would have started by now
            page = await alice.request("GET", f"/v1/conversations/{conversation_id}/messages")
        finally:
            await listener.close()
        stream, consumer = await jetstream_state(queue_settings)

    assert reply["in_reply_to"] == sent["id"]
    assert [m["sender_type"] for m in page.json()["items"]] == ["own_agent", "user"]
    assert notified == []  # no NOTIFY: the dispatch went through JetStream
    prefix = queue_settings["agent_queue_subject_prefix"]
    assert stream.config.subjects == [f"{prefix}agent.*.tasks"]
    assert stream.config.retention == RetentionPolicy.WORK_QUEUE
    assert stream.config.max_age == 3600
    assert stream.state.last_seq == 1 and stream.state.messages == 0  # published, consumed
    assert consumer.delivered.stream_seq == 1 and consumer.ack_floor.stream_seq == 1
    assert consumer.num_pending == 0 and consumer.num_ack_pending == 0
    conn = await asyncpg.connect(database_url)
    try:
        task = await conn.fetchrow("SELECT id, status, attempts FROM agent_tasks")
    finally:
        await conn.close()
    assert task["id"] == reply["content_json"]["task_id"]
    assert task["status"] == "done" and task["attempts"] == 1


@dataclass
class Run:
    worker: str
    task_id: str
    conversation_id: str
    started: float
    ended: float = 0.0


@dataclass
class RecordingRuntime:
    """Stands in for the agent runtime: records each run, takes a moment, finishes the task."""

    name: str
    pool: asyncpg.Pool
    runs: list[Run]
    seconds: float = 0.1
    clock: Clock = field(default_factory=Clock)

    async def run_task(self, task: dict[str, Any]) -> None:
        run = Run(self.name, task["id"], task["conversation_id"], time.monotonic())
        self.runs.append(run)
        await asyncio.sleep(self.seconds)
        run.ended = time.monotonic()
        async with self.pool.acquire() as conn:
            await tasks_store.finish(conn, id=task["id"], status="done", now=self.clock.now())


async def enqueue(
    pool: asyncpg.Pool, queue: NatsTaskQueue | None, user: User, conversation_id: str
) -> str:
    """Store a message from ``user`` and queue the agent's task in one transaction; dispatch it
    through ``queue`` after commit (None: the dispatch is lost, as in a crash after commit)."""

    async with transaction(pool) as tx:
        conn = tx.conn
        message = await messages_store.insert_message(
            conn,
            id=new_id(),
            conversation_id=conversation_id,
            sender_type="user",
            sender_id=user.profile["id"],
            sender_did=user.did,
            content="hello",
        )
        task_id = await tasks_store.enqueue(
            conn,
            agent_id=agent_id(user),
            conversation_id=conversation_id,
            trigger_message_id=message.id,
        )
        if queue is not None:  # without a queue nothing is announced, never published
            await queue.announce(tx, Dispatch(agent_id(user), task_id, conversation_id))
    return task_id


@pytest.fixture
async def owners(database_url: str) -> list[tuple[User, str]]:
    """Ten users, each with a direct conversation with their own agent (no tasks yet)."""
    async with run_instance(database_url) as instance:
        users = [await instance.register(f"user{i}") for i in range(10)]
        return [(user, await talk_to_agent(user)) for user in users]


@contextlib.asynccontextmanager
async def workers(
    database_url: str, settings: dict[str, Any], runs: list[Run], *names: str, sweep: float
) -> AsyncIterator[tuple[asyncpg.Pool, list[NatsTaskQueue]]]:
    """One AgentWorker per name, each with its own pool and queue connection (a process)."""
    pools, queues, tasks = [], [], []
    try:
        for name in names:
            pool = await create_pool(database_url, min_size=1, max_size=4)
            queue = queue_for(settings, sweep_seconds=sweep)
            pools.append(pool)
            await queue.start()
            queues.append(queue)
            runtime: Any = RecordingRuntime(name, pool, runs)
            worker = AgentWorker(
                pool, runtime, Clock(), max_attempts=3, queue=queue, concurrency=2, take_seconds=1
            )
            tasks.append(asyncio.create_task(worker.run()))
        yield pools[0], queues
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for queue in queues:
            await queue.close()
        for pool in pools:
            await pool.close()


async def task_rows(pool: asyncpg.Pool) -> list[dict[str, Any]]:
    return [dict(r) for r in await pool.fetch("SELECT * FROM agent_tasks ORDER BY id")]


async def test_two_workers_share_the_consumer_and_run_each_task_once(
    database_url: str, owners: list[tuple[User, str]]
) -> None:
    runs: list[Run] = []
    async with (
        nats_task_queue() as settings,
        workers(database_url, settings, runs, "a", "b", sweep=600) as (pool, queues),
    ):
        first = {conv: await enqueue(pool, queues[0], user, conv) for user, conv in owners}
        second: dict[str, str] = {}
        # Each conversation's second task is queued once its first has been claimed, so its
        # dispatch often arrives while the first still runs: it waits for the general claim.
        async with asyncio.timeout(20):
            while len(second) < len(owners) or any(
                r["status"] != "done" for r in await task_rows(pool)
            ):
                statuses = {r["id"]: r["status"] for r in await task_rows(pool)}
                for i, (user, conv) in enumerate(owners):
                    if conv not in second and statuses[first[conv]] != "queued":
                        second[conv] = await enqueue(pool, queues[i % 2], user, conv)
                await asyncio.sleep(0.02)
        # Dispatches of tasks the general claim ran first are still consumed (and dropped).
        for _ in range(200):
            stream, consumer = await jetstream_state(settings)
            if stream.state.messages == 0 and consumer.num_ack_pending == 0:
                break
            await asyncio.sleep(0.05)
        rows = await task_rows(pool)

    assert len(rows) == 20 and {r["status"] for r in rows} == {"done"}
    assert {r["attempts"] for r in rows} == {1}
    assert sorted(run.task_id for run in runs) == sorted(r["id"] for r in rows)  # once each
    assert {run.worker for run in runs} == {"a", "b"}  # the consumer is shared
    for _, conv in owners:
        mine = sorted((run for run in runs if run.conversation_id == conv), key=lambda r: r.started)
        assert [run.task_id for run in mine] == [first[conv], second[conv]]
        assert mine[0].ended <= mine[1].started  # one at a time per conversation
    assert stream.state.last_seq == 20 and stream.state.messages == 0
    assert consumer.num_ack_pending == 0 and consumer.num_pending == 0


async def test_a_lost_dispatch_is_picked_up_by_the_sweep(
    database_url: str, owners: list[tuple[User, str]]
) -> None:
    runs: list[Run] = []
    user, conv = owners[0]
    async with nats_task_queue() as settings:
        async with workers(database_url, settings, runs, "slow", sweep=600) as (pool, _):
            await asyncio.sleep(0.2)  # started and idle
            lost = await enqueue(pool, None, user, conv)
            await asyncio.sleep(1.0)
            assert [r["status"] for r in await task_rows(pool)] == ["queued"]  # nobody told
        async with workers(database_url, settings, runs, "sweeping", sweep=0.3) as (pool, _):
            await asyncio.sleep(0.2)
            lost_again = await enqueue(pool, None, user, conv)
            for _ in range(200):
                if [r["status"] for r in await task_rows(pool)] == ["done", "done"]:
                    break
                await asyncio.sleep(0.05)
        stream, _ = await jetstream_state(settings)
    assert [run.task_id for run in runs] == [lost, lost_again]
    assert stream.state.last_seq == 0  # neither went through JetStream


async def test_an_interrupted_task_is_retried_after_a_restart_with_nats(
    database_url: str, llm_server: LLMServer
) -> None:
    providers = {"loop": {"base_url": llm_server.base_url, "wire": "openai"}}
    llm_server.fake.hang = True
    async with nats_task_queue() as queue_settings:
        async with run_instance(
            database_url, llm_providers=providers, **queue_settings, **LEASE
        ) as a:
            alice = await a.register("alice")
            await set_model(database_url, alice, "brain", "loop", "m")
            conversation_id = await talk_to_agent(alice)
            await alice.send(conversation_id, "are you there?")
            for _ in range(200):
                if llm_server.fake.requests:
                    break
                await asyncio.sleep(0.05)
            assert llm_server.fake.requests, "the provider was never called"
        llm_server.fake.hang = False
        async with run_instance(
            database_url, llm_providers=providers, **queue_settings, **LEASE
        ) as a:
            login = await a.client.post(
                "/v1/auth/login", json={"username": "alice", "password": "correct horse battery"}
            )
            alice.instance, alice.token = a, login.json()["access_token"]
            [reply] = await wait_for_reply(alice, conversation_id)
        stream, _ = await jetstream_state(queue_settings)
    assert reply["content"] == "echo: are you there?"
    assert stream.state.last_seq == 1  # one dispatch; the retry came from recovery
    conn = await asyncpg.connect(database_url)
    try:
        task = await conn.fetchrow("SELECT status, attempts FROM agent_tasks")
    finally:
        await conn.close()
    assert task["status"] == "done" and task["attempts"] == 2
