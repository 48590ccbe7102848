"""Context assembly for a user's own agent, in the context-tables spec's order, under a token
budget.

The context-tables spec, section "Flujo de Contexto": 1 system prompt, 2 personality, 3 memories
(most important first, at most 20, unexpired), 4 knowledge the agent may read, 5 the latest ambient
context, 6 the non-compacted history, 7 the conversation summary.

After knowledge (step 4) comes ``concepts``: the session context of the conversation's project
from the agent's concept memory (:func:`gateway.store.agent_context.get_conversation_project`;
active concepts of that project, principles > patterns > events, then weight, at most
:data:`MAX_CONCEPTS`, a disputed one marked ``[CONTESTED]``). It is private like memories.

Budget: the system prompt, personality and summary always go in; then the newest history that
fits ``history_budget`` (older messages are what compaction will summarise); what is left goes
to memories, then knowledge, then concepts, then ambient context, each in its own order until
one does not fit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from gateway.agents.tokens import estimate_tokens
from gateway.store import agent_context as store
from gateway.store import concepts as concepts_store
from gateway.store import knowledge as knowledge_store
from gateway.store import memories as memories_store
from models import Agent, User
from models.context import (
    AssembledContext,
    ChatTurn,
    ContextPart,
    KnowledgeRow,
    MemoryRow,
)

MAX_MEMORIES = 20  # context-tables spec: LIMIT 20
MAX_KNOWLEDGE = 50
MAX_CONCEPTS = 20  # as many as list_active's per-type limit below
CONTESTED_UNKNOWN = "[WARNING] contested could not be verified for these concepts"


@dataclass
class Assembly:
    """The assembled context and the rows behind it (for citations and the offline provider)."""

    context: AssembledContext
    memories: list[MemoryRow]
    knowledge: list[KnowledgeRow]
    history: list[dict[str, Any]]


def system_prompt(agent: Agent, owner: User) -> str:
    """Step 1: who the agent is, from its name and description."""
    who = owner.display_name or owner.username
    text = f"You are {agent.name or 'an agent'}, the personal agent of {who} on Confer."
    return f"{text}\n{agent.description}" if agent.description else text


def personality(agent: Agent) -> str:
    """Step 2: style and language (context-tables spec ``personalidad``: tone, language,
    verbosity)."""
    return (
        f"Personality: {agent.style} tone; answer in the language '{agent.primary_language}'"
        " unless asked otherwise; be concise."
    )


def _memory_line(memory: MemoryRow) -> str:
    return f"- [{memory.type}, importance {memory.importance}] {memory.content}"


def _knowledge_block(entry: KnowledgeRow) -> str:
    title = entry.title or entry.category
    return f"## {title} ({entry.category})\n{entry.content}"


def _ambient_text(ambient: Any) -> str:
    fields = {
        k: v
        for k, v in ambient.model_dump(mode="json").items()
        if k in ("servers", "services", "pending_tasks", "alerts", "git_state") and v is not None
    }
    return f"Current environment (captured {ambient.captured_at.isoformat()}):\n" + json.dumps(
        fields, sort_keys=True, ensure_ascii=False
    )


def _turn(message: dict[str, Any], owner: User, agent_id: str | None = None) -> ChatTurn:
    """The message as a chat turn for ``agent_id``: its own answers are ``assistant``; the
    owner's words plain ``user``; anyone else's (people, other agents of a group, peers)
    ``user`` prefixed with the sender's name."""
    if message["sender_type"] == "own_agent" and agent_id in (None, message["sender_id"]):
        return ChatTurn(role="assistant", content=message["content"] or "")
    if message["sender_type"] == "user" and message["sender_id"] == owner.id:
        return ChatTurn(role="user", content=message["content"] or "")
    return ChatTurn(role="user", content=f"{message['sender']}: {message['content'] or ''}")


def _fit(blocks: list[tuple[str, str]], budget: int) -> tuple[list[str], list[str], list[str]]:
    """Take ``(id, text)`` blocks in order while they fit: ``(texts, ids taken, ids dropped)``."""
    texts: list[str] = []
    taken: list[str] = []
    dropped: list[str] = []
    used = 0
    for block_id, text in blocks:
        cost = estimate_tokens(text)
        if dropped or used + cost > budget:
            dropped.append(block_id)
            continue
        texts.append(text)
        taken.append(block_id)
        used += cost
    return texts, taken, dropped


def split_history(
    history: list[dict[str, Any]], owner: User, budget: int, agent_id: str | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(older messages that do not fit, newest messages that fit)`` in ``budget`` tokens."""
    usable = [m for m in history if m["content_type"] != "system_notice"]
    kept: list[dict[str, Any]] = []
    used = 0
    for message in reversed(usable):
        cost = estimate_tokens(_turn(message, owner, agent_id).content)
        if used + cost > budget:
            break
        kept.append(message)
        used += cost
    kept.reverse()
    cut = usable.index(kept[0]) if kept else len(usable)
    return usable[:cut], kept


async def assemble(
    conn: asyncpg.Connection,
    *,
    agent: Agent,
    owner: User,
    conversation_id: str,
    now: datetime,
    budget: int,
    history_budget: int,
    record_use: bool,
    for_owner: bool = True,
    until: str | None = None,
) -> Assembly:
    """Build the context the agent's ``brain`` model sees for ``conversation_id``.

    ``for_owner`` False (the agent answers someone else: another member of a group, a peer)
    leaves out the owner's private parts — memories and ambient context — whatever the budget;
    knowledge still enters (the owner shares it per agent with ``allowed_agents``). With
    ``until`` (the message being answered) the history stops at that message, so it is the
    last turn even when others spoke after it.

    With ``record_use`` the memories that went in get ``uses + 1`` and ``last_used_at = now``
    (the inspect endpoint passes False: looking must not count as using).
    """
    summary_row = await store.get_summary(conn, conversation_id=conversation_id)
    summary = _part(
        "summary",
        f"Summary of the earlier conversation:\n{summary_row['summary']}" if summary_row else "",
        [conversation_id] if summary_row else [],
    )
    head = [
        _part("system_prompt", system_prompt(agent, owner)),
        _part("personality", personality(agent)),
    ]
    left = budget - sum(p.tokens for p in head) - summary.tokens
    history, turns, kept = await _history(
        conn, agent, owner, conversation_id, min(history_budget, left), until
    )
    references, memories, knowledge = await _references(
        conn, agent, owner, now, left - history.tokens, for_owner, conversation_id
    )
    if record_use and memories:
        await memories_store.mark_used(conn, ids=[m.id for m in memories], now=now)
    parts = [*head, *references, history, summary]
    return Assembly(
        _render(agent, conversation_id, budget, parts, turns), memories, knowledge, kept
    )


async def _history(
    conn: asyncpg.Connection,
    agent: Agent,
    owner: User,
    conversation_id: str,
    budget: int,
    until: str | None = None,
) -> tuple[ContextPart, list[ChatTurn], list[dict[str, Any]]]:
    """Step 6: the newest non-compacted messages (up to ``until``) that fit ``budget``."""
    history = await store.list_history(conn, conversation_id=conversation_id)
    if until is not None:  # ULIDs sort by time: later messages are not part of the question
        history = [m for m in history if m["id"] <= until]
    older, kept = split_history(history, owner, max(budget, 0), agent.id)
    turns = [_turn(m, owner, agent.id) for m in kept]
    part = _part(
        "history",
        "\n".join(f"{t.role}: {t.content}" for t in turns),
        [m["id"] for m in kept],
        [m["id"] for m in older],
    )
    return part, turns, kept


async def _references(
    conn: asyncpg.Connection,
    agent: Agent,
    owner: User,
    now: datetime,
    left: int,
    private: bool,
    conversation_id: str,
) -> tuple[list[ContextPart], list[MemoryRow], list[KnowledgeRow]]:
    """Steps 3–5 and concepts: memories, knowledge, concepts and ambient context, each while
    it fits ``left``; without ``private``, no memories, concepts nor ambient context."""
    memories = (
        await memories_store.list_memories(
            conn, agent_id=agent.id, include_expired=False, now=now, limit=MAX_MEMORIES
        )
        if private
        else []
    )
    memory_part = _listed(
        "memories", "What you remember:", [(m.id, _memory_line(m)) for m in memories], left
    )
    left -= memory_part.tokens
    knowledge = await knowledge_store.list_knowledge(
        conn, user_id=owner.id, readable_by=agent.id, limit=MAX_KNOWLEDGE
    )
    knowledge_part = _listed(
        "knowledge",
        "Knowledge you may use:",
        [(k.id, _knowledge_block(k)) for k in knowledge],
        left,
    )
    left -= knowledge_part.tokens
    concept_part = await _concepts(conn, agent, conversation_id, left) if private else None
    concept_part = concept_part or _part("concepts", "")
    left -= concept_part.tokens
    ambient = (
        await knowledge_store.get_latest_ambient(conn, user_id=owner.id, now=now)
        if private
        else None
    )
    blocks = [(ambient.id, _ambient_text(ambient))] if ambient else []
    ambient_part = _listed("ambient", "", blocks, left)
    return (
        [memory_part, knowledge_part, concept_part, ambient_part],
        [m for m in memories if m.id in memory_part.items],
        [k for k in knowledge if k.id in knowledge_part.items],
    )


async def _concepts(
    conn: asyncpg.Connection, agent: Agent, conversation_id: str, left: int
) -> ContextPart | None:
    """The concepts part: the project's active concepts while they fit ``left``; None when
    the conversation names no project."""
    project = await store.get_conversation_project(conn, conversation_id=conversation_id)
    if project is None:
        return None
    rows = await concepts_store.list_active(
        conn, agent_id=agent.id, domains=None, project=project, type=None, limit_per_type=20
    )
    rows = rows[:MAX_CONCEPTS]  # principles first: the first 20 of up to 20 per type
    heading = f"Concepts of project {project} (your concept memory):"
    try:
        async with conn.transaction():  # a savepoint: a failure must not end the caller's
            challengers = await concepts_store.list_challengers(
                conn, concept_ids=[r["id"] for r in rows]
            )
    except asyncpg.PostgresError:
        challengers = None
        heading = f"{heading}\n{CONTESTED_UNKNOWN}"
    blocks = []
    for row in rows:
        text = f"- [{row['type']}, weight {row['weight']:.2f}] {row['name']}"
        text = f"{text}: {row['description']}" if row["description"] else text
        disputed = (challengers or {}).get(row["id"])
        if disputed:
            by = ", ".join(f"{c['name']} ({c['status']}, {c['relation']})" for c in disputed)
            text = f"{text}\n  [CONTESTED] by: {by}"
        blocks.append((row["id"], text))
    return _listed("concepts", heading, blocks, left)


def _listed(name: str, heading: str, blocks: list[tuple[str, str]], left: int) -> ContextPart:
    texts, taken, dropped = _fit(blocks, left - estimate_tokens(heading) - 1)
    body = "\n".join(texts)
    content = f"{heading}\n{body}" if heading and texts else body
    return _part(name, content, taken, dropped)


def _render(
    agent: Agent, conversation_id: str, budget: int, parts: list[ContextPart], turns: list[ChatTurn]
) -> AssembledContext:
    brain = agent.model_config_.brain
    return AssembledContext(
        agent_id=agent.id,
        conversation_id=conversation_id,
        provider=brain.provider,
        model=brain.model,
        budget_tokens=budget,
        total_tokens=sum(p.tokens for p in parts),
        parts=parts,
        system="\n\n".join(p.content for p in parts if p.content and p.name != "history"),
        turns=turns,
    )


def _part(
    name: str, content: str, items: list[str] | None = None, dropped: list[str] | None = None
) -> ContextPart:
    return ContextPart.model_validate(
        {
            "name": name,
            "tokens": estimate_tokens(content),
            "content": content,
            "items": items or [],
            "dropped": dropped or [],
        }
    )
