"""Outbound federation delivery: the durable outbox, one request in flight per destination.

Rows are leased (``claim_due``) so several gateway processes can share the outbox; only the
oldest pending row of each destination is eligible, which keeps per-destination order. A
``NOTIFY confer_outbox`` from the sending transaction wakes the worker at once; otherwise it
sleeps until the next retry is due.

Outcome of one attempt (Mastodon/Matrix practice, DESIGN "Lessons"):
- 2xx with a JSON-RPC ``result`` → delivered.
- connection errors, 5xx, 401, 408, 429 → retry with exponential backoff (1 s doubling, capped
  at 10 minutes; ``Retry-After`` honoured).
- other 4xx, or a JSON-RPC ``error`` → failed for good.

A destination that fails ``delivery_park_after_failures`` times in a row (or whose head row
reached ``delivery_max_attempts``) is parked: its deliveries stay queued, in order, and only a
probe is sent every ``delivery_probe_seconds``. It resumes at once when a probe succeeds or when
the peer contacts us (any verified inbound request from it, :func:`resume_destination`).
Every attempt leaves an ``audit_log`` row (``federation.outbound``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx

from a2a.auth import SignatureAuth
from gateway.clock import Clock
from gateway.services.identity import Identity
from gateway.settings import Settings
from gateway.store import audit as audit_store
from gateway.store import federation as store

log = logging.getLogger(__name__)

A2A_VERSION = "1.0"
BACKOFF_BASE = 1.0
BACKOFF_CAP = 600.0
IDLE_WAIT = 5.0


def backoff_seconds(attempts: int, retry_after: float | None = None) -> float:
    """Delay before attempt ``attempts + 1``: 1 s doubling per attempt, capped at 10 min."""
    delay: float = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** max(0, attempts - 1))
    return max(delay, min(retry_after or 0.0, BACKOFF_CAP * 6))


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    return float(value) if value.isdigit() else None


def classify(response: httpx.Response) -> tuple[str, str]:
    """``("delivered" | "retry" | "failed", reason)`` for one HTTP answer."""
    status = response.status_code
    if 200 <= status < 300:
        try:
            body = response.json()
        except ValueError:
            return "failed", f"HTTP {status} with a body that is not JSON"
        if isinstance(body, dict) and "result" in body:
            return "delivered", f"HTTP {status}"
        return "failed", f"JSON-RPC error: {json.dumps(body.get('error'))[:300]}"
    if status in (401, 408, 429) or status >= 500:
        return "retry", f"HTTP {status}"
    return "failed", f"HTTP {status}: {response.text[:300]}"


class DeliveryWorker:
    """Drains ``federation_outbox``; run one per process with :meth:`run`."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        client: httpx.AsyncClient,
        identity: Identity,
        clock: Clock,
        settings: Settings,
    ) -> None:
        self._pool = pool
        self._client = client
        self._identity = identity
        self._clock = clock
        self._settings = settings
        self._wake = asyncio.Event()

    def wake(self, *_: Any) -> None:
        """Ask the worker to look for due deliveries now."""
        self._wake.set()

    async def run(self) -> None:
        """Deliver until cancelled."""
        async with self._pool.acquire() as listener:
            await listener.add_listener("confer_outbox", self.wake)
            try:
                while True:
                    await self._run_once_safely()
            finally:
                with contextlib.suppress(Exception):
                    await listener.remove_listener("confer_outbox", self.wake)

    async def _run_once_safely(self) -> None:
        try:
            delivered_any = await self.run_once()
        except (asyncpg.PostgresError, OSError) as exc:
            log.warning("delivery worker: database error: %s", exc)
            delivered_any = False
        if not delivered_any:
            await self._sleep()

    async def run_once(self) -> bool:
        """Claim and attempt every due head-of-queue delivery; True when there were any."""
        self._wake.clear()
        lease = timedelta(seconds=self._settings.outbound_timeout_seconds * 2 + 5)
        async with self._pool.acquire() as conn:
            rows = await store.claim_due(
                conn,
                now=self._clock.now(),
                lease=lease,
                limit=50,
                probe_interval=timedelta(seconds=self._settings.delivery_probe_seconds),
            )
        if rows:
            await asyncio.gather(*(self._attempt(row) for row in rows))
        return bool(rows)

    async def _sleep(self) -> None:
        async with self._pool.acquire() as conn:
            due = await store.next_due_at(conn)
        wait = IDLE_WAIT
        if due is not None:
            wait = min(IDLE_WAIT, max(0.0, (due - self._clock.now()).total_seconds()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=wait)

    async def _attempt(self, row: store.OutboxRow) -> None:
        body = json.dumps(
            {"jsonrpc": "2.0", "id": row.id, "method": "SendMessage", "params": row.payload_json},
            separators=(",", ":"),
        ).encode()
        headers = {"Content-Type": "application/json", "A2A-Version": A2A_VERSION}
        auth = SignatureAuth(self._identity.signer_for(row.sender_did))
        retry_after = None
        try:
            response = await self._client.post(
                row.endpoint,
                content=body,
                headers=headers,
                auth=auth,
                timeout=self._settings.outbound_timeout_seconds,
            )
            outcome, reason = classify(response)
            retry_after = _retry_after(response)
        except httpx.HTTPError as exc:
            outcome, reason = "retry", f"{type(exc).__name__}: {exc}"
        await self._record(row, outcome, reason, retry_after)

    async def _retry_or_park(
        self,
        conn: asyncpg.Connection,
        row: store.OutboxRow,
        reason: str,
        retry_after: float | None,
    ) -> tuple[str, str]:
        """Schedule a retry, or park the destination when it keeps failing."""
        now = self._clock.now()
        failures = await store.record_destination_failure(
            conn, destination=row.destination, now=now, error=reason
        )
        settings = self._settings
        if failures >= settings.delivery_park_after_failures or (
            row.attempts >= settings.delivery_max_attempts
        ):
            await store.park_destination(conn, destination=row.destination, now=now)
            await store.mark_retry(conn, id=row.id, next_attempt_at=now, error=reason)
            return "parked", reason
        delay = backoff_seconds(row.attempts, retry_after)
        await store.mark_retry(
            conn, id=row.id, next_attempt_at=now + timedelta(seconds=delay), error=reason
        )
        return "retry", reason

    async def _record(
        self, row: store.OutboxRow, outcome: str, reason: str, retry_after: float | None
    ) -> None:
        now = self._clock.now()
        async with self._pool.acquire() as conn, conn.transaction():
            if outcome == "retry":
                outcome, reason = await self._retry_or_park(conn, row, reason, retry_after)
            elif outcome == "delivered":
                await store.mark_delivered(conn, id=row.id, now=now)
                await store.clear_destination(conn, destination=row.destination, now=now)
            else:
                await store.mark_failed(conn, id=row.id, now=now, error=reason)
                await store.clear_destination(conn, destination=row.destination, now=now)
            await audit_store.insert_audit(
                conn,
                action="federation.outbound",
                details={
                    "method": "SendMessage",
                    "endpoint": row.endpoint,
                    "message_id": row.message_id,
                    "attempt": row.attempts,
                    "outcome": outcome,
                    "reason": reason,
                },
            )


async def resume_destination(pool: asyncpg.Pool, clock: Clock, endpoint: str) -> bool:
    """A peer reached us: unpark its destination and send what is queued for it now."""
    destination = urlsplit(endpoint).netloc.lower()
    async with pool.acquire() as conn, conn.transaction():
        return await store.clear_destination(conn, destination=destination, now=clock.now())
