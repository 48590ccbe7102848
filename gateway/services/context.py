"""The own agent's services in one bundle, built in the app's lifespan (issue 6)."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import httpx

from gateway.agents.embeddings import Embedder
from gateway.clock import Clock
from gateway.services.memory import MemoryService
from gateway.services.search import SearchService
from gateway.settings import Settings


@dataclass
class ContextServices:
    """Memories/knowledge/ambient CRUD, search and the embeddings client."""

    embedder: Embedder
    memory: MemoryService
    search: SearchService


def build_context_services(
    pool: asyncpg.Pool, http: httpx.AsyncClient, clock: Clock, settings: Settings
) -> ContextServices:
    """Wire the services from settings (``CONFER_EMBEDDING_*``, similarity threshold)."""
    embedder = Embedder(
        http, settings.embedding_base_url, settings.embedding_model, settings.embedding_api_key
    )
    return ContextServices(
        embedder=embedder,
        memory=MemoryService(pool, embedder, clock),
        search=SearchService(pool, embedder, clock, settings.search_similarity_threshold),
    )
