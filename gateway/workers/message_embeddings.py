"""Embeds messages in the background, so semantic search covers them (docs/agents.md).

Messages are written on many paths (user posts, inbound federation, agent replies), so none of
them embeds: this indexer finds embeddable messages (visible ``text``/``code`` content, not
from ``system``) that have no embedding for the configured model, embeds them in batches (one
``POST /embeddings`` per batch) and stores the vectors in ``embeddings`` with
``owner_table = 'message'``. It runs only when an embeddings endpoint is configured and the
``embeddings`` table exists (pgvector).

Finding work cheaply: a pass walks message ids above a *floor* (every embeddable message at or
below it is done) with an anti-join on the ``embeddings`` primary key. After a pass that left
nothing behind, the floor moves up to the first id of :data:`GRACE_SECONDS` ago (ULIDs start
with their millisecond, and no message transaction stays open that long), so an idle pass
reads only the last few minutes of messages. The first pass after start walks everything.
This assumes the processes' clocks agree within that grace; a message filed further in the
past is embedded at the next start.

Edits: changing a message deletes its embeddings and ``NOTIFY``s its id
(:func:`gateway.store.search.forget_message_embeddings`); the indexer embeds those ids whatever
the floor. A deleted message loses its embeddings in the same transaction.

Failures: when a batch fails, one probe request tells an endpoint that is down (the pass stops
and the indexer backs off exponentially, up to :data:`MAX_BACKOFF_SECONDS`) from one that
refuses some input (the batch is sent one message at a time, and refused messages are skipped
until the process restarts). Nothing is lost: the work list is computed from the tables.

One indexer per database: the one holding a session advisory lock works; the other processes
retry every :data:`RETRY_SECONDS` and take over when it goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import asyncpg

from gateway.agents.embeddings import Embedder, EmbeddingError
from gateway.db import Pool
from gateway.ids import floor_at
from gateway.settings import Settings
from gateway.store import search as search_store

log = logging.getLogger(__name__)

GRACE_SECONDS = 300.0
MAX_CHARS = 6000  # ≈ 1.5–6k tokens: within every common embedding model's input limit
MAX_BACKOFF_SECONDS = 300.0
RETRY_SECONDS = 30.0
LOCK_KEY = "confer_message_embeddings"
PROBE_TEXT = "confer"


class MessageEmbeddingIndexer:
    """Keeps message embeddings current; :meth:`run` until cancelled, or :meth:`run_once`.

    ``batch`` messages go in one request; ``poll_seconds`` is the idle wait between passes.
    """

    def __init__(
        self, pool: Pool, embedder: Embedder, *, batch: int = 32, poll_seconds: float = 2.0
    ) -> None:
        self._pool = pool
        self._embedder = embedder
        self._batch = batch
        self._poll_seconds = poll_seconds
        self._floor = ""
        self._edited: set[str] = set()
        self._skipped: set[str] = set()
        self._wake = asyncio.Event()

    def edited(self, *args: Any) -> None:
        """LISTEN callback ``(connection, pid, channel, message_id)``: embed that message again."""
        self._edited.add(args[-1])
        self._wake.set()

    async def run(self) -> None:
        """Index until cancelled; returns at once without an endpoint or an embeddings table.

        Database and unexpected errors are logged and retried after :data:`RETRY_SECONDS`;
        endpoint errors back off (module docstring). Nothing here stops the app.
        """
        if not self._embedder.enabled:
            return
        while True:
            try:
                if not await self._lead():
                    return
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
                log.warning("message indexer: database error: %s", exc)
            except Exception:
                log.exception("message indexer failed")
            await asyncio.sleep(RETRY_SECONDS)

    async def _lead(self) -> bool:
        """Take the lock and index while holding it; False when pgvector is missing.

        The lock's connection also listens and does the work, so losing it stops this
        process's indexing (an error) at the same time another process may take over. It is
        its own connection, outside the pool: held for the life of the process, it must not
        take a slot that requests wait for.
        """
        conn = await self._pool.connect_direct()
        try:
            if not await search_store.vector_available(conn):
                log.info("message indexer: no embeddings table (pgvector); not indexing")
                return False
            if not await search_store.try_advisory_lock(conn, key=LOCK_KEY):
                return True  # another process indexes
            channel = search_store.MESSAGE_EMBEDDINGS_CHANNEL
            await conn.add_listener(channel, self.edited)
            self._floor = ""  # edits announced while nobody listened: a full pass finds them
            try:
                await self._loop(conn)
            finally:
                with contextlib.suppress(Exception):
                    await conn.remove_listener(channel, self.edited)
                    await search_store.advisory_unlock(conn, key=LOCK_KEY)
        finally:
            await conn.close()
        return True  # pragma: no cover - _loop only ends by raising

    async def _loop(self, conn: asyncpg.Connection) -> None:
        failures = 0
        while True:
            self._wake.clear()
            try:
                await self.run_once(conn)
                failures = 0
            except EmbeddingError as exc:
                failures += 1
                delay = min(self._poll_seconds * 2**failures, MAX_BACKOFF_SECONDS)
                log.warning("message indexer: %s; retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._poll_seconds)

    async def run_once(self, conn: asyncpg.Connection | None = None) -> int:
        """One pass: edited messages, then every waiting message above the floor.

        Uses ``conn``, or a pool connection. Returns how many embeddings were stored. Raises
        EmbeddingError when the endpoint is down (what was stored stays; the next pass goes
        on from there) and asyncpg's errors.
        """
        if conn is None:
            async with self._pool.acquire() as acquired:
                return await self.run_once(acquired)
        stored = 0
        if self._edited:
            ids = sorted(self._edited)
            rows = await self._pending(conn, ids=ids, limit=len(ids))
            left: set[str] = set()
            for start in range(0, len(rows), self._batch):
                done, missed = await self._embed(conn, rows[start : start + self._batch])
                stored, left = stored + done, left | missed
            self._edited -= set(ids) - left
        horizon = floor_at(time.time() - GRACE_SECONDS)
        after, clean = self._floor, True
        while True:
            rows = await self._pending(conn, after=after, limit=self._batch)
            done, missed = await self._embed(conn, rows)
            stored, clean = stored + done, clean and not missed
            if len(rows) < self._batch:
                break
            after = rows[-1]["id"]
        if clean:
            self._floor = max(self._floor, horizon)
        return stored

    async def _pending(self, conn: asyncpg.Connection, **where: Any) -> list[asyncpg.Record]:
        return await search_store.list_unembedded_messages(
            conn, model=self._embedder.model, skip=sorted(self._skipped), **where
        )

    async def _embed(
        self, conn: asyncpg.Connection, rows: list[asyncpg.Record]
    ) -> tuple[int, set[str]]:
        """Embed and store ``rows``; returns (stored, ids left for a later pass)."""
        if not rows:
            return 0, set()
        texts = [r["content"][:MAX_CHARS] for r in rows]
        try:
            vectors: list[list[float] | None] = list(await self._embedder.embed(texts))
        except EmbeddingError:
            vectors = await self._embed_one_by_one(rows, texts)
        items = [(r["id"], r["content"], v) for r, v in zip(rows, vectors, strict=True) if v]
        if not items:
            return 0, set()
        async with conn.transaction():
            stored = await search_store.store_message_embeddings(
                conn, model=self._embedder.model, items=items
            )
        return len(stored), {item[0] for item in items} - set(stored)

    async def _embed_one_by_one(
        self, rows: list[asyncpg.Record], texts: list[str]
    ) -> list[list[float] | None]:
        """After a failed batch: raise when the endpoint is down, else skip refused messages."""
        await self._embedder.embed([PROBE_TEXT])  # EmbeddingError: down; the pass stops
        vectors: list[list[float] | None] = []
        for row, text in zip(rows, texts, strict=True):
            try:
                [vector] = await self._embedder.embed([text])
            except EmbeddingError as exc:
                log.warning("message indexer: skipping message %s: %s", row["id"], exc)
                self._skipped.add(row["id"])
                vector = None
            vectors.append(vector)
        return vectors


async def run_message_indexer(pool: Pool, embedder: Embedder, settings: Settings) -> None:
    """The app's indexer (``CONFER_EMBED_MESSAGES``, ``CONFER_MESSAGE_EMBEDDING_BATCH``,
    ``CONFER_MESSAGE_EMBEDDING_POLL_SECONDS``) until cancelled; returns at once when off."""
    if settings.embed_messages:
        indexer = MessageEmbeddingIndexer(
            pool,
            embedder,
            batch=settings.message_embedding_batch,
            poll_seconds=settings.message_embedding_poll_seconds,
        )
        await indexer.run()
