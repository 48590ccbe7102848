"""An OTLP/HTTP trace receiver on loopback: ``POST /v1/traces`` with protobuf bodies.

Each body is decoded with ``opentelemetry-proto``'s ``ExportTraceServiceRequest`` (gzip when the
exporter compressed it) and its spans kept, flattened with their resource's service name and
instance id, in ``spans``; ``requests`` counts every POST, decodable or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.gateway.harness import free_port, serve

SPAN_KIND_SERVER = 2  # opentelemetry.proto.trace.v1.Span.SpanKind
SPAN_KIND_CLIENT = 3
STATUS_CODE_ERROR = 2


@dataclass(frozen=True)
class ExportedSpan:
    """One received span; ids are lowercase hex ("" for no parent)."""

    service: str
    instance: str
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    status_code: int


def _attributes(pairs: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for pair in pairs:
        assert isinstance(pair, KeyValue)
        which = pair.value.WhichOneof("value")
        values[pair.key] = getattr(pair.value, which) if which else None
    return values


@dataclass
class OtlpReceiver:
    """What the receiver got; :meth:`wait_for` polls for a span."""

    url: str
    requests: int = 0
    spans: list[ExportedSpan] = field(default_factory=list)

    def accept(self, body: bytes) -> None:
        export = ExportTraceServiceRequest.FromString(body)
        for resource_spans in export.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        ExportedSpan(
                            service=str(resource.get("service.name")),
                            instance=str(resource.get("service.instance.id")),
                            name=span.name,
                            kind=span.kind,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes=_attributes(span.attributes),
                            status_code=span.status.code,
                        )
                    )

    async def wait_for(
        self, wanted: Callable[[ExportedSpan], bool], within: float = 60.0
    ) -> ExportedSpan:
        """The first span ``wanted`` accepts, once exported (the machine may be loaded)."""
        deadline = time.monotonic() + within
        while True:
            found = [span for span in self.spans if wanted(span)]
            if found:
                return found[0]
            if time.monotonic() > deadline:
                names = [(s.service, s.name, s.attributes) for s in self.spans]
                raise AssertionError(f"no such span within {within:g} s; got {names}")
            await asyncio.sleep(0.1)

    def by_request_id(self, request_id: str) -> Callable[[ExportedSpan], bool]:
        """A :meth:`wait_for` filter: the server span of the request sent with this
        ``X-Request-ID``."""
        return lambda span: span.attributes.get("confer.request_id") == request_id


@contextlib.asynccontextmanager
async def run_otlp_receiver() -> AsyncIterator[OtlpReceiver]:
    """Serve an :class:`OtlpReceiver` on a free loopback port until exit."""
    port = free_port()
    receiver = OtlpReceiver(f"http://127.0.0.1:{port}")

    async def traces(request: Request) -> Response:
        receiver.requests += 1
        body = await request.body()
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        receiver.accept(body)
        return Response(
            ExportTraceServiceResponse().SerializeToString(), media_type="application/x-protobuf"
        )

    app = Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])
    async with serve(app, port):
        yield receiver
