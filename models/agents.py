"""Agents and their configuration.

Source: the data model spec, table ``agents``; interfaces ``Agent``, ``ModelConfig``,
``ModelChoice``, ``PolicyConfig``, ``PolicyRule``, ``Capability``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictFloat

from .base import ConferModel, Ulid

AgentStyle = Literal["formal", "friendly", "technical", "casual"]
"""``Agent.style``; column ``agents.style`` (default ``'friendly'``)."""

PolicyDefault = Literal["auto", "ask", "deny"]
"""``PolicyConfig.default``: what the agent does when no rule matches."""

PolicyAction = Literal["read", "ask", "share", "commit"]
"""``PolicyRule.action``: the kind of request a rule covers."""

PolicyEffect = Literal["allow", "deny", "ask"]
"""``PolicyRule.effect``: what happens when a rule matches."""


class ModelChoice(ConferModel):
    """Interface ``ModelChoice``: one LLM, as a provider id and that provider's model name.

    Neither is enumerated (providers live in the catalog, models come from the provider's own
    ``/models``); ``temperature`` is the sampling temperature, provider default when ``None``.
    Their lengths are those of ``conversation_summaries.provider`` and ``.model``, where a
    summary records which model wrote it.
    """

    provider: Annotated[str, Field(min_length=1, max_length=64)]
    model: Annotated[str, Field(min_length=1, max_length=128)]
    temperature: StrictFloat | None = None


class ModelConfig(ConferModel):
    """Interface ``ModelConfig``: the LLM for each of the agent's jobs.

    Stored in ``agents.model_config_json``.
    """

    brain: ModelChoice
    quick: ModelChoice
    translation: ModelChoice
    summarize: ModelChoice


class PolicyRule(ConferModel):
    """Interface ``PolicyRule``: one rule of an agent's policy.

    Applies ``effect`` to ``action`` requests, optionally only from ``peer`` and only for
    resources matching ``pattern`` (the spec gives neither a format).
    """

    peer: str | None = None
    action: PolicyAction
    pattern: str | None = None
    effect: PolicyEffect


class PolicyConfig(ConferModel):
    """Interface ``PolicyConfig``: the agent's rules and its fallback (``agents.policies_json``)."""

    default: PolicyDefault
    rules: list[PolicyRule]


class Capability(ConferModel):
    """Interface ``Capability``: something the agent offers (``agents.capabilities_json`` items).

    ``type`` is an open set (``'qa' | 'code-generation' | 'translation' | string``).
    """

    type: str
    scope: list[str]
    languages: list[str]


class Agent(ConferModel):
    """Interface ``Agent``: a user's own agent (table ``agents``).

    ``model_config``, ``policies`` and ``capabilities`` are the ``*_json`` columns. The attribute
    is ``model_config_`` because pydantic reserves ``model_config``; on the wire it is
    ``model_config``.
    """

    id: Ulid
    user_id: Ulid
    did: str
    name: str | None = None
    description: str | None = None
    avatar_url: str | None = None
    primary_language: str
    style: AgentStyle
    model_config_: ModelConfig = Field(alias="model_config")
    policies: PolicyConfig
    capabilities: list[Capability]
    is_public: bool
