"""A2A push notifications: the supervised worker that delivers ``a2a_push_outbox`` rows.

Each row is one ``StreamResponse`` (``{"task": …}`` or ``{"statusUpdate": …}``) queued for one
``TaskPushNotificationConfig`` in the transaction that changed the task
(:func:`gateway.services.tasks.record_update`). One attempt POSTs it to the config's URL
(A2A 1.0 §4.3, protocols.md §4.6):

- ``Content-Type: application/a2a+json``, the body the StreamResponse JSON;
- ``X-A2A-Notification-Token: <token>`` when the config has a token, and
  ``Authorization: <scheme> <credentials>`` when it names an ``authentication`` scheme with
  credentials (e.g. ``Bearer``);
- when the task's caller is a Confer peer (``peer:<did>``), an RFC 9421 signature (with
  RFC 9530 ``Content-Digest``) by the key of the DID the task was addressed to, so the peer
  can tell the notification is ours;
- through the outbound address policy (:class:`did.outbound.OutboundPolicy`: the host must
  resolve to public addresses unless ``CONFER_ALLOW_PRIVATE_NETWORKS``; the request is pinned
  to a checked address), never following redirects, the answer read up to
  :data:`ANSWER_MAX_BYTES` only when it is an error (for its reason), the whole attempt
  within ``outbound_timeout_seconds``.

Any 2xx delivers (the row is deleted, the config's failure count starts over). Anything else
— another status, a refusal by the address policy, a timeout, a connection error, an answer
that never ends, a bug of ours — is a failure: the row is retried after
``a2a_push_backoff_base_seconds`` doubling per attempt (capped at 10 minutes, ``Retry-After``
honoured within that cap), and at ``a2a_push_disable_after_failures`` consecutive failures the
config is disabled and what is queued for it fails. A config's rows go out in order, one at a
time. Every attempt is counted on the config (``failures``, ``lastError``), which Get/List show.
Nothing a receiver answers can stop the worker.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime, timedelta

import asyncpg
import httpx

from did.errors import AddressRefusedError, DIDResolutionError
from did.outbound import read_capped
from gateway.db import transaction
from gateway.errors import DatabaseBusyError
from gateway.store import a2a_push as store
from gateway.store import audit as audit_store
from gateway.workers.draining import DrainingWorker

log = logging.getLogger(__name__)

ANSWER_MAX_BYTES = 16 * 1024
BACKOFF_CAP = 600.0
IDLE_WAIT = 5.0
CLAIM_LIMIT = 32
TOKEN_HEADER = "X-A2A-Notification-Token"
MEDIA_TYPE = "application/a2a+json"


def backoff_seconds(attempts: int, base: float, retry_after: float | None = None) -> float:
    """Delay after failed attempt ``attempts`` (1-based): ``base`` doubling, capped at 10 min;
    a receiver's ``Retry-After`` is honoured up to the cap."""
    delay = min(BACKOFF_CAP, base * 2.0 ** max(0, attempts - 1))
    return max(delay, min(retry_after or 0.0, BACKOFF_CAP))


class PushWorker(DrainingWorker):
    """Drains ``a2a_push_outbox``; run one per process with :meth:`run` (supervised).

    Several processes may run it on one database: rows are leased when claimed.
    """

    channel = store.PUSH_CHANNEL
    label = "a2a-push"
    min_wait = 0.05

    async def run_once(self) -> bool:
        """Claim and attempt every due head-of-queue notification; True when there were any."""
        self._wake.clear()
        lease = timedelta(seconds=self._settings.outbound_timeout_seconds * 2 + 5)
        async with self._pool.acquire() as conn:
            rows = await store.claim_due(
                conn, now=self._clock.now(), lease=lease, limit=CLAIM_LIMIT
            )
        if rows:
            await asyncio.gather(*(self._attempt(row) for row in rows))
        return bool(rows)

    async def next_due_at(self) -> datetime | None:
        """When the earliest pending notification is due, or None."""
        async with self._pool.acquire() as conn:
            return await store.next_due_at(conn)

    async def _attempt(self, row: store.PushDeliveryRow) -> None:
        try:
            error, retry_after = await self._post(row)
        except Exception as exc:  # a bug of ours: count it, back off, keep the worker
            log.exception("push notification %s to %s failed unexpectedly", row.id, row.url)
            error, retry_after = f"internal error: {type(exc).__name__}", None
        try:
            await self._record(row, error, retry_after)
        except (asyncpg.PostgresError, OSError, DatabaseBusyError) as exc:
            # the lease runs out and the row is attempted again
            log.warning("push worker: could not record %s: %s", row.id, exc)

    async def _post(self, row: store.PushDeliveryRow) -> tuple[str | None, float | None]:
        """Send one notification; ``(None, …)`` when delivered, else ``(reason, retry_after)``."""
        timeout = self._settings.outbound_timeout_seconds
        try:
            async with asyncio.timeout(timeout):
                response = await self._policy.send(self._client, self._request(row))
                try:  # a 2xx body means nothing here; an error's start explains it
                    ok = 200 <= response.status_code < 300
                    body = None if ok else await read_capped(response, ANSWER_MAX_BYTES)
                finally:
                    await response.aclose()
        except TimeoutError:
            return f"no complete answer within {timeout:g} s", None
        except AddressRefusedError as exc:
            return f"refused by the outbound address policy: {exc.detail}", None
        except DIDResolutionError as exc:  # the host does not resolve
            return exc.detail, None
        except (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL) as exc:
            return f"{type(exc).__name__}: {exc}"[:300], None
        status = response.status_code
        if 200 <= status < 300:
            return None, None
        excerpt = (body or b"")[:200].decode("utf-8", errors="replace")
        retry_after = response.headers.get("retry-after", "")
        wait = float(retry_after) if retry_after.isascii() and retry_after.isdigit() else None
        reason = f"HTTP {status}" + (": redirects are not followed" if status < 400 else "")
        return (f"{reason}: {excerpt}" if excerpt and status >= 400 else reason), wait

    def _request(self, row: store.PushDeliveryRow) -> httpx.Request:
        """The POST of ``row``'s StreamResponse with the config's credentials (module doc)."""
        body = json.dumps(row.payload_json, separators=(",", ":")).encode()
        headers = {"Content-Type": MEDIA_TYPE, "Accept-Encoding": "identity"}
        if row.token is not None:
            headers[TOKEN_HEADER] = row.token
        if row.auth_scheme and row.auth_credentials:
            headers["Authorization"] = f"{row.auth_scheme} {row.auth_credentials}"
        request = self._client.build_request(
            "POST",
            row.url,
            content=body,
            headers=headers,
            timeout=self._settings.outbound_timeout_seconds,
        )
        if row.caller.startswith("peer:"):  # a Confer peer verifies who notifies it
            signer = self._identity.signer_for(row.recipient_did)
            request.headers.update(
                signer.headers_for(request.method, str(request.url), request.headers, body)
            )
        return request

    async def _record(
        self, row: store.PushDeliveryRow, error: str | None, retry_after: float | None
    ) -> None:
        now = self._clock.now()
        disabled = False
        async with transaction(self._pool) as tx:
            if error is None:
                await store.mark_delivered(tx.conn, row)
            else:
                delay = backoff_seconds(
                    row.attempts, self._settings.a2a_push_backoff_base_seconds, retry_after
                )
                disabled = await store.record_failure(
                    tx.conn,
                    row,
                    now=now,
                    error=error[:500],
                    next_attempt_at=now + timedelta(seconds=delay),
                    disable_after=self._settings.a2a_push_disable_after_failures,
                )
            await audit_store.insert_audit(
                tx.conn,
                action="a2a.push",
                details={
                    "task_id": row.task_id,
                    "config_id": row.config_id,
                    "url": row.url[:512],
                    "attempt": row.attempts,
                    "outcome": "delivered" if error is None else "failed",
                    "reason": error[:500] if error else None,
                    "disabled": disabled,
                },
            )
        if disabled:
            log.warning("push config %s of task %s disabled: %s", row.config_id, row.task_id, error)
