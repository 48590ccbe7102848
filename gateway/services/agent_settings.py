"""The user's own agents: read and update their settings (``/v1/agents/me``, ``/v1/agents/{id}``).

Validation beyond the pydantic shapes (data model spec, ``Agent``): every ``model_config`` provider
must be an LLM provider of the catalog (``gateway.agents.catalog``), temperatures lie in
[0, 2], policy rules name their peer by DID. Errors are 422 naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg

from gateway.agents.catalog import find_provider
from gateway.clock import Clock
from gateway.errors import AgentNotFoundError, FieldInvalidError
from gateway.store import audit as audit_store
from gateway.store import users as users_store
from models import Agent, ModelChoice, PolicyConfig
from models.account_api import AgentUpdate

MAX_RULES = 200


async def get_own_agent(conn: asyncpg.Connection, *, user_id: str, agent_id: str | None) -> Agent:
    """The user's main agent (``agent_id`` None) or one of its agents by id.

    Raises AgentNotFoundError (404) for a missing agent or one owned by someone else.
    """
    if agent_id is None:
        agent = await users_store.get_main_agent(conn, user_id=user_id)
    else:
        agent = await users_store.get_agent(conn, id=agent_id)
    if agent is None or agent.user_id != user_id:
        raise AgentNotFoundError(f"no agent {agent_id or 'me'!r} of yours")
    return agent


def _check_choice(job: str, choice: ModelChoice, extra: Mapping[str, Mapping[str, str]]) -> None:
    loc: list[str | int] = ["body", "model_config", job]
    provider = find_provider(choice.provider, extra)
    if provider is None or provider.kind != "llm":
        raise FieldInvalidError(
            [*loc, "provider"],
            f"{choice.provider!r} is not an LLM provider of this instance (GET /v1/providers)",
        )
    if not choice.model or len(choice.model) > 128:
        raise FieldInvalidError([*loc, "model"], "a model name has 1 to 128 characters")
    if choice.temperature is not None and not 0 <= choice.temperature <= 2:
        raise FieldInvalidError([*loc, "temperature"], "temperature lies between 0 and 2")


def _check_policies(policies: PolicyConfig) -> None:
    if len(policies.rules) > MAX_RULES:
        raise FieldInvalidError(["body", "policies", "rules"], f"at most {MAX_RULES} rules")
    for index, rule in enumerate(policies.rules):
        loc: list[str | int] = ["body", "policies", "rules", index]
        if rule.peer is not None and (not rule.peer.startswith("did:") or len(rule.peer) > 255):
            raise FieldInvalidError([*loc, "peer"], "a peer is a DID such as did:web:host:users:x")
        if rule.pattern is not None and len(rule.pattern) > 256:
            raise FieldInvalidError([*loc, "pattern"], "a pattern has at most 256 characters")


def agent_changes(
    agent: Agent, data: AgentUpdate, extra_providers: Mapping[str, Mapping[str, str]]
) -> dict[str, Any]:
    """The column changes a PATCH asks for, validated; ``model_config`` providers come from
    the catalog and ``extra_providers`` (``CONFER_LLM_PROVIDERS``). Raises FieldInvalidError
    (422)."""
    changes = data.model_dump(
        exclude_unset=True, exclude={"model_config_", "policies", "capabilities"}
    )
    for field, value in changes.items():
        if value is None and field in ("primary_language", "style", "is_public"):
            raise FieldInvalidError(["body", field], "may not be null")
    for field, alias in (
        ("model_config_", "model_config"),
        ("policies", "policies"),
        ("capabilities", "capabilities"),
    ):
        if field in data.model_fields_set and getattr(data, field) is None:
            raise FieldInvalidError(["body", alias], "may not be null")
    if data.model_config_ is not None:
        merged = agent.model_config_.model_dump()
        for job in data.model_config_.model_fields_set:
            choice = getattr(data.model_config_, job)
            if choice is None:
                raise FieldInvalidError(["body", "model_config", job], "may not be null")
            _check_choice(job, choice, extra_providers)
            merged[job] = choice.model_dump()
        changes["model_config"] = merged
    if data.policies is not None:
        _check_policies(data.policies)
        changes["policies"] = data.policies.model_dump()
    if data.capabilities is not None:
        changes["capabilities"] = [c.model_dump() for c in data.capabilities]
    return changes


async def update_own_agent(
    pool: asyncpg.Pool,
    clock: Clock,
    *,
    user_id: str,
    agent_id: str | None,
    data: AgentUpdate,
    ip: str | None,
    extra_providers: Mapping[str, Mapping[str, str]] | None = None,
) -> Agent:
    """Apply a PATCH to one of the user's agents; audited as ``agent.updated``.

    Raises AgentNotFoundError (404), FieldInvalidError (422).
    """
    async with pool.acquire() as conn, conn.transaction():
        agent = await get_own_agent(conn, user_id=user_id, agent_id=agent_id)
        # ``model_config`` is merged job by job into the stored one: read it under a row lock,
        # so two PATCHes of different jobs at once do not write back each other's old choice.
        locked = await users_store.get_agent(conn, id=agent.id, lock=True)
        assert locked is not None
        changes = agent_changes(locked, data, extra_providers or {})
        updated = await users_store.update_agent(
            conn, id=agent.id, changes=changes, now=clock.now()
        )
        await audit_store.insert_audit(
            conn,
            action="agent.updated",
            user_id=user_id,
            details={"agent_id": agent.id, "fields": sorted(changes)},
            ip_address=ip,
        )
        return updated
