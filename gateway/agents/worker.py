"""The agent task worker: claims queued tasks and runs them, one per conversation at a time.

Tasks live in ``agent_tasks`` (durable in PostgreSQL, the ledger). The worker learns about them
from the task queue (:mod:`gateway.agents.queue`, the data model's ``agent.{agent_id}.tasks``):
a PostgreSQL notification makes it claim the oldest claimable task, a NATS dispatch makes it
claim that task. It also sweeps the ledger every ``queue.sweep_seconds`` and after each task,
so a missed dispatch only delays a task. A claimed task is leased (``lease_seconds``, renewed
every third of it while it runs): when a process dies, its tasks' leases run out and any
worker — at its next sweep, or at start — queues them again, or fails them when out of attempts
or superseded; never lost. Caps bound the tasks running at once across every process, per
agent owner (``CONFER_AGENT_MAX_RUNNING_PER_OWNER``) and per peer whose message started them
(``CONFER_AGENT_MAX_RUNNING_PER_PEER``): a task beyond a cap stays queued and is claimed when
one of those finishes (the finishing worker sweeps at once; others at their next sweep). A live
worker's tasks are never taken from it, and its final write checks the lease, so an answer is
stored once. Several processes may run workers: claims use ``FOR UPDATE SKIP LOCKED`` and the
partial unique index on running tasks keeps one running task per conversation.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from gateway.agents.queue import Delivery, TaskQueue
from gateway.agents.runtime import AgentRuntime, LeaseLostError
from gateway.clock import Clock
from gateway.db import Transaction
from gateway.metrics import AGENT_TASKS
from gateway.store import agent_tasks as tasks_store
from gateway.store import users as users_store
from gateway.workers.supervisor import supervise
from models import Agent

log = logging.getLogger(__name__)


Admit = Callable[[list[Agent]], Awaitable[list[Agent]]]
"""Given the agents a message addresses, those that may answer it (the others are held for
their owner's consent or refused: :mod:`gateway.services.local_consent`)."""


async def enqueue_for_message(
    tx: Transaction,
    queue: TaskQueue,
    *,
    conversation_id: str,
    message_id: str,
    sender_user_id: str,
    text: str | None = None,
    in_reply_to: str | None = None,
    conversation_type: str | None = None,
    admit: Admit | None = None,
    group_agents: bool = True,
) -> list[str]:
    """Queue a task for every local agent a user's message reaches; returns the task ids.

    - ``direct_user_agent``: the sender's own agent, always.
    - ``group``: each agent of the group the message addresses — mentioned as ``@<name>``
      (case-insensitive, whole name), ``@<agent id>`` or by its DID, or answered (the message
      replies to one of its messages) — when the sender is its owner or the agent is public
      (``is_public``); another user's private agent never answers for them.

    ``admit`` narrows the addressed agents (another user's agent answers only when its policy
    lets it). Only people's messages start tasks, never agents' answers, so agents cannot
    loop. Call in the unit of work that stores the message: each task is announced on
    ``queue`` there. A caller that knows the ``conversation_type`` passes it: only
    ``direct_user_agent`` and ``group`` start tasks, so the others need no look-up; one
    that knows a group has no local agent among its participants passes ``group_agents``
    False for the same reason.
    """
    conn = tx.conn
    addressed = await addressed_agents(
        conn,
        conversation_id=conversation_id,
        sender_user_id=sender_user_id,
        text=text,
        in_reply_to=in_reply_to,
        conversation_type=conversation_type,
        group_agents=group_agents,
    )
    if admit is not None and addressed:
        addressed = await admit(addressed)
    return [
        await enqueue_agent(
            tx, queue, agent_id=a.id, conversation_id=conversation_id, message_id=message_id
        )
        for a in addressed
    ]


async def addressed_agents(
    conn: asyncpg.Connection,
    *,
    conversation_id: str,
    sender_user_id: str,
    text: str | None,
    in_reply_to: str | None,
    conversation_type: str | None = None,
    group_agents: bool = True,
) -> list[Agent]:
    """The local agents a user's message reaches (the rules of :func:`enqueue_for_message`;
    ``conversation_type``, when known, and ``group_agents`` False, for a group known to have
    no local agent, spare the look-ups that cannot match)."""
    if conversation_type not in (None, "direct_user_agent", "group"):
        return []
    if conversation_type == "group" and not group_agents:
        return []
    if conversation_type in (None, "direct_user_agent"):
        own = await tasks_store.get_addressed_agent(
            conn, conversation_id=conversation_id, sender_user_id=sender_user_id
        )
        if own is not None:
            agent = await users_store.get_agent(conn, id=own)
            return [agent] if agent is not None else []
        if conversation_type == "direct_user_agent":
            return []
    replied_to = (
        await tasks_store.get_agent_sender(conn, message_id=in_reply_to) if in_reply_to else None
    )
    return [
        agent
        for agent in await tasks_store.list_group_agents(conn, conversation_id=conversation_id)
        if (agent.user_id == sender_user_id or agent.is_public)
        and (agent.id == replied_to or mentions(text or "", agent))
    ]


async def enqueue_agent(
    tx: Transaction, queue: TaskQueue, *, agent_id: str, conversation_id: str, message_id: str
) -> str:
    """Queue (or re-point) ``agent_id``'s task answering ``message_id`` and announce it on
    ``queue`` in ``tx``; returns the task id."""
    task_id = await tasks_store.enqueue(
        tx.conn, agent_id=agent_id, conversation_id=conversation_id, trigger_message_id=message_id
    )
    await queue.announce(tx, tasks_store.Dispatch(agent_id, task_id, conversation_id))
    return task_id


def mentions(text: str, agent: Agent) -> bool:
    """True when ``text`` addresses ``agent``: ``@<name>`` or ``@<id>`` as a whole word
    (not followed by a letter, digit or ``_``; case-insensitive), or the agent's DID."""
    if agent.did in text:
        return True
    names = [re.escape(agent.id)] + ([re.escape(agent.name)] if agent.name else [])
    pattern = r"(?<![\w@])@(?:" + "|".join(names) + r")(?!\w)"
    return re.search(pattern, text, re.IGNORECASE) is not None


class AgentWorker:
    """Runs tasks concurrently (``concurrency`` conversations at once) until cancelled.

    ``queue`` must be started; the caller closes it. ``poll_seconds`` overrides the queue's
    sweep interval.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        runtime: AgentRuntime,
        clock: Clock,
        *,
        max_attempts: int,
        queue: TaskQueue,
        poll_seconds: float | None = None,
        concurrency: int = 4,
        take_seconds: float = 5.0,
        lease_seconds: float = 60.0,
        max_per_owner: int = 1_000_000,
        max_per_peer: int = 1_000_000,
    ) -> None:
        self._pool = pool
        self._caps = {"max_per_owner": max_per_owner, "max_per_peer": max_per_peer}
        self._runtime = runtime
        self._clock = clock
        self._max_attempts = max_attempts
        self._queue = queue
        self._poll_seconds = poll_seconds if poll_seconds is not None else queue.sweep_seconds
        self._take_seconds = take_seconds
        self._slots = asyncio.Semaphore(concurrency)
        self._wake = asyncio.Event()
        self._running: dict[str, asyncio.Task[None]] = {}
        self._lease_seconds = lease_seconds

    def wake(self, *_: Any) -> None:
        """Look for work in the ledger now."""
        self._wake.set()

    async def run(self) -> None:
        """Recover, then claim and run tasks forever, renewing their leases. Cancel to stop."""
        await self._recover()
        # Each inner loop is supervised on its own: a failure restarts that loop (logged with
        # its name) without stopping the others or the tasks running here.
        sweeping = asyncio.create_task(
            supervise("agents.sweep", self._sweep), name="agent-task-sweep"
        )
        renewing = asyncio.create_task(
            supervise("agents.leases", self._renew), name="agent-task-leases"
        )
        try:
            await supervise("agents.receive", self._receive)
        finally:
            sweeping.cancel()
            renewing.cancel()
            running = list(self._running.values())
            for task in running:
                task.cancel()
            await asyncio.gather(sweeping, renewing, *running, return_exceptions=True)

    async def _recover(self) -> None:
        """Queue again (or fail) tasks whose worker died: their lease ran out."""
        async with self._pool.acquire() as conn:
            recovered = await tasks_store.recover(
                conn, max_attempts=self._max_attempts, now=self._clock.now()
            )
        if recovered:
            log.info("recovered %d interrupted agent tasks", recovered)
            self.wake()

    async def _renew(self) -> None:
        """Every third of the lease: recover abandoned tasks, and extend the leases of the tasks
        running here; a task that is no longer ours (its lease ran out and it was queued again)
        is stopped."""
        while True:
            await asyncio.sleep(self._lease_seconds / 3)
            try:
                await self._recover()  # other processes' tasks whose leases ran out
            except Exception:
                log.exception("recovering abandoned agent tasks failed")
            if not self._running:
                continue
            try:
                async with self._pool.acquire() as conn:
                    renewed = await tasks_store.renew_leases(
                        conn,
                        ids=list(self._running),
                        now=self._clock.now(),
                        lease_seconds=self._lease_seconds,
                    )
            except Exception:  # the database restarting: the lease still has two thirds left
                log.exception("renewing agent task leases failed")
                continue
            for task_id, running in list(self._running.items()):
                if task_id not in renewed:
                    log.warning("agent task %s lost its lease; stopping it here", task_id)
                    running.cancel()

    async def _sweep(self) -> None:
        """Claim queued tasks while slots are free; then wait for a wake or the sweep period."""
        while True:
            self._wake.clear()
            try:
                await self._claim_queued()
            except Exception:  # e.g. the database restarting: try again next period
                log.exception("agent task sweep failed")
            try:
                await asyncio.wait_for(self._wake.wait(), self._poll_seconds)
            except TimeoutError:
                pass

    async def _claim_queued(self) -> None:
        while True:
            await self._slots.acquire()
            try:
                task = await self._claim(None)
            except BaseException:
                self._slots.release()
                raise
            if task is None:
                self._slots.release()
                return
            self._start(task)

    async def _receive(self) -> None:
        """Take dispatches from the queue, only while a slot is free (so a busy process leaves
        them to the others)."""
        while True:
            await self._slots.acquire()  # wait for capacity without keeping it
            self._slots.release()
            delivery = await self._queue.take(self._take_seconds)
            if delivery is None:
                continue
            try:
                await self._dispatched(delivery)
            except Exception:
                log.exception("agent task dispatch %s failed", delivery.task_id)

    async def _dispatched(self, delivery: Delivery) -> None:
        if delivery.task_id is None:
            self.wake()
            await delivery.ack()
            return
        if self._slots.locked():  # the sweep took the last slot meanwhile
            await delivery.nak()
            return
        await self._slots.acquire()
        try:
            task = await self._claim(delivery.task_id)
        except BaseException:
            self._slots.release()
            raise
        if task is None:  # running or done already, or its conversation is busy: stays queued
            self._slots.release()
        else:
            self._start(task)
        await delivery.ack()

    async def _claim(self, task_id: str | None) -> dict[str, Any] | None:
        """Claim ``task_id`` (or the oldest claimable task) under the caps per owner and peer."""
        async with self._pool.acquire() as conn, conn.transaction():
            return await tasks_store.claim(
                conn,
                now=self._clock.now(),
                task_id=task_id,
                lease_seconds=self._lease_seconds,
                **self._caps,
            )

    def _start(self, task: dict[str, Any]) -> None:
        """Run a claimed task in the background; its slot is already taken."""
        task_id = task["id"]
        running = asyncio.create_task(self._run_one(task), name=f"agent-task-{task_id}")
        self._running[task_id] = running
        running.add_done_callback(lambda _: self._running.pop(task_id, None))

    async def _run_one(self, task: dict[str, Any]) -> None:
        try:
            await self._runtime.run_task(task)
            AGENT_TASKS.labels("completed").inc()
        except asyncio.CancelledError:
            raise  # the task stays "running" until its lease runs out, then it is retried
        except LeaseLostError as exc:
            AGENT_TASKS.labels("lease_lost").inc()
            log.warning("%s", exc)
        except Exception as exc:
            AGENT_TASKS.labels("crashed").inc()
            log.exception("agent task %s crashed", task["id"])
            await self._record_crash(task["id"], exc)
        finally:
            self._slots.release()
            self.wake()

    async def _record_crash(self, task_id: str, exc: Exception) -> None:
        """Mark a crashed task failed; if even that fails (the database is away), its lease
        runs out and recovery retries or fails it, so the error is only logged."""
        try:
            async with self._pool.acquire() as conn:
                await tasks_store.finish(
                    conn, id=task_id, status="failed", now=self._clock.now(), error=str(exc)
                )
        except Exception:
            log.exception("recording the crash of agent task %s failed", task_id)
