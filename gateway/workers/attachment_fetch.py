"""Fetching the files peers sent: a supervised worker that brings each one here, with retry.

A ``file`` message from a peer is stored at once with an attachment row ``pending``
(:func:`gateway.services.federation.receive_message`); this worker then fetches the bytes, so
a large file or a slow sender never holds the sender's delivery open, and a sender that is
briefly down is simply asked again. One attempt:

1. The declared size must fit ``attachment_max_bytes``; an ``http`` URL needs
   ``allow_http_dids`` (local development).
2. ``GET`` the URL signed per RFC 9421 by this instance's key as the copy's owner (``keyid`` =
   the receiving user's DID, whose document, like every local DID's, lists the instance keys
   and an A2A endpoint; the sender checks that this DID's instance has a participant), covering
   :data:`a2a.signatures.FETCH_COMPONENTS`, sent through the outbound address policy
   (:meth:`did.outbound.OutboundPolicy.send`), the whole exchange bounded by
   ``attachment_fetch_timeout_seconds``.
3. The body is streamed into storage, capped at the declared size; its size and SHA-256 must
   equal the declared ones, or the bytes are dropped and the file fails for good.

Outcomes: ``fetched`` (the row gets its ``storage_url``); ``failed`` for good (a refusal other
than 401/408/429, a size or hash mismatch, a policy refusal of the URL's scheme); otherwise
retried after ``RETRY_BASE * 2**attempts`` seconds (at most ``RETRY_CAP``) until
``attachment_fetch_max_attempts``. Every attempt leaves a ``federation.outbound`` audit row.
A message deleted meanwhile is not fetched, and bytes that arrive after its delete are dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import httpx

from a2a.signatures import FETCH_COMPONENTS
from did.errors import AddressRefusedError, DIDResolutionError
from did.outbound import OutboundPolicy
from gateway.clock import Clock
from gateway.db import Pool, transaction
from gateway.errors import PayloadTooLargeError, StorageUnavailableError
from gateway.ids import new_id
from gateway.services import federation
from gateway.services.identity import Identity
from gateway.settings import Settings
from gateway.storage import AttachmentStorage
from gateway.store import attachments as store
from gateway.store import audit as audit_store
from gateway.store import users as users_store
from gateway.workers.draining import DrainingWorker
from models import AttachmentRow

log = logging.getLogger(__name__)

RETRY_BASE = 10.0
RETRY_CAP = 3600.0
IDLE_WAIT = 30.0
RETRIED_STATUSES = frozenset({401, 408, 429})
"""Answers worth asking again (a key the sender has not cached yet, a timeout, a rate limit),
with every 5xx; other refusals are final."""

Outcome = tuple[str, str | None]
"""``("fetched" | "retry" | "failed", reason)``."""


class AttachmentFetcher(DrainingWorker):
    """Fetches pending peer files; run one per process with :meth:`run` (supervised), woken by
    ``NOTIFY confer_attachment_fetch``."""

    channel = store.FETCH_CHANNEL
    label = "attachment fetch"
    idle_wait = IDLE_WAIT
    min_wait = 0.5

    def __init__(
        self,
        pool: Pool,
        client: httpx.AsyncClient,
        identity: Identity,
        clock: Clock,
        settings: Settings,
        policy: OutboundPolicy,
        storage: AttachmentStorage,
    ) -> None:
        super().__init__(pool, client, identity, clock, settings, policy)
        self._storage = storage

    async def run_once(self) -> bool:
        """Claim and attempt every due fetch; True when there were any."""
        self._wake.clear()
        lease = timedelta(seconds=self._settings.attachment_fetch_timeout_seconds + 30)
        async with self._pool.acquire() as conn:
            rows = await store.claim_due_fetches(conn, now=self._clock.now(), lease=lease, limit=8)
        if rows:
            await asyncio.gather(*(self._attempt(row) for row in rows))
        return bool(rows)

    async def next_due_at(self) -> datetime | None:
        """When the earliest pending fetch is due, or None."""
        async with self._pool.acquire() as conn:
            return await store.next_fetch_due_at(conn)

    async def _attempt(self, row: AttachmentRow) -> None:
        try:
            outcome, reason = await self._fetch(row)
        except Exception as exc:  # a bug of ours: keep the row, retry later, keep the worker
            log.exception("fetch of attachment %s from %s failed", row.id, row.source_url)
            outcome, reason = "retry", f"internal error: {type(exc).__name__}"
        await self._record(row, outcome, reason)

    async def _fetch(self, row: AttachmentRow) -> Outcome:
        assert row.source_url is not None
        cap = self._settings.attachment_max_bytes
        declared = row.size_bytes or 0
        if declared > cap:
            return "failed", f"declared {declared} bytes, over the {cap}-byte limit"
        if urlsplit(row.source_url).scheme != "https" and not self._settings.allow_http_dids:
            return "failed", "the file's URL is not https"
        async with self._pool.acquire() as conn:
            owner = await users_store.get_user(conn, id=row.user_id)
        if owner is None:
            return "failed", "the copy's owner is gone"
        timeout = self._settings.attachment_fetch_timeout_seconds
        request = self._request(row.source_url, owner.did)
        try:
            async with asyncio.timeout(timeout):
                response = await self._policy.send(self._client, request)
                try:
                    return await self._store(row, response)
                finally:
                    await response.aclose()
        except TimeoutError:
            return "retry", f"not complete within {timeout:g} s"
        except AddressRefusedError as exc:
            return "failed", f"refused by the outbound address policy: {exc.detail}"
        except DIDResolutionError as exc:
            return "retry", exc.detail
        except StorageUnavailableError as exc:  # our store, not the peer: ask again later
            return "retry", exc.detail
        except (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL) as exc:
            return "retry", f"{type(exc).__name__}: {exc}"

    def _request(self, url: str, did: str) -> httpx.Request:
        """The GET signed as ``did`` (RFC 9421 over the real URL)."""
        request = self._client.build_request("GET", url, headers={"Accept-Encoding": "identity"})
        signer = self._identity.signer_for(did, FETCH_COMPONENTS)
        request.headers.update(signer.headers_for("GET", str(request.url), request.headers, b""))
        return request

    async def _store(self, row: AttachmentRow, response: httpx.Response) -> Outcome:
        status = response.status_code
        if status != 200:
            final = status < 500 and status not in RETRIED_STATUSES
            return ("failed" if final else "retry"), f"the sender answered HTTP {status}"
        declared = row.size_bytes or 0
        chunks = _chunks(response)

        async def read(_: int) -> bytes:
            return await anext(chunks, b"")

        try:
            size, sha256, url = await self._storage.save(new_id(), read, max_bytes=declared)
        except PayloadTooLargeError:
            return "failed", f"more than the declared {declared} bytes"
        if size != declared or sha256 != row.sha256:
            await self._storage.delete(url)
            return "failed", f"the bytes do not match the declared size and SHA-256 ({sha256})"
        async with self._pool.acquire() as conn:
            kept = await store.complete_fetch(conn, id=row.id, storage_url=url)
        if not kept:  # the message was deleted while we fetched
            await self._storage.delete(url)
        return "fetched", None

    async def _record(self, row: AttachmentRow, outcome: str, reason: str | None) -> None:
        if outcome == "fetched":
            next_at = None
        elif outcome == "retry" and (row.fetch_attempts or 0) + 1 < self._max_attempts:
            delay = min(RETRY_CAP, RETRY_BASE * 2.0 ** (row.fetch_attempts or 0))
            next_at = self._clock.now() + timedelta(seconds=delay)
        else:
            outcome, next_at = "failed", None
        async with transaction(self._pool) as tx:
            if outcome != "fetched":
                await store.update_fetch_failure(
                    tx.conn, id=row.id, error=reason or outcome, next_at=next_at
                )
            if next_at is None and row.message_id is not None:
                # a remote member's post in a group homed here waited for its file: relay it
                # now, with the file, or without it once the file failed for good
                await federation.relay_fetched(tx.conn, message_id=row.message_id)
            await audit_store.insert_audit(
                tx.conn,
                action="federation.outbound",
                user_id=row.user_id,
                details={
                    "method": "GET attachment",
                    "attachment_id": row.id,
                    "url": (row.source_url or "")[:512],
                    "origin": row.origin_did,
                    "outcome": outcome,
                    "reason": (reason or "")[:500] or None,
                },
            )
        if outcome == "failed":
            log.warning("attachment %s from %s failed: %s", row.id, row.source_url, reason)

    @property
    def _max_attempts(self) -> int:
        return self._settings.attachment_fetch_max_attempts


async def _chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The raw body (identity was asked: nothing to decompress), in the transport's chunks."""
    async for chunk in response.aiter_raw():
        if chunk:
            yield chunk
