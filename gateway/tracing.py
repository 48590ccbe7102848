"""Optional OpenTelemetry traces, exported over OTLP/HTTP when ``CONFER_OTLP_ENDPOINT`` is set.

Without the setting nothing of OpenTelemetry's SDK or exporter is imported (:meth:`Tracing.start`
loads :mod:`gateway.otlp` only then); this module uses the API alone, which FastAPI loads anyway.

What is traced:

- every HTTP request, as a ``SERVER`` span named ``{method} {route template}``
  (:class:`TracingMiddleware`): attributes ``http.request.method``, ``http.route`` (the matched
  route's template, never the raw path with its ids), ``http.response.status_code``,
  ``confer.request_id``; status ERROR on a 5xx. WebSocket sessions are not traced.
- every federation delivery attempt, as a ``CLIENT`` span (:mod:`gateway.workers.delivery`),
  child of the request that queued it: the outbound pipeline records the current trace context
  with each outbox row (:func:`trace_context`). Its W3C ``traceparent`` (and ``tracestate``)
  is sent with the A2A request and covered by its RFC 9421 signature
  (:data:`a2a.signatures.TRACE_CONTEXT_FIELDS`).

Which inbound trace context is trusted: a request's ``traceparent`` continues the caller's trace
only when the request's signature verified *and* covers it (:func:`keep_verified_trace_context`,
called by :mod:`gateway.federation_auth`); ``tracestate`` is kept only when covered too. An
unsigned request, a badly signed one, or one whose signature leaves the field out starts a new
trace; a malformed ``traceparent`` is ignored (W3C Trace Context: a receiver that cannot parse
it starts a new trace), never an error. Since the
verdict comes from a dependency that runs inside the app, the span of a signed request that names
a parent is created when the app has answered, with the request's start time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from a2a.signatures import TRACE_CONTEXT_FIELDS, HeadersLike, field_lines
from gateway.logs import REQUEST_ID

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

VERIFIED_TRACE_CONTEXT = "confer.verified_trace_context"
"""ASGI scope key: the trace context fields a verified signature covered."""

_PROPAGATOR = TraceContextTextMapPropagator()  # stateless: W3C Trace Context parsing only


class Tracing:
    """The app's tracer: None until :meth:`start`, and for good when no endpoint is set.

    ``endpoint`` is the OTLP/HTTP base URL (spans go to ``<endpoint>/v1/traces``);
    ``instance_did`` becomes the resource's ``service.instance.id``.
    """

    def __init__(self, endpoint: str | None, instance_did: str) -> None:
        self._endpoint = endpoint
        self._instance_did = instance_did
        self._provider: TracerProvider | None = None
        self.tracer: trace.Tracer | None = None

    def start(self) -> None:
        """Build the SDK's tracer provider and its batch exporter (nothing without endpoint)."""
        if not self._endpoint or self._provider is not None:
            return
        from gateway.otlp import tracer_provider  # the SDK loads only when tracing is on

        self._provider = tracer_provider(self._endpoint, self._instance_did)
        self.tracer = self._provider.get_tracer("confer")

    def shutdown(self) -> None:
        """Export what is buffered and stop (blocks up to the exporter's timeout)."""
        if self._provider is not None:
            self.tracer = None
            self._provider.shutdown()
            self._provider = None


def trace_context() -> dict[str, str]:
    """The current span's ``traceparent`` (and ``tracestate``); ``{}`` when there is none."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier


def carrier_of(span: trace.Span) -> dict[str, str]:
    """``span``'s W3C trace context fields, to send with a request it covers."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def parent_context(carrier: Mapping[str, str] | None) -> otel_context.Context:
    """The context continuing ``carrier``'s trace; an empty one (a new trace) when it is
    absent or malformed (W3C Trace Context: an unparseable ``traceparent`` is ignored)."""
    if not carrier:
        return otel_context.Context()
    return _PROPAGATOR.extract(dict(carrier), context=otel_context.Context())


def keep_verified_trace_context(
    scope: MutableMapping[str, Any], headers: HeadersLike, covered: Sequence[str]
) -> None:
    """Record, for this request's span, the trace context fields the verified signature
    ``covered`` (``parsed.components``); fields it left out are never trusted."""
    carrier = {
        name: ", ".join(lines)
        for name in TRACE_CONTEXT_FIELDS
        if name in covered and (lines := field_lines(headers, name))
    }
    if "traceparent" in carrier:
        scope[VERIFIED_TRACE_CONTEXT] = carrier


def _has_header(scope: Mapping[str, Any], name: bytes) -> bool:
    return any(key == name for key, _ in scope.get("headers", []))


class TracingMiddleware:
    """A ``SERVER`` span per HTTP request (module docstring); pure ASGI, passes everything
    through while ``tracing`` has no tracer."""

    def __init__(self, app: Any, tracing: Tracing) -> None:
        self.app = app
        self.tracing = tracing

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        tracer = self.tracing.tracer
        if scope["type"] != "http" or tracer is None:
            await self.app(scope, receive, send)
            return
        started = time.time_ns()
        status = 500  # an exception escaping the app is answered 500 by the server

        async def recording_send(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        method = scope.get("method", "")
        # A signed request naming a parent: whether to trust it is known after verification.
        deferred = _has_header(scope, b"signature-input") and _has_header(scope, b"traceparent")
        span = None
        token = None
        if not deferred:
            span = tracer.start_span(
                method, context=otel_context.Context(), kind=SpanKind.SERVER, start_time=started
            )
            token = otel_context.attach(trace.set_span_in_context(span))
        try:
            await self.app(scope, receive, recording_send)
        finally:
            if token is not None:
                otel_context.detach(token)
            if span is None:
                span = tracer.start_span(
                    method,
                    context=parent_context(scope.get(VERIFIED_TRACE_CONTEXT)),
                    kind=SpanKind.SERVER,
                    start_time=started,
                )
            _finish(span, scope, method, status)


def _finish(span: trace.Span, scope: Mapping[str, Any], method: str, status: int) -> None:
    template = getattr(scope.get("route"), "path", None)
    if template:
        span.update_name(f"{method} {template}")
        span.set_attribute("http.route", template)
    span.set_attribute("http.request.method", method)
    span.set_attribute("http.response.status_code", status)
    span.set_attribute("url.scheme", scope.get("scheme", "http"))
    request_id = REQUEST_ID.get()
    if request_id:
        span.set_attribute("confer.request_id", request_id)
    if status >= 500:
        span.set_status(Status(StatusCode.ERROR))
    span.end()
