"""Operator endpoints: ``/metrics`` (Prometheus text format) and ``/readyz`` (readiness).

``/healthz`` (in :mod:`gateway.routes.identity`) says the process answers; ``/readyz`` says it
should get traffic: the database answers within :data:`READY_TIMEOUT_SECONDS`, its schema is at
the newest migration, every supervised worker is still running (or finished on purpose), and
Redis, when ``CONFER_REDIS_URL`` is set, answers a ``PING`` within the same time.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import ipaddress
from typing import Annotated

import asyncpg
from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway import migrations
from gateway.deps import State
from gateway.errors import AuthenticationError, NotFoundError
from gateway.routes import answer_head
from gateway.state import AppState
from gateway.store import system as system_store

router = APIRouter(tags=["system"])

READY_TIMEOUT_SECONDS = 2.0
_NO_STORE = {"Cache-Control": "no-store"}


@functools.cache
def _head() -> str:
    return migrations.declared_head()


def _direct_loopback(request: Request) -> bool:
    """True for a request from a loopback address that no proxy forwarded (no
    ``Forwarded``/``X-Forwarded-For``, RFC 7239): a scraper on this host, not a visitor
    passing through a reverse proxy that runs here."""
    host = request.client.host if request.client else ""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    headers = request.headers
    return loopback and "forwarded" not in headers and "x-forwarded-for" not in headers


@router.get("/metrics", summary="Prometheus metrics", include_in_schema=False)
async def metrics(
    request: Request, state: State, authorization: Annotated[str | None, Header()] = None
) -> Response:
    """The Prometheus text exposition; 404 when ``CONFER_METRICS`` is off, 401 without the
    ``CONFER_METRICS_TOKEN`` bearer when one is set. Without a token only a scraper on this
    host is answered (:func:`_direct_loopback`), 401 for anyone else: the figures name the
    instances this one delivers to (outbox depth per destination), which is nobody else's
    business."""
    settings = state.settings
    if not settings.metrics or state.metrics is None or state.metrics_registry is None:
        raise NotFoundError("metrics are turned off")
    if settings.metrics_token:
        expected = f"Bearer {settings.metrics_token}"
        if not hmac.compare_digest((authorization or "").encode(), expected.encode()):
            raise AuthenticationError("send Authorization: Bearer <CONFER_METRICS_TOKEN>")
    elif not _direct_loopback(request):
        raise AuthenticationError(
            "metrics are served to this host only; set CONFER_METRICS_TOKEN to scrape them "
            "from elsewhere"
        )
    await state.metrics.refresh()
    return Response(generate_latest(state.metrics_registry), media_type=CONTENT_TYPE_LATEST)


async def _schema_check(state: AppState) -> tuple[str, str]:
    """``(database, migrations)`` check results: ``ok`` or what went wrong."""
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS), state.pool.acquire() as conn:
            await system_store.ping(conn)
            revision = await system_store.get_alembic_revision(conn)
    except TimeoutError:
        return f"no answer within {READY_TIMEOUT_SECONDS:g} s", "unknown"
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        return f"{type(exc).__name__}: {exc}", "unknown"
    if revision != _head():
        return "ok", f"at {revision}, newest is {_head()} (run `confer migrate`)"
    return "ok", "ok"


async def _redis_check(state: AppState) -> str | None:
    """``ok``, what went wrong pinging ``CONFER_REDIS_URL`` (rate limits, nonces and presence
    live there), or None without Redis."""
    if state.redis is None:
        return None
    from redis.exceptions import RedisError  # loaded already: the client is redis-py's

    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            await state.redis.ping()
    except TimeoutError:
        return f"no answer within {READY_TIMEOUT_SECONDS:g} s"
    except (RedisError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"


@router.get(
    "/readyz",
    summary="Readiness: database, migrations, workers, Redis",
    tags=["system"],
    responses={503: {"description": "A check failed; `failed` names which."}},
)
async def readyz(state: State) -> JSONResponse:
    """200 ``{"status": "ready", "checks": {...}}`` when every check says ``ok``, else 503
    ``{"status": "unavailable", "failed": [names], "checks": {...}}``."""
    database, schema = await _schema_check(state)
    states = state.supervisor.states() if state.supervisor is not None else {}
    stopped = sorted(name for name, value in states.items() if value == "stopped")
    if state.supervisor is None:
        workers = "not started"
    else:
        workers = "ok" if not stopped else f"stopped: {', '.join(stopped)}"
    checks = {"database": database, "migrations": schema, "workers": workers}
    redis = await _redis_check(state)
    if redis is not None:
        checks["redis"] = redis
    failed = [name for name, value in checks.items() if value != "ok"]
    if failed:
        body = {"status": "unavailable", "failed": failed, "checks": checks}
        return JSONResponse(body, status_code=503, headers=_NO_STORE)
    return JSONResponse({"status": "ready", "checks": checks}, headers=_NO_STORE)


answer_head(router, "/readyz")
