"""Prometheus metrics (``prometheus-client``), served at ``/metrics`` in the text format.

Counters that code increments where things happen live here, created *unregistered*
(``registry=None``): importing this module registers nothing globally. Each app builds its own
:class:`~prometheus_client.CollectorRegistry` with :func:`build_registry`, which adds these
counters and an :class:`InstanceCollector` that reads the rest at scrape time:

- ``confer_http_requests_total{method, route, status}`` — ``route`` is the matched route's
  path template (``/v1/conversations/{conversation_id}``), ``unmatched`` when none matched:
  never the raw path, so label cardinality stays bounded (:class:`RequestMetricsMiddleware`).
- ``confer_http_request_duration_seconds{method, route}`` — a histogram of the same requests.
- ``confer_websocket_connections`` — devices connected to this process (the event hub).
- ``confer_events_fanned_out_total`` — frames offered to local devices.
- ``confer_outbox_depth{destination}`` / ``confer_outbox_oldest_age_seconds{destination}`` —
  pending federation deliveries per destination, read from the database with a short timeout
  (a scrape never hangs on a busy database; on timeout these families are left out and
  ``confer_metrics_collect_errors_total`` counts it).
- ``confer_deliveries_total{outcome}`` — ``delivered``, ``failed``, ``retry`` or ``parked``.
- ``confer_did_resolutions_total{result}`` — ``cache_hit``, ``fetched`` or ``error``.
- ``confer_agent_tasks_total{outcome}`` — ``completed``, ``lease_lost`` or ``crashed``.
- ``confer_db_pool_size`` / ``confer_db_pool_in_use`` — the asyncpg pool.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gateway.store import observability as observability_store

log = logging.getLogger(__name__)

HTTP_REQUESTS = Counter(
    "confer_http_requests",
    "HTTP requests answered, by method, route template and status.",
    ["method", "route", "status"],
    registry=None,
)
HTTP_DURATION = Histogram(
    "confer_http_request_duration_seconds",
    "HTTP request handling time in seconds, by method and route template.",
    ["method", "route"],
    registry=None,
)
EVENTS_FANNED_OUT = Counter(
    "confer_events_fanned_out", "Event frames offered to local WebSocket devices.", registry=None
)
DELIVERIES = Counter(
    "confer_deliveries",
    "Federation delivery attempts by outcome (delivered, failed, retry, parked).",
    ["outcome"],
    registry=None,
)
DID_RESOLUTIONS = Counter(
    "confer_did_resolutions",
    "Peer DID lookups by result (cache_hit, fetched, error, over_budget).",
    ["result"],
    registry=None,
)
AGENT_TASKS = Counter(
    "confer_agent_tasks",
    "Agent tasks run by this process, by outcome (completed, lease_lost, crashed).",
    ["outcome"],
    registry=None,
)
COLLECT_ERRORS = Counter(
    "confer_metrics_collect_errors",
    "Scrapes whose database-backed families could not be read in time.",
    registry=None,
)

_COUNTERS: tuple[Collector, ...] = (
    HTTP_REQUESTS,
    HTTP_DURATION,
    EVENTS_FANNED_OUT,
    DELIVERIES,
    DID_RESOLUTIONS,
    AGENT_TASKS,
    COLLECT_ERRORS,
)

OUTBOX_TIMEOUT_SECONDS = 2.0


class InstanceCollector(Collector):
    """Scrape-time gauges of one app: pool use, connected devices and the outbox.

    ``collect`` is synchronous (prometheus-client calls it from ``generate_latest``), so the
    outbox figures are read beforehand by :meth:`refresh`, awaited by the ``/metrics`` route.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        devices: Callable[[], int],
        *,
        outbox_timeout: float = OUTBOX_TIMEOUT_SECONDS,
    ) -> None:
        self._pool = pool
        self._outbox_timeout = outbox_timeout
        self._devices = devices
        self._outbox: list[observability_store.OutboxDepth] | None = None

    async def refresh(self) -> None:
        """Read the outbox per destination; on timeout or a database error, leave it out."""
        timeout = self._outbox_timeout
        try:
            async with asyncio.timeout(timeout), self._pool.acquire() as conn:
                self._outbox = await observability_store.list_outbox_depths(conn)
        except (TimeoutError, OSError, asyncpg.PostgresError):
            log.warning("metrics: the outbox could not be read in %.1f s", timeout, exc_info=True)
            COLLECT_ERRORS.inc()
            self._outbox = None

    def collect(self) -> Iterable[Metric]:
        size = self._pool.get_size()
        pool_size = GaugeMetricFamily("confer_db_pool_size", "Connections the pool holds.")
        pool_size.add_metric([], size)
        in_use = GaugeMetricFamily("confer_db_pool_in_use", "Pool connections checked out.")
        in_use.add_metric([], size - self._pool.get_idle_size())
        devices = GaugeMetricFamily(
            "confer_websocket_connections", "WebSocket devices connected to this process."
        )
        devices.add_metric([], self._devices())
        yield from (pool_size, in_use, devices)
        yield from self._outbox_families()

    def _outbox_families(self) -> Iterator[Metric]:
        if self._outbox is None:
            return
        depth = GaugeMetricFamily(
            "confer_outbox_depth", "Pending federation deliveries.", labels=["destination"]
        )
        age = GaugeMetricFamily(
            "confer_outbox_oldest_age_seconds",
            "Age of the oldest pending delivery in seconds.",
            labels=["destination"],
        )
        for row in self._outbox:
            depth.add_metric([row.destination], row.pending)
            age.add_metric([row.destination], row.oldest_age_seconds)
        yield depth
        yield age


def build_registry(collector: InstanceCollector) -> CollectorRegistry:
    """A registry of the process-wide counters plus this app's scrape-time ``collector``."""
    registry = CollectorRegistry(auto_describe=True)
    for counter in _COUNTERS:
        registry.register(counter)
    registry.register(collector)
    return registry


class RequestMetricsMiddleware:
    """Count each HTTP request by method, route template and status (pure ASGI).

    The route is read after the app ran from ``scope["route"]``, which Starlette's router sets
    on a match; a request no route matched is labelled ``unmatched``. Each label set's two
    series are looked up once and kept (the label sets are bounded: routes, methods, statuses).
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self._series: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # an exception escaping the app is answered 500 by the server
        started = time.perf_counter()

        async def counting_send(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            elapsed = time.perf_counter() - started
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "")
            key = (method, template, status)
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = (
                    HTTP_REQUESTS.labels(method, template, str(status)),
                    HTTP_DURATION.labels(method, template),
                )
            series[0].inc()
            series[1].observe(elapsed)
