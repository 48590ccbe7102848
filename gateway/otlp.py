"""OpenTelemetry's SDK and OTLP/HTTP exporter; imported by :mod:`gateway.tracing` only when
``CONFER_OTLP_ENDPOINT`` is set, so an instance without it never loads them.

The standard ``OTEL_*`` variables keep their meaning: ``OTEL_SERVICE_NAME`` and
``OTEL_RESOURCE_ATTRIBUTES`` (the service name defaults to ``confer``),
``OTEL_EXPORTER_OTLP_HEADERS`` / ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` (a collector's
credentials), ``OTEL_TRACES_SAMPLER`` and the batch processor's ``OTEL_BSP_*``.
"""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

TRACES_PATH = "/v1/traces"


def traces_url(endpoint: str) -> str:
    """``endpoint`` (an OTLP/HTTP base URL) + ``/v1/traces``, as OTLP's base endpoint rule says;
    a URL already ending in ``/v1/traces`` is kept."""
    base = endpoint.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def tracer_provider(endpoint: str, instance_did: str) -> TracerProvider:
    """A tracer provider whose spans are batched to ``endpoint`` (protobuf over HTTP), with
    ``service.instance.id`` = ``instance_did``. The provider is the caller's (never the global
    one), so several apps in one process keep their own."""
    resource = Resource.create({SERVICE_INSTANCE_ID: instance_did})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "confer"}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_url(endpoint))))
    return provider
