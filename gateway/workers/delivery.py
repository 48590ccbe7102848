"""Outbound federation delivery: the durable outbox, in order per conversation.

Rows are leased (:func:`gateway.store.outbox_batches.claim_batches`) so several gateway
processes can share the outbox. Order holds per destination and conversation (the row's
``lane``): up to ``federation_batch_concurrency`` requests are in flight to one healthy
destination, never two with rows of the same conversation, and a destination that declares
Confer's batch extension (:mod:`a2a.batch`, read from its Agent Card at most every
:data:`CARD_TTL` seconds) gets up to ``federation_batch_max_items`` rows in one JSON-RPC batch,
signed once (:mod:`gateway.workers.delivery_plan` packs them). A failing or parked destination
gets its oldest row only, one request at a time. A ``NOTIFY confer_outbox`` from the sending
transaction, or a finished request, wakes the worker at once; otherwise it sleeps until the
earliest claimable head (a parked destination's at its next probe): rows waiting behind a head
never wake it, so peers that are down cost nothing between attempts.

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
- a batch: each call's own answer decides its row (:func:`a2a.batch.item_outcomes`: a
  ``result`` → delivered, an ``error`` → failed, ``-32603`` or no answer → retry); an answer
  that applies to the whole request (connection error, 401/408/429/5xx) applies to every row;
  any other answer that is not a JSON array means the peer did not take the batch: every row
  is retried and the destination is sent single requests until its card is read again.
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
from collections import Counter
from collections.abc import Coroutine, Mapping
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from a2a.batch import item_outcomes
from a2a.confer import answered_position
from did.errors import AddressRefusedError, DIDResolutionError
from did.outbound import OutboundPolicy, read_capped
from did.resolver import parse_json_object
from gateway.clock import Clock
from gateway.db import Pool, transaction
from gateway.metrics import DELIVERIES
from gateway.realtime.hub import EventHub
from gateway.services import group_order
from gateway.services.deliveries import announce_deliveries
from gateway.services.federation_policy import FederationPolicy
from gateway.services.identity import Identity
from gateway.settings import Settings
from gateway.store import audit as audit_store
from gateway.store import federation as store
from gateway.store import outbox_batches as batches_store
from gateway.tracing import carrier_of, parent_context
from gateway.workers.delivery_plan import Batch, batch_elements, json_or_none, plan, rpc_call
from gateway.workers.draining import DrainingWorker
from gateway.workers.peer_cards import PeerCards

log = logging.getLogger(__name__)

A2A_VERSION = "1.0"
BACKOFF_BASE = 1.0
BACKOFF_CAP = 600.0
IDLE_WAIT = 5.0
ANSWER_MAX_BYTES = 64 * 1024
CLAIM_LIMIT = 500
"""The most rows one claim leases (over every destination)."""
MAX_REQUESTS_IN_FLIGHT = 64
"""The most requests (and card reads) this process has in flight at once."""


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
    outcome, reason, _ = _classified(status, body)
    return outcome, reason


def _classified(status: int, body: bytes | None) -> tuple[str, str, dict[str, Any] | None]:
    """:func:`classify`, and the JSON-RPC response it read (a 2xx answer that is a JSON
    object), so the caller reads its ``result`` without parsing the body again."""
    if 200 <= status < 300:
        return _classify_success(status, body)
    if status in (401, 408, 429) or status >= 500:
        return "retry", f"HTTP {status}", None
    if 300 <= status < 400:
        return "failed", f"HTTP {status}: redirects are not followed", None
    return "failed", f"HTTP {status}: {_excerpt(body)}", None


def _classify_success(status: int, body: bytes | None) -> tuple[str, str, dict[str, Any] | None]:
    if body is None:
        return "failed", f"HTTP {status} with an answer over {ANSWER_MAX_BYTES} bytes", None
    try:
        answer = parse_json_object(body, "the answer")
    except DIDResolutionError as exc:  # not UTF-8, not JSON, not an object, too deep
        return "failed", f"HTTP {status}: {exc.detail}", None
    if "result" in answer:
        return "delivered", f"HTTP {status}", answer
    if "error" in answer:
        return "failed", f"JSON-RPC error: {json.dumps(answer['error'])[:300]}", answer
    return "failed", f"HTTP {status}: a JSON object with neither result nor error", answer


def _excerpt(body: bytes | None) -> str:
    if body is None:
        return f"(an answer over {ANSWER_MAX_BYTES} bytes)"
    return body[:300].decode("utf-8", errors="replace")


class DeliveryWorker(DrainingWorker):
    """Drains ``federation_outbox``; run one per process with :meth:`run` (supervised).

    ``policy`` is the outbound address policy (module docstring); the default one is on.
    With ``hub``, every recorded attempt reaches the sender's devices as a
    ``message.delivery_updated`` event (:mod:`gateway.services.deliveries`). With ``tracer``,
    every request is a span (module docstring). Requests run as tasks of this worker; the
    number in flight per destination is counted in this process.
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
        self._in_flight: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()
        self._cards = PeerCards(client, self._policy, settings, pool, clock)
        # What woke the worker since its last claim: the destinations named by NOTIFYs and
        # finished requests, or "anything" (start, a timer, a wake that names nothing, a
        # claim that hit its limit, an error). A claim only runs when one of them may have
        # something to claim (see run_once).
        self._woken: set[str] = set()
        self._claim_all = True
        self._due: datetime | None = None
        self._due_known = False

    def wake(self, *args: Any) -> None:
        """Ask the worker to look for due work now; also asyncpg's listener callback
        ``(connection, pid, channel, payload)``, whose payload names the destination that
        has new work (every ``NOTIFY confer_outbox`` does)."""
        payload = args[3] if len(args) == 4 else None
        if isinstance(payload, str) and payload:
            self._woken.add(payload)
        else:
            self._claim_all = True
        self._wake.set()

    def _claim_needed(self) -> bool:
        """Whether a claim may find anything, consuming what woke the worker: not when every
        destination woken since the last claim already has all its requests in flight from
        this process (the claim would skip it; the end of one of them wakes the worker)."""
        woken, self._woken = self._woken, set()
        claim_all, self._claim_all = self._claim_all, False
        limit = self._settings.federation_batch_concurrency
        return claim_all or any(self._in_flight[d] < limit for d in woken)

    async def run(self) -> None:
        """Drain until cancelled; requests still in flight are cancelled with it (their
        leases lapse and the rows are sent again: receivers de-duplicate by ``messageId``)."""
        try:
            await super().run()
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def run_once(self) -> bool:
        """Claim what may be sent now and start its requests; True when there was any."""
        self._wake.clear()
        if len(self._tasks) >= MAX_REQUESTS_IN_FLIGHT:
            await self._wake.wait()  # a finished request wakes the worker
            return True
        if not self._claim_needed():
            return False  # sleep until the next wake or the known next due time
        self._due_known = False
        settings = self._settings
        lease = timedelta(seconds=settings.outbound_timeout_seconds * 2 + 5)
        try:
            async with self._pool.acquire() as conn:
                claimed = await batches_store.claim_batches(
                    conn,
                    now=self._clock.now(),
                    lease=lease,
                    probe_interval=timedelta(seconds=settings.delivery_probe_seconds),
                    max_items=settings.federation_batch_max_items,
                    concurrency=settings.federation_batch_concurrency,
                    in_flight=+self._in_flight,
                    limit=CLAIM_LIMIT,
                )
                free = {
                    c.row.destination: settings.federation_batch_concurrency
                    - self._in_flight[c.row.destination]
                    for c in claimed
                }
                planned, released = plan(claimed, free_slots=free)
                await batches_store.release(conn, ids=released)
        except BaseException:
            self._claim_all = True  # the next round claims again, whatever wakes it
            raise
        if len(claimed) >= CLAIM_LIMIT:  # it may have left claimable rows behind
            self._claim_all = True
        for batch in planned:
            self._in_flight[batch.destination] += 1
            self._start(self._send(batch))
        if settings.federation_batch_max_items > 1:
            for row in {c.row.destination: c.row for c in claimed}.values():
                if self._cards.stale(row.destination):
                    self._start(self._cards.refresh(row.destination, row.endpoint))
        return bool(planned)

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def next_due_at(self) -> datetime | None:
        """When the earliest claimable row is due (a parked destination's at its next
        probe), or None. Read again only after a claim: what changes it otherwise (a new
        row, a finished request) wakes the worker."""
        if not self._due_known:
            async with self._pool.acquire() as conn:
                self._due = await batches_store.next_due_at(
                    conn,
                    probe_interval=timedelta(seconds=self._settings.delivery_probe_seconds),
                    concurrency=self._settings.federation_batch_concurrency,
                    in_flight=+self._in_flight,
                )
            self._due_known = True
        return self._due

    async def _sleep(self) -> None:
        await super()._sleep()
        if not self._wake.is_set():  # the timer: rows may have come due anywhere
            self._claim_all = True

    async def _send(self, batch: Batch) -> None:
        """Send ``batch`` (one request), record every row's outcome, wake the worker."""
        try:
            if len(batch.rows) == 1:
                await self._attempt(batch.rows[0])
            else:
                await self._attempt_batch(batch)
        except Exception:  # e.g. the database while recording: the leases lapse, rows resent
            log.exception("delivery to %s: the outcome was not recorded", batch.destination)
        finally:
            self._in_flight[batch.destination] -= 1
            self._woken.add(batch.destination)  # a free slot, and perhaps rows to retry
            self._wake.set()

    async def _attempt(self, row: store.OutboxRow) -> None:
        span = self._start_span(row)
        positions: dict[str, str] = {}
        try:
            outcome, reason, retry_after, position = await self._post(row, span)
            if position is not None:
                positions[row.id] = position
        except Exception as exc:  # a bug of ours: keep the row, back off, keep the worker
            log.exception("delivery %s to %s failed unexpectedly", row.id, row.endpoint)
            outcome, reason, retry_after = "retry", f"internal error: {type(exc).__name__}", None
        self._end_span(span, outcome, reason)
        await self._record([(row, outcome, reason)], retry_after, positions)

    async def _attempt_batch(self, batch: Batch) -> None:
        """One signed JSON-RPC batch for ``batch``'s rows (as many as fit its byte limit; the
        rest are released unsent)."""
        ours = self._settings.federation_batch_max_bytes
        limit = min(batch.max_bytes or ours, ours)
        elements, sent = batch_elements(batch.rows, self._identity.public_url, limit)
        if len(sent) < len(batch.rows):
            async with self._pool.acquire() as conn:
                await batches_store.release(conn, ids=[r.id for r in batch.rows[len(sent) :]])
        if len(sent) == 1:
            await self._attempt(sent[0])
            return
        span = self._start_span(sent[0], len(sent))
        positions: dict[str, str] = {}
        try:
            outcomes, retry_after, positions = await self._post_batch(sent, elements, span)
        except Exception as exc:  # a bug of ours: keep the rows, back off, keep the worker
            log.exception("batch to %s failed unexpectedly", sent[0].endpoint)
            reason = f"internal error: {type(exc).__name__}"
            outcomes, retry_after = {r.id: ("retry", reason) for r in sent}, None
        worst = next(
            (o for o in ("retry", "failed") if any(v[0] == o for v in outcomes.values())),
            "delivered",
        )
        self._end_span(span, worst, "see each delivery")
        await self._record([(r, *outcomes[r.id]) for r in sent], retry_after, positions)

    def _start_span(self, row: store.OutboxRow, items: int = 1) -> trace.Span | None:
        """The request's ``CLIENT`` span, child of the request that queued ``row`` (the
        first of a batch)."""
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
                "confer.delivery.items": items,
            },
        )

    @staticmethod
    def _end_span(span: trace.Span | None, outcome: str, reason: str) -> None:
        if span is None:
            return
        span.set_attribute("confer.delivery.outcome", outcome)
        if outcome != "delivered":
            span.set_status(Status(StatusCode.ERROR, reason))
        span.end()

    async def _exchange(
        self, request: httpx.Request, endpoint: str, cap: int, span: trace.Span | None
    ) -> tuple[httpx.Response, bytes | None] | tuple[str, str]:
        """Post ``request`` under the outbound deadline: ``(response, body)`` (``body`` None
        when over ``cap`` bytes), or ``("retry", reason)`` when no answer came."""
        timeout = self._settings.outbound_timeout_seconds
        try:
            async with asyncio.timeout(timeout):
                response = await self._policy.send(self._client, request)
                try:
                    body = await read_capped(response, cap)
                finally:
                    await response.aclose()
        except TimeoutError:
            return "retry", f"no complete answer within {timeout:g} s"
        except AddressRefusedError as exc:
            log.warning("delivery to %s refused by the address policy: %s", endpoint, exc)
            return "retry", f"refused by the outbound address policy: {exc.detail}"
        except DIDResolutionError as exc:  # the host does not resolve
            return "retry", exc.detail
        except (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL) as exc:
            return "retry", f"{type(exc).__name__}: {exc}"
        if span is not None:
            span.set_attribute("http.response.status_code", response.status_code)
        return response, body

    async def _post(
        self, row: store.OutboxRow, span: trace.Span | None = None
    ) -> tuple[str, str, float | None, str | None]:
        """Send one delivery; ``(outcome, reason, retry_after, position)`` (module docstring;
        ``position`` is the one a group's home answered a post with, see :func:`_position`)."""
        refused = self._refusal(row)
        if refused is not None:
            return "failed", refused, None, None
        trace_fields = carrier_of(span) if span is not None else {}
        body = json.dumps(rpc_call(row, self._identity.public_url), separators=(",", ":"))
        request = self._request(row, body.encode(), trace_fields)
        answer = await self._exchange(request, row.endpoint, ANSWER_MAX_BYTES, span)
        if isinstance(answer[0], str):
            return answer[0], str(answer[1]), None, None
        response, content = answer
        assert isinstance(response, httpx.Response)
        outcome, reason, parsed = _classified(response.status_code, content)
        position = _position(parsed) if outcome == "delivered" else None
        return outcome, reason, _retry_after(response.headers), position

    async def _post_batch(
        self, rows: list[store.OutboxRow], elements: list[bytes], span: trace.Span | None
    ) -> tuple[dict[str, tuple[str, str]], float | None, dict[str, str]]:
        """Send ``rows`` as one batch; each row's ``(outcome, reason)``, ``Retry-After`` and
        the positions a group's home answered posts with (by row id, see :func:`_position`)."""
        outcomes: dict[str, tuple[str, str]] = {}
        sendable: list[tuple[store.OutboxRow, bytes]] = []
        for row, element in zip(rows, elements, strict=True):
            refused = self._refusal(row)
            if refused is not None:
                outcomes[row.id] = "failed", refused
            else:
                sendable.append((row, element))
        if not sendable:
            return outcomes, None, {}
        trace_fields = carrier_of(span) if span is not None else {}
        body = b"[" + b",".join(e for _, e in sendable) + b"]"
        request = self._request(sendable[0][0], body, trace_fields)
        cap = ANSWER_MAX_BYTES * len(sendable)
        answer = await self._exchange(request, sendable[0][0].endpoint, cap, span)
        ids = [r.id for r, _ in sendable]
        if isinstance(answer[0], str):
            return outcomes | {i: (answer[0], str(answer[1])) for i in ids}, None, {}
        response, content = answer
        assert isinstance(response, httpx.Response)
        status, retry_after = response.status_code, _retry_after(response.headers)
        if status in (401, 408, 429) or status >= 500:
            return outcomes | {i: ("retry", f"HTTP {status}") for i in ids}, retry_after, {}
        parsed = json_or_none(content) if 200 <= status < 300 else None
        per_item = item_outcomes(parsed, ids) if 200 <= status < 300 else None
        if per_item is None:  # the peer did not take it as a batch: single requests from now
            await self._cards.forget(sendable[0][0].destination)
            why = f"HTTP {status}: not answered as a batch; sending single requests"
            return outcomes | {i: ("retry", why) for i in ids}, retry_after, {}
        return outcomes | per_item, retry_after, _batch_positions(parsed, per_item)

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
        self, row: store.OutboxRow, body: bytes, trace_fields: dict[str, str] | None = None
    ) -> httpx.Request:
        """The signed POST of ``body`` to ``row``'s endpoint, signed by its sender (RFC 9421
        over its real URL); the ``trace_fields`` (``traceparent``, ``tracestate``) are sent
        and signed too."""
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

    async def _record(
        self,
        results: list[tuple[store.OutboxRow, str, str]],
        retry_after: float | None,
        positions: Mapping[str, str] | None = None,
    ) -> None:
        """Record the outcome of one request's rows, in one transaction: each row marked,
        audited and announced; the destination cleared when the peer answered any row, else
        one more failure counted (and parked when it keeps failing). A delivered post the
        group's home answered with a position (``positions``, by row id) takes its place in
        the group's order (:func:`gateway.services.group_order.place_answered`)."""
        now = self._clock.now()
        settings = self._settings
        async with transaction(self._pool) as tx:
            conn = tx.conn
            destination = results[0][0].destination
            answered = any(outcome != "retry" for _, outcome, _ in results)
            parked = False
            if answered:
                await store.clear_destination(conn, destination=destination, now=now)
            else:
                failures = await store.record_destination_failure(
                    conn, destination=destination, now=now, error=results[0][2]
                )
                parked = failures >= settings.delivery_park_after_failures or any(
                    r.attempts >= settings.delivery_max_attempts for r, _, _ in results
                )
                if parked:
                    await store.park_destination(conn, destination=destination, now=now)
            # one statement each for every row's state, audit rows and sender events
            marks: list[tuple[str, str, datetime | None, str | None]] = []
            audits: list[dict[str, Any]] = []
            for row, outcome, reason in results:
                next_attempt_at = None
                if outcome == "retry":
                    delay = 0.0 if parked else backoff_seconds(row.attempts, retry_after)
                    next_attempt_at = now + timedelta(seconds=delay)
                marks.append((row.id, outcome, next_attempt_at, reason))
                audits.append(
                    {
                        "method": "SendMessage",
                        "endpoint": row.endpoint,
                        "message_id": row.message_id,
                        "attempt": row.attempts,
                        "outcome": ("parked" if parked else "retry")
                        if outcome == "retry"
                        else outcome,
                        "reason": reason,
                    }
                )
            await store.record_outcomes(conn, now=now, outcomes=marks)
            for row, outcome, reason in results:
                if row.message_id is None or outcome == "retry":
                    continue
                position = (positions or {}).get(row.id)
                if outcome == "delivered" and position is not None:
                    await group_order.place_answered(
                        tx,
                        self._hub,
                        message_id=row.message_id,
                        destination=row.destination,
                        position=position,
                    )
                elif outcome != "delivered":  # a post its group's home never took
                    await group_order.retract_refused(
                        tx,
                        self._hub,
                        message_id=row.message_id,
                        destination=row.destination,
                        reason=reason,
                    )
            await audit_store.insert_audits(conn, action="federation.outbound", details=audits)
            if self._hub is not None:  # the events commit with the state they report
                await announce_deliveries(tx, self._hub, [row.id for row, _, _ in results])
        for details in audits:
            DELIVERIES.labels(details["outcome"]).inc()


def _position(answer: Any) -> str | None:
    """The position in a JSON-RPC response's ``result`` (:func:`a2a.confer.answered_position`),
    or None; never raises."""
    return answered_position(answer.get("result")) if isinstance(answer, dict) else None


def _batch_positions(answer: Any, outcomes: Mapping[str, tuple[str, str]]) -> dict[str, str]:
    """The positions of a batch answer's delivered calls (by call id); never raises."""
    if not isinstance(answer, list):
        return {}
    positions: dict[str, str] = {}
    for element in answer:
        rpc_id = element.get("id") if isinstance(element, dict) else None
        if not isinstance(rpc_id, str) or outcomes.get(rpc_id, ("", ""))[0] != "delivered":
            continue
        position = _position(element)
        if position is not None:
            positions.setdefault(rpc_id, position)
    return positions


async def resume_destination(pool: asyncpg.Pool, clock: Clock, endpoint: str) -> bool:
    """A peer reached us: unpark its destination and send what is queued for it now."""
    destination = urlsplit(endpoint).netloc.lower()
    async with pool.acquire() as conn:
        # Nearly always healthy: one read, no transaction, for every inbound request.
        if not await store.destination_unhealthy(conn, destination=destination):
            return False
        async with conn.transaction():
            return await store.clear_destination(conn, destination=destination, now=clock.now())
