"""The agent task worker: claims queued tasks and runs them, one per conversation at a time.

Tasks live in ``agent_tasks`` (the data model's ``agent.{agent_id}.tasks`` queue, durable in
PostgreSQL). The worker wakes on ``NOTIFY confer_agent_tasks`` and also polls, so a missed
notification only delays a task. On start it recovers tasks a previous process left
``running``: they are queued again, or failed when out of attempts or superseded — never lost.
Several processes may run workers: claims use ``FOR UPDATE SKIP LOCKED`` and the partial unique
index on running tasks keeps one running task per conversation.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import asyncpg

from gateway.agents.runtime import AgentRuntime
from gateway.clock import Clock
from gateway.store import agent_tasks as tasks_store
from models import Agent

log = logging.getLogger(__name__)


async def enqueue_for_message(
    conn: asyncpg.Connection,
    *,
    conversation_id: str,
    message_id: str,
    sender_user_id: str,
    text: str | None = None,
    in_reply_to: str | None = None,
) -> list[str]:
    """Queue a task for every local agent a user's message reaches; returns the task ids.

    - ``direct_user_agent``: the sender's own agent, always.
    - ``group``: each agent of the group the message addresses — mentioned as ``@<name>``
      (case-insensitive, whole name), ``@<agent id>`` or by its DID, or answered (the message
      replies to one of its messages) — when the sender is its owner or the agent is public
      (``is_public``); another user's private agent never answers for them.

    Only people's messages start tasks, never agents' answers, so agents cannot loop. Call
    inside the transaction that stores the message.
    """
    own = await tasks_store.get_addressed_agent(
        conn, conversation_id=conversation_id, sender_user_id=sender_user_id
    )
    if own is not None:
        addressed = [own]
    else:
        replied_to = (
            await tasks_store.get_agent_sender(conn, message_id=in_reply_to)
            if in_reply_to
            else None
        )
        addressed = [
            agent.id
            for agent in await tasks_store.list_group_agents(conn, conversation_id=conversation_id)
            if (agent.user_id == sender_user_id or agent.is_public)
            and (agent.id == replied_to or mentions(text or "", agent))
        ]
    return [
        await tasks_store.enqueue(
            conn, agent_id=agent_id, conversation_id=conversation_id, trigger_message_id=message_id
        )
        for agent_id in addressed
    ]


def mentions(text: str, agent: Agent) -> bool:
    """True when ``text`` addresses ``agent``: ``@<name>`` or ``@<id>`` as a whole word
    (not followed by a letter, digit or ``_``; case-insensitive), or the agent's DID."""
    if agent.did in text:
        return True
    names = [re.escape(agent.id)] + ([re.escape(agent.name)] if agent.name else [])
    pattern = r"(?<![\w@])@(?:" + "|".join(names) + r")(?!\w)"
    return re.search(pattern, text, re.IGNORECASE) is not None


class AgentWorker:
    """Runs tasks concurrently (``concurrency`` conversations at once) until cancelled."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        runtime: AgentRuntime,
        clock: Clock,
        *,
        max_attempts: int,
        poll_seconds: float = 2.0,
        concurrency: int = 4,
    ) -> None:
        self._pool = pool
        self._runtime = runtime
        self._clock = clock
        self._max_attempts = max_attempts
        self._poll_seconds = poll_seconds
        self._slots = asyncio.Semaphore(concurrency)
        self._wake = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()

    def wake(self, *_: Any) -> None:
        """Look for work now (also the LISTEN callback)."""
        self._wake.set()

    async def run(self) -> None:
        """Recover, then claim and run tasks forever. Cancel to stop."""
        async with self._pool.acquire() as conn:
            recovered = await tasks_store.recover(
                conn, max_attempts=self._max_attempts, now=self._clock.now()
            )
        if recovered:
            log.info("recovered %d interrupted agent tasks", recovered)
        async with self._pool.acquire() as listener:
            await listener.add_listener(tasks_store.CHANNEL, self.wake)
            try:
                await self._loop()
            finally:
                for task in self._running:
                    task.cancel()
                await asyncio.gather(*self._running, return_exceptions=True)
                await listener.remove_listener(tasks_store.CHANNEL, self.wake)

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            while True:
                await self._slots.acquire()
                async with self._pool.acquire() as conn:
                    task = await tasks_store.claim(conn, now=self._clock.now())
                if task is None:
                    self._slots.release()
                    break
                running = asyncio.create_task(self._run_one(task), name=f"agent-task-{task['id']}")
                self._running.add(running)
                running.add_done_callback(self._running.discard)
            try:
                await asyncio.wait_for(self._wake.wait(), self._poll_seconds)
            except TimeoutError:
                pass

    async def _run_one(self, task: dict[str, Any]) -> None:
        try:
            await self._runtime.run_task(task)
        except asyncio.CancelledError:
            raise  # the task stays "running" and is recovered at the next start
        except Exception as exc:
            log.exception("agent task %s crashed", task["id"])
            async with self._pool.acquire() as conn:
                await tasks_store.finish(
                    conn, id=task["id"], status="failed", now=self._clock.now(), error=str(exc)
                )
        finally:
            self._slots.release()
            self.wake()
