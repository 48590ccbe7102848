"""Runs one agent task: assemble the context, stream the reply, store it, compact the history.

Deltas go to every local participant's devices as ``message.delta`` events
``{"conversation_id", "task_id", "seq", "delta"}``; the final message (``sender_type
own_agent``, ``via``, the provider and model in ``content_json``, ``citations``) is stored in the
same transaction that marks the task done, with its ``message.created`` stream event, and is
pushed to the devices once that transaction has committed. A provider
failure stores a ``system_notice`` message instead and marks the task failed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg

from a2a.protocol import agent_text_message
from gateway.agents.context import Assembly, assemble, split_history
from gateway.agents.offline import OfflineProvider, best_source
from gateway.agents.providers import ChatCall, ProviderError, Source
from gateway.agents.registry import ProviderRegistry
from gateway.agents.tokens import estimate_tokens
from gateway.clock import Clock
from gateway.db import Transaction, transaction
from gateway.errors import ConversationNotFoundError
from gateway.ids import new_id
from gateway.realtime.hub import EventHub
from gateway.services.outbound import Post, queue_for_peers
from gateway.services.tasks import TaskEvents, record_update
from gateway.settings import Settings
from gateway.store import agent_context as context_store
from gateway.store import agent_tasks as tasks_store
from gateway.store import conversations as conv_store
from gateway.store import messages as messages_store
from gateway.store import tasks as a2a_store
from gateway.store import users as users_store
from models import Agent, ModelChoice, User
from models.context import AssembledContext, ChatTurn

log = logging.getLogger(__name__)

MESSAGE_DELTA = "message.delta"
MESSAGE_CREATED = "message.created"
SUMMARIZE_PROMPT = (
    "Summarise the conversation below for your own later use: keep facts, decisions, open"
    " questions and commitments; drop greetings. Write short bullet points."
)


class LeaseLostError(Exception):
    """The task's lease ran out before its answer was stored; another worker retries it."""


class AgentRuntime:
    """Context inspection, task execution and compaction for users' own agents."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        hub: EventHub,
        clock: Clock,
        settings: Settings,
        registry: ProviderRegistry,
    ) -> None:
        self._pool = pool
        self._hub = hub
        self._clock = clock
        self._settings = settings
        self._registry = registry
        self._task_events = TaskEvents(hub.bus)

    async def _assemble(
        self,
        conn: asyncpg.Connection,
        agent: Agent,
        owner: User,
        conversation_id: str,
        use: bool,
        for_owner: bool = True,
        until: str | None = None,
    ) -> Assembly:
        return await assemble(
            conn,
            agent=agent,
            owner=owner,
            conversation_id=conversation_id,
            now=self._clock.now(),
            budget=self._settings.agent_context_tokens,
            history_budget=self._settings.agent_history_tokens,
            record_use=use,
            for_owner=for_owner,
            until=until,
        )

    async def inspect(
        self, user: User, conversation_id: str, *, for_owner: bool = True
    ) -> AssembledContext:
        """What the user's own agent would see now (read-only: use counts do not change) when
        answering its owner, or (``for_owner`` False) anyone else.

        Raises ConversationNotFoundError unless the user and their own agent both take part.
        """
        async with self._pool.acquire() as conn:
            agent_id = await context_store.get_own_agent_id(
                conn, conversation_id=conversation_id, user_id=user.id
            )
            agent = await users_store.get_agent(conn, id=agent_id) if agent_id else None
            if agent is None:
                raise ConversationNotFoundError(
                    f"no conversation {conversation_id} with your agent"
                )
            assembly = await self._assemble(conn, agent, user, conversation_id, False, for_owner)
            return assembly.context

    async def run_task(self, task: dict[str, Any]) -> None:
        """Execute one claimed task to ``done`` or ``failed`` (never raises ProviderError)."""
        async with self._pool.acquire() as conn:
            agent = await users_store.get_agent(conn, id=task["agent_id"])
            assert agent is not None
            owner = await users_store.get_user(conn, id=agent.user_id)
            assert owner is not None
            trigger = await messages_store.get_message(conn, id=task["trigger_message_id"])
            for_owner = (
                trigger is not None
                and trigger.sender_type == "user"
                and trigger.sender_id == owner.id
            )
            async with conn.transaction():
                assembly = await self._assemble(
                    conn,
                    agent,
                    owner,
                    task["conversation_id"],
                    True,
                    for_owner,
                    until=task["trigger_message_id"],
                )
            members = await _local_users(conn, task["conversation_id"])
        brain = agent.model_config_.brain
        call = _reply_call(brain, assembly)
        try:
            text, provider_name = await self._stream(owner, brain, call, task, members)
        except ProviderError as exc:
            await self._fail(task, agent, brain, exc, members)
            return
        citations = _citations(call) if provider_name == OfflineProvider.name else None
        await self._store_reply(task, agent, brain, text, citations, members, call.usage)
        try:
            await self.compact_if_needed(task["conversation_id"], agent, owner)
        except ProviderError as exc:
            log.warning("compaction of %s failed: %s", task["conversation_id"], exc.detail)

    async def _stream(
        self,
        owner: User,
        choice: ModelChoice,
        call: ChatCall,
        task: dict[str, Any],
        members: list[str],
    ) -> tuple[str, str]:
        provider = await self._registry.provider_for(owner.id, choice)
        pieces: list[str] = []
        try:
            async with asyncio.timeout(self._settings.llm_timeout_seconds):
                async for delta in provider.stream(call):
                    pieces.append(delta)
                    await self._delta(members, task, len(pieces), delta)
        except TimeoutError as exc:
            raise ProviderError("timeout", "the provider took too long to answer") from exc
        text = "".join(pieces)
        if not text.strip():
            raise ProviderError("bad_response", "the provider sent an empty reply")
        return text, provider.name

    async def _delta(self, members: list[str], task: dict[str, Any], seq: int, delta: str) -> None:
        """Stream one piece of the answer (ephemeral: a lost delta is not retried; the stored
        answer follows as ``message.created``)."""
        data = {
            "conversation_id": task["conversation_id"],
            "task_id": task["id"],
            "seq": seq,
            "delta": delta,
        }
        try:
            await self._hub.emit_ephemeral(members, MESSAGE_DELTA, data)
        except Exception:
            log.warning("could not stream a delta of agent task %s", task["id"], exc_info=True)

    async def _store_reply(
        self,
        task: dict[str, Any],
        agent: Agent,
        choice: ModelChoice,
        text: str,
        citations: list[dict[str, Any]] | None,
        members: list[str],
        usage: dict[str, int] | None = None,
    ) -> None:
        meta: dict[str, Any] = {
            "provider": choice.provider,
            "model": choice.model,
            "task_id": task["id"],
        }
        if usage:
            meta["usage"] = usage  # the provider's own token counts for this call
        await self._insert_and_finish(
            task, agent, "own_agent", "text", text, meta, citations, "done", None, members
        )

    async def _fail(
        self,
        task: dict[str, Any],
        agent: Agent,
        choice: ModelChoice,
        exc: ProviderError,
        members: list[str],
    ) -> None:
        text = (
            f"Your agent could not answer: {exc.detail} "
            f"(provider {choice.provider}, model {choice.model}, error {exc.kind})."
        )
        meta = {
            "provider": choice.provider,
            "model": choice.model,
            "task_id": task["id"],
            "error": exc.kind,
            "status": exc.status,
        }
        await self._insert_and_finish(
            task, agent, "system", "system_notice", text, meta, None, "failed", exc.detail, members
        )

    async def _insert_and_finish(
        self,
        task: dict[str, Any],
        agent: Agent,
        sender_type: str,
        content_type: str,
        text: str,
        meta: dict[str, Any],
        citations: list[dict[str, Any]] | None,
        status: str,
        error: str | None,
        members: list[str],
    ) -> None:
        message_id = new_id()
        async with transaction(self._pool) as tx:
            conn = tx.conn
            await tasks_store.insert_agent_message(
                conn,
                id=message_id,
                conversation_id=task["conversation_id"],
                sender_type=sender_type,
                sender_id=agent.id,
                sender_did=agent.did,
                content_type=content_type,
                content=text,
                content_json=meta,
                citations=citations,
                in_reply_to=task["trigger_message_id"],
                via="api",
            )
            await conv_store.touch_conversation(conn, conversation_id=task["conversation_id"])
            held = await tasks_store.finish(
                conn,
                id=task["id"],
                status=status,
                now=self._clock.now(),
                reply_message_id=message_id,
                error=error,
            )
            if not held:  # rolls the answer back: another worker runs the task now
                raise LeaseLostError(f"agent task {task['id']} is no longer ours")
            message = await messages_store.get_message(conn, id=message_id)
            assert message is not None
            if sender_type == "own_agent":  # answers reach the conversation's peers too
                await queue_for_peers(conn, Post(message, sender_name=agent.name))
            await self._answer_key_callers(tx, task["trigger_message_id"], message_id, text, status)
            await self._hub.append(tx, members, MESSAGE_CREATED, message.model_dump(mode="json"))

    async def _answer_key_callers(
        self, tx: Transaction, trigger: str | None, answer_id: str, text: str, status: str
    ) -> None:
        """The answer is the result of the API-key callers' tasks waiting for it (A2A §3.1:
        the task's final status message): ``COMPLETED``, or ``FAILED`` with the notice when
        the agent could not answer; each update reaches their streams after commit."""
        if trigger is None:
            return
        state = "TASK_STATE_COMPLETED" if status == "done" else "TASK_STATE_FAILED"
        for row in await a2a_store.list_answer_waiting(tx.conn, message_id=trigger):
            status_message = agent_text_message(
                text,
                message_id=answer_id,
                context_id=row.context_id,
                task_id=row.id,
                data={"status": "answered", "messageId": answer_id},
            )
            updated = await a2a_store.update_task_state(
                tx.conn,
                id=row.id,
                state=state,
                status_message=status_message,
                now=self._clock.now(),
                from_states=("TASK_STATE_WORKING",),
            )
            if updated is not None:
                # push notifications queued in this transaction, live streams after commit
                await record_update(tx, updated, self._task_events)

    async def compact_if_needed(self, conversation_id: str, agent: Agent, owner: User) -> bool:
        """Summarise the oldest history when it exceeds the history budget; True if it did.

        The oldest messages are summarised (with the previous summary) by the agent's
        ``summarize`` model until the rest fits half the budget; they are marked compacted,
        never deleted. Raises ProviderError when the summarize model fails (nothing changes).
        """
        budget = self._settings.agent_history_tokens
        async with self._pool.acquire() as conn:
            history = await context_store.list_history(conn, conversation_id=conversation_id)
            previous = await context_store.get_summary(conn, conversation_id=conversation_id)
        total = sum(estimate_tokens(m["content"] or "") for m in history)
        if total <= budget:
            return False
        older, kept = split_history(history, owner, budget // 2, agent.id)
        cut = kept[0]["id"] if kept else None
        to_compact = [m for m in history if cut is None or m["id"] < cut]
        if not older:
            return False
        choice = agent.model_config_.summarize
        call = _summary_call(choice, older, previous["summary"] if previous else None)
        provider = await self._registry.provider_for(owner.id, choice)
        async with asyncio.timeout(self._settings.llm_timeout_seconds):
            summary = "".join([piece async for piece in provider.stream(call)]).strip()
        if not summary:
            raise ProviderError("bad_response", "the summarize model sent an empty summary")
        async with self._pool.acquire() as conn, conn.transaction():
            await context_store.compact(
                conn,
                conversation_id=conversation_id,
                message_ids=[m["id"] for m in to_compact],
                summary=summary,
                provider=choice.provider,
                model=choice.model,
            )
        return True


def _reply_call(choice: ModelChoice, assembly: Assembly) -> ChatCall:
    sources = [Source("memory", m.id, m.content) for m in assembly.memories] + [
        Source("knowledge", k.id, k.content, k.title) for k in assembly.knowledge
    ]
    return ChatCall(
        model=choice.model,
        system=assembly.context.system,
        turns=assembly.context.turns,
        temperature=choice.temperature,
        sources=sources,
    )


def _summary_call(
    choice: ModelChoice, messages: list[dict[str, Any]], previous: str | None
) -> ChatCall:
    system = SUMMARIZE_PROMPT + (f"\n\nThe summary so far:\n{previous}" if previous else "")
    transcript = [
        ChatTurn(role="user", content=f"{m['sender']}: {m['content'] or ''}")
        for m in messages
        if m["content_type"] != "system_notice"
    ]
    sources = [Source("summary", "previous", previous)] if previous else []
    return ChatCall(
        model=choice.model,
        system=system,
        turns=transcript,
        temperature=choice.temperature,
        purpose="summarize",
        sources=sources,
    )


def _citations(call: ChatCall) -> list[dict[str, Any]] | None:
    source = best_source(call)
    if source is None:
        return None
    return [
        {
            "source": f"{source.kind}:{source.id}",
            "passage": source.text[:500],
            "trust_level": "verified",
        }
    ]


async def _local_users(conn: asyncpg.Connection, conversation_id: str) -> list[str]:
    participants = await conv_store.list_participants(conn, conversation_id=conversation_id)
    return [p["user_id"] for p in participants if p["user_id"]]
