"""Outbound federation delivery: the durable outbox, one request in flight per destination.

Rows are leased (``claim_due``) so several gateway processes can share the outbox; only the
oldest pending row of each destination is eligible, which keeps per-destination order. A
``NOTIFY confer_outbox`` from the sending transaction wakes the worker at once; otherwise it
sleeps until the earliest due head of any destination (a parked one's until its next probe):
rows waiting behind a head never wake it, so peers that are down cost nothing between attempts.

Every request (deliveries and parked-destination probes alike) goes through the process's
``did.outbound.OutboundPolicy``, the one DID resolution uses: the endpoint's host must resolve
to public addresses only (unless ``CONFER_ALLOW_PRIVATE_NETWORKS`` or
``CONFER_OUTBOUND_ALLOWED_NETWORKS``) and the request is pinned to a checked address. The
answer is read up to :data:`ANSWER_MAX_BYTES`, and the whole attempt (DNS, connect, body) has
one deadline, ``outbound_timeout_seconds``: a peer that never finishes its answer costs one
attempt, not the worker.

Outcome of one attempt (Mastodon/Matrix practice, DESIGN "Lessons"); :func:`classify` maps
*any* answer to one of them and never raises:
- 2xx with a JSON-RPC ``result`` → delivered.
- connection errors, timeouts, 5xx, 401, 408, 429 → retry with exponential backoff (1 s
  doubling, capped at 10 minutes; ``Retry-After`` honoured).
- a refusal by the address policy → retry, so the destination is soon parked: nothing is ever
  posted to the forbidden address (the check runs again before every attempt), and a name that
  points back to a public address later (a DNS mistake, a rebinding attempt that stopped)
  delivers then, in order, instead of losing the queue. The audit row says why.
- 3xx (redirects are never followed: the target was not checked), other 4xx, a 2xx whose body
  is not a JSON object (too large, not UTF-8, invalid JSON, an array, a string, a number), or a
  JSON-RPC ``error`` → failed for good.
- anything else going wrong while sending (a bug) → logged, retry.
- a peer the instance federation policy refuses (checked before every attempt) → failed for
  good, nothing sent; the reason names the list entry.

A destination that fails ``delivery_park_after_failures`` times in a row (or whose head row
reached ``delivery_max_attempts``) is parked: its deliveries stay queued, in order, and only a
probe is sent every ``delivery_probe_seconds``. It resumes at once when a probe succeeds or when
the peer contacts us (any verified inbound request from it, :func:`resume_destination`).
Every attempt leaves an ``audit_log`` row (``federation.outbound``) and, for a message's own
send, a ``message.delivery_updated`` event for its sender, in the transaction that records it.

With a tracer (``CONFER_OTLP_ENDPOINT``, :mod:`gateway.tracing`), every attempt is a ``CLIENT``
span, child of the request that queued the row (its trace context is kept with the row), and
the request carries that span's ``traceparent``/``tracestate``, covered by the signature.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import asyncpg
import httpx
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from a2a.confer import absolute_file_urls
from did.errors import AddressRefusedError, DIDResolutionError
from did.outbound import OutboundPolicy, read_capped
from did.resolver import parse_json_object
from gateway.clock import Clock
from gateway.db import Pool, transaction
from gateway.metrics import DELIVERIES
from gateway.realtime.hub import EventHub
from gateway.services.deliveries import announce_delivery
from gateway.services.federation_policy import FederationPolicy
from gateway.services.identity import Identity
from gateway.settings import Settings
from gateway.store import audit as audit_store
from gateway.store import federation as store
from gateway.tracing import carrier_of, parent_context
from gateway.workers.draining import DrainingWorker

log = logging.getLogger(__name__)

A2A_VERSION = "1.0"
BACKOFF_BASE = 1.0
BACKOFF_CAP = 600.0
IDLE_WAIT = 5.0
ANSWER_MAX_BYTES = 64 * 1024


def backoff_seconds(attempts: int, retry_after: float | None = None) -> float:
    """Delay before attempt ``attempts + 1``: 1 s doubling per attempt, capped at 10 min."""
    delay: float = min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** max(0, attempts - 1))
    return max(delay, min(retry_after or 0.0, BACKOFF_CAP * 6))


def _retry_after(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after", "")
    return float(value) if value.isascii() and value.isdigit() else None


def classify(status: int, body: bytes | None) -> tuple[str, str]:
    """``("delivered" | "retry" | "failed", reason)`` for one HTTP answer; never raises.

    ``body`` is the answer's body, or None when it exceeded :data:`ANSWER_MAX_BYTES`.
    """
    if 200 <= status < 300:
        return _classify_success(status, body)
    if status in (401, 408, 429) or status >= 500:
        return "retry", f"HTTP {status}"
    if 300 <= status < 400:
        return "failed", f"HTTP {status}: redirects are not followed"
    return "failed", f"HTTP {status}: {_excerpt(body)}"


def _classify_success(status: int, body: bytes | None) -> tuple[str, str]:
    if body is None:
        return "failed", f"HTTP {status} with an answer over {ANSWER_MAX_BYTES} bytes"
    try:
        answer = parse_json_object(body, "the answer")
    except DIDResolutionError as exc:  # not UTF-8, not JSON, not an object, too deep
        return "failed", f"HTTP {status}: {exc.detail}"
    if "result" in answer:
        return "delivered", f"HTTP {status}"
    if "error" in answer:
        return "failed", f"JSON-RPC error: {json.dumps(answer['error'])[:300]}"
    return "failed", f"HTTP {status}: a JSON object with neither result nor error"


def _excerpt(body: bytes | None) -> str:
    if body is None:
        return f"(an answer over {ANSWER_MAX_BYTES} bytes)"
    return body[:300].decode("utf-8", errors="replace")


class DeliveryWorker(DrainingWorker):
    """Drains ``federation_outbox``; run one per process with :meth:`run` (supervised).

    ``policy`` is the outbound address policy (module docstring); the default one is on.
    With ``hub``, every recorded attempt reaches the sender's devices as a
    ``message.delivery_updated`` event (:mod:`gateway.services.deliveries`). With ``tracer``,
    every attempt is a span (module docstring).
    """

    channel = "confer_outbox"
    label = "delivery"
    idle_wait = IDLE_WAIT

    def __init__(
        self,
        pool: Pool,
        client: httpx.AsyncClient,
        identity: Identity,
        clock: Clock,
        settings: Settings,
        policy: OutboundPolicy | None = None,
        hub: EventHub | None = None,
        federation_policy: FederationPolicy | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        super().__init__(pool, client, identity, clock, settings, policy or OutboundPolicy())
        self._federation = federation_policy
        self._tracer = tracer
        self._hub = hub

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

    async def next_due_at(self) -> datetime | None:
        """When the earliest head of any destination is due (a parked one's at its next
        probe), or None."""
        async with self._pool.acquire() as conn:
            return await store.next_due_at(
                conn, probe_interval=timedelta(seconds=self._settings.delivery_probe_seconds)
            )

    async def _attempt(self, row: store.OutboxRow) -> None:
        span = self._start_span(row)
        try:
            outcome, reason, retry_after = await self._post(row, span)
        except Exception as exc:  # a bug of ours: keep the row, back off, keep the worker
            log.exception("delivery %s to %s failed unexpectedly", row.id, row.endpoint)
            outcome, reason, retry_after = "retry", f"internal error: {type(exc).__name__}", None
        if span is not None:
            span.set_attribute("confer.delivery.outcome", outcome)
            if outcome != "delivered":
                span.set_status(Status(StatusCode.ERROR, reason))
            span.end()
        await self._record(row, outcome, reason, retry_after)

    def _start_span(self, row: store.OutboxRow) -> trace.Span | None:
        """The attempt's ``CLIENT`` span, child of the request that queued ``row``."""
        if self._tracer is None:
            return None
        url = urlsplit(row.endpoint)
        return self._tracer.start_span(
            "SendMessage",
            context=parent_context(row.trace_context),
            kind=SpanKind.CLIENT,
            attributes={
                "rpc.system": "jsonrpc",
                "rpc.method": "SendMessage",
                "http.request.method": "POST",
                "server.address": url.hostname or "",
                "server.port": url.port or (443 if url.scheme == "https" else 80),
                "confer.delivery.attempt": row.attempts,
            },
        )

    async def _post(
        self, row: store.OutboxRow, span: trace.Span | None = None
    ) -> tuple[str, str, float | None]:
        """Send one delivery; ``(outcome, reason, retry_after)`` (module docstring)."""
        refused = self._refusal(row)
        if refused is not None:
            return "failed", refused, None
        timeout = self._settings.outbound_timeout_seconds
        trace_fields = carrier_of(span) if span is not None else {}
        try:
            async with asyncio.timeout(timeout):
                request = self._request(row, trace_fields)
                response = await self._policy.send(self._client, request)
                try:
                    body = await read_capped(response, ANSWER_MAX_BYTES)
                finally:
                    await response.aclose()
        except TimeoutError:
            return "retry", f"no complete answer within {timeout:g} s", None
        except AddressRefusedError as exc:
            log.warning("delivery to %s refused by the address policy: %s", row.endpoint, exc)
            return "retry", f"refused by the outbound address policy: {exc.detail}", None
        except DIDResolutionError as exc:  # the host does not resolve
            return "retry", exc.detail, None
        except (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL) as exc:
            return "retry", f"{type(exc).__name__}: {exc}", None
        if span is not None:
            span.set_attribute("http.response.status_code", response.status_code)
        outcome, reason = classify(response.status_code, body)
        return outcome, reason, _retry_after(response.headers)

    def _refusal(self, row: store.OutboxRow) -> str | None:
        """Why the instance federation policy forbids this delivery, or None: it is checked at
        every attempt, so a peer denied after the message was queued is never sent it."""
        if self._federation is None or row.peer_did is None:
            return None
        verdict = self._federation.verdict(row.peer_did)
        if verdict.allowed:
            return None
        return f"refused by this instance's federation policy: {verdict.reason}"

    def _request(
        self, row: store.OutboxRow, trace_fields: dict[str, str] | None = None
    ) -> httpx.Request:
        """The signed ``SendMessage`` POST for ``row`` (RFC 9421 over its real URL); the
        ``trace_fields`` (``traceparent``, ``tracestate``) are sent and signed too."""
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": row.id,
                "method": "SendMessage",
                # a file part's path-only URL is on our public origin
                "params": absolute_file_urls(row.payload_json, self._identity.public_url),
            },
            separators=(",", ":"),
        ).encode()
        headers = {
            "Content-Type": "application/json",
            "A2A-Version": A2A_VERSION,
            "Accept-Encoding": "identity",
            **(trace_fields or {}),
        }
        request = self._client.build_request(
            "POST",
            row.endpoint,
            content=body,
            headers=headers,
            timeout=self._settings.outbound_timeout_seconds,
        )
        signer = self._identity.signer_for(row.sender_did)
        request.headers.update(
            signer.headers_for(request.method, str(request.url), request.headers, body)
        )
        return request

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
        async with transaction(self._pool) as tx:
            conn = tx.conn
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
            if self._hub is not None:  # the event commits with the state it reports
                await announce_delivery(tx, self._hub, row.id)
        DELIVERIES.labels(outcome).inc()


async def resume_destination(pool: asyncpg.Pool, clock: Clock, endpoint: str) -> bool:
    """A peer reached us: unpark its destination and send what is queued for it now."""
    destination = urlsplit(endpoint).netloc.lower()
    async with pool.acquire() as conn, conn.transaction():
        return await store.clear_destination(conn, destination=destination, now=clock.now())
