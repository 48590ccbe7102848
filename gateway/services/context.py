"""The own agent's services in one bundle, built in the app's lifespan (docs/agents.md)."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import httpx

from gateway.agents.embeddings import Embedder
from gateway.agents.keys import LLMKeyLookup, no_llm_key
from gateway.agents.registry import ProviderRegistry
from gateway.agents.runtime import AgentRuntime
from gateway.clock import Clock
from gateway.realtime.hub import EventHub
from gateway.services.memory import MemoryService
from gateway.services.search import SearchService
from gateway.services.translation import Translator
from gateway.settings import Settings


@dataclass
class ContextServices:
    """Memories/knowledge/ambient CRUD, search, the embeddings client, the agent runtime the
    provider registry, and the translator built on that registry."""

    embedder: Embedder
    memory: MemoryService
    search: SearchService
    runtime: AgentRuntime
    registry: ProviderRegistry
    translator: Translator


def build_context_services(
    pool: asyncpg.Pool,
    http: httpx.AsyncClient,
    clock: Clock,
    settings: Settings,
    hub: EventHub,
    key_lookup: LLMKeyLookup = no_llm_key,
) -> ContextServices:
    """Wire the services from settings (``CONFER_EMBEDDING_*``, ``CONFER_LLM_*``, budgets).

    ``key_lookup`` returns a user's plaintext provider key for one call (accounts work).
    """
    registry = ProviderRegistry(
        http, settings.llm_providers, key_lookup, settings.llm_timeout_seconds
    )
    embedder = Embedder(
        http, settings.embedding_base_url, settings.embedding_model, settings.embedding_api_key
    )
    return ContextServices(
        embedder=embedder,
        memory=MemoryService(pool, embedder, clock),
        search=SearchService(pool, embedder, clock, settings.search_similarity_threshold),
        runtime=AgentRuntime(pool, hub, clock, settings, registry),
        registry=registry,
        translator=Translator(pool, registry, settings.llm_timeout_seconds),
    )
