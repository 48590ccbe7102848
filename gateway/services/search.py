"""Search over a user's memories, knowledge and messages: full-text always, semantic when possible.

``method="auto"`` runs semantic search (pgvector + the configured embeddings endpoint) when
both are available and full-text search always, then merges: a row found by both keeps its
semantic hit. Every hit says which method produced it. Semantic scores (cosine similarity) and
full-text scores (ts_rank) are not comparable, so semantic hits come first, then full-text.
Messages are embedded in the background (:mod:`gateway.workers.message_embeddings`), so a
new message is found by full text at once and semantically a moment later.
"""

from __future__ import annotations

from typing import Literal

import asyncpg

from gateway.agents.embeddings import Embedder, EmbeddingError
from gateway.clock import Clock
from gateway.errors import ValidationFailedError
from gateway.store import search as search_store
from models import User
from models.context import SearchHit, SearchResults, SearchScope

SearchMode = Literal["auto", "fulltext", "semantic"]
ALL_SCOPES: tuple[SearchScope, ...] = ("memories", "knowledge", "messages")
SEMANTIC_SCOPES: tuple[SearchScope, ...] = ("memories", "knowledge", "messages")


class SearchService:
    """Runs searches for one user; ``threshold`` is the minimum cosine similarity (0.3)."""

    def __init__(
        self, pool: asyncpg.Pool, embedder: Embedder, clock: Clock, threshold: float = 0.3
    ) -> None:
        self._pool = pool
        self._embedder = embedder
        self._clock = clock
        self.threshold = threshold

    async def semantic_available(self) -> bool:
        """True when pgvector is present and an embeddings endpoint is configured."""
        if not self._embedder.enabled:
            return False
        async with self._pool.acquire() as conn:
            return await search_store.vector_available(conn)

    async def search(
        self,
        user: User,
        query: str,
        *,
        scopes: tuple[SearchScope, ...] = ALL_SCOPES,
        method: SearchMode = "auto",
        project: str | None = None,
        domain: str | None = None,
        threshold: float | None = None,
        limit: int = 20,
    ) -> SearchResults:
        """Hits for ``query``; raises ValidationFailedError when ``semantic`` is impossible."""
        available = await self.semantic_available()
        if method == "semantic" and not available:
            raise ValidationFailedError(
                "semantic search needs pgvector and CONFER_EMBEDDING_BASE_URL; use fulltext"
            )
        hits: list[SearchHit] = []
        if method in ("auto", "semantic") and available:
            hits += await self._semantic(
                user, query, scopes, project, domain, threshold or self.threshold, limit
            )
        if method in ("auto", "fulltext"):
            seen = {(h.kind, h.id) for h in hits}
            hits += [
                h
                for h in await self._fulltext(user, query, scopes, project, domain, limit)
                if (h.kind, h.id) not in seen
            ]
        return SearchResults(query=query, semantic_available=available, hits=hits[:limit])

    async def _fulltext(
        self,
        user: User,
        query: str,
        scopes: tuple[SearchScope, ...],
        project: str | None,
        domain: str | None,
        limit: int,
    ) -> list[SearchHit]:
        rows = []
        async with self._pool.acquire() as conn:
            for scope in scopes:
                rows += await search_store.fulltext(
                    conn,
                    scope=scope,
                    user_id=user.id,
                    query=query,
                    now=self._clock.now(),
                    project=project,
                    domain=domain,
                    limit=limit,
                )
        rows.sort(key=lambda r: r["score"], reverse=True)
        return [SearchHit(**r, method="fulltext") for r in rows]

    async def _semantic(
        self,
        user: User,
        query: str,
        scopes: tuple[SearchScope, ...],
        project: str | None,
        domain: str | None,
        threshold: float,
        limit: int,
    ) -> list[SearchHit]:
        try:
            [vector] = await self._embedder.embed([query])
        except EmbeddingError:
            return []  # full-text still answers; the hits say so
        rows = []
        async with self._pool.acquire() as conn:
            for scope in scopes:
                if scope not in SEMANTIC_SCOPES:
                    continue
                rows += await search_store.semantic(
                    conn,
                    scope=scope,
                    user_id=user.id,
                    vector=vector,
                    model=self._embedder.model,
                    threshold=threshold,
                    now=self._clock.now(),
                    project=project,
                    domain=domain,
                    limit=limit,
                )
        rows.sort(key=lambda r: r["score"], reverse=True)
        return [SearchHit(**r, method="semantic") for r in rows]
