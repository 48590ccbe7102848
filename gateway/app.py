"""``create_app(settings)``: the one place Confer is wired together.

The lifespan builds every shared resource (database, keys, outbound HTTP client, DID resolver,
event hub, delivery worker) and tears it down; nothing is created at import time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx
from fastapi import FastAPI, WebSocket
from fastapi.middleware.cors import CORSMiddleware

from did.outbound import OutboundPolicy
from did.resolver import DIDResolver
from gateway import migrations
from gateway.agents.keys import stored_key
from gateway.agents.queue import TaskQueue, build_task_queue
from gateway.agents.worker import AgentWorker
from gateway.backend_urls import check_redis
from gateway.clock import Clock
from gateway.db import GroupCommit, create_pool
from gateway.embedded import embedded_postgres_url
from gateway.errors import FederationRefusedError
from gateway.federation_auth import refusal_handler
from gateway.http_errors import install_error_handlers, install_redis_handler
from gateway.logs import RequestIdMiddleware, backends, bind_instance, startup_banner
from gateway.mcp.deps import ToolDeps
from gateway.mcp.lazy import LazyMCP
from gateway.metrics import InstanceCollector, RequestMetricsMiddleware, build_registry
from gateway.middleware import BodyLimitMiddleware, NoSniffMiddleware
from gateway.realtime.backends import start_hub
from gateway.routes import (
    admin,
    admin_federation,
    agent_context,
    agents,
    api_keys,
    attachments,
    auth,
    cards,
    concepts,
    contacts,
    conversations,
    events,
    federation,
    identity,
    install_problem_schema,
    me,
    memory,
    message_requests,
    messages,
    oauth,
    ops,
    participants,
    password_reset,
    permissions,
    project_memory,
    push,
    reports,
    retention,
    threads,
    translations,
    web,
)
from gateway.services.accounts import Accounts
from gateway.services.consent import Deciding
from gateway.services.context import build_context_services
from gateway.services.did_budget import ResolutionBudget
from gateway.services.encryption import Keyring
from gateway.services.federation_policy import FederationPolicy, run_policy_listener
from gateway.services.group_home import HomeLink
from gateway.services.identity import check_public_url, load_identity
from gateway.services.limits import PeerRateLimiter, PostgresNonceStore, RedisNonceStore
from gateway.services.llm_keys import check_stored_keys
from gateway.services.mail import Mailer
from gateway.services.oauth import AuthorizationServer
from gateway.services.oauth_clients import ClientDirectory
from gateway.services.password_reset import PasswordResets
from gateway.services.peers import LocalDocuments, PeerDirectory
from gateway.services.push import WebPushSender, load_vapid_key, vapid_subject
from gateway.services.session_cache import run_session_listener
from gateway.services.signals import Signals
from gateway.services.tasks import TaskEvents
from gateway.settings import Settings
from gateway.state import AppState
from gateway.storage import attachment_storage, file_limit_text
from gateway.tracing import Tracing, TracingMiddleware
from gateway.workers.a2a_push import PushWorker
from gateway.workers.attachment_fetch import AttachmentFetcher
from gateway.workers.attachment_reaper import run_attachment_reaper
from gateway.workers.auto_translation import run_auto_translator
from gateway.workers.concept_decay import run_concept_decay
from gateway.workers.consent import run_sweeper
from gateway.workers.delivery import DeliveryWorker
from gateway.workers.message_embeddings import run_message_indexer
from gateway.workers.notifications import NotificationWorker
from gateway.workers.retention import run_retention
from gateway.workers.supervisor import WorkerFactory, supervised

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger(__name__)

DESCRIPTION = """\
Confer is a self-hosted, federated messaging gateway for people and their AI agents.

* **Clients** use this REST API (bearer access tokens from `/v1/auth/login`) and one WebSocket
  per device at `/v1/ws` (protocol: `docs/websocket.md` in the repository).
* **Peers** (other Confer instances, A2A agents) call `POST /users/{name}/a2a` and
  `POST /agents/{id}/a2a` with A2A 1.0 JSON-RPC, signed per RFC 9421 with keys published in
  `did:web` documents.
* Every error is RFC 9457 `application/problem+json` with a stable `code`.
"""


def database_url(settings: Settings) -> str:
    """The configured PostgreSQL URL, or the embedded server's (started on demand)."""
    if settings.database_url:
        return settings.database_url
    return embedded_postgres_url(settings.data_dir / "pg")


def direct_database_url(settings: Settings) -> str:
    """The URL of PostgreSQL itself, never a pooler: ``CONFER_DATABASE_DIRECT_URL`` when set,
    else :func:`database_url`. Migrations, ``LISTEN`` and the process claim use it."""
    return settings.database_direct_url or database_url(settings)


def _redis_client(url: str | None) -> Redis | None:
    """A client of the Redis at ``url``, or None. redis-py is imported only then: it loads
    much at import (OpenTelemetry's SDK too, when that is installed)."""
    if not url:
        return None
    import redis.asyncio as redis

    return redis.from_url(url)


class _ConferApp(FastAPI):
    """FastAPI, with the WebSocket event stream (``/v1/ws``) dispatched before the middleware
    stack and the router.

    An open WebSocket keeps every ASGI frame between the server and its handler alive for as
    long as it lasts: the middlewares (which pass WebSockets through untouched), the
    exception handlers, the router, the route's dependency solving. For thousands of idle
    devices those frames are a large share of the process's memory; the one path that
    holds a connection open goes straight to its handler. Everything else, and ``/v1/ws``
    under a ``root_path``, takes the full stack.
    """

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket" and scope["path"] == events.PATH:
            scope["app"] = self
            await events.serve(WebSocket(scope, receive, send), self.state.confer)
            return
        await super().__call__(scope, receive, send)


def create_app(settings: Settings | None = None, *, clock: Clock | None = None) -> FastAPI:
    """Build the ASGI app. Resources are created when its lifespan starts."""
    settings = settings or Settings()
    clock = clock or Clock()
    mcp_app = LazyMCP(lambda: app.state.mcp_tools, settings)  # the MCP SDK loads on first use
    keyring = Keyring.from_setting(settings.encryption_keys)  # ValueError: a clear startup error
    tracing = Tracing(settings.otlp_endpoint, settings.instance_did)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The outbound client's TLS context, as httpx builds it (the CA bundle's ~150
        # certificates: about 25 ms, parsed by OpenSSL without the GIL), is made in a thread
        # while the database is checked and the pool opens.
        tls = asyncio.create_task(asyncio.to_thread(httpx.create_ssl_context))
        url = await asyncio.to_thread(database_url, settings)
        direct = settings.database_direct_url or url  # migrations and LISTEN skip a pooler
        # Alembic is loaded only when there is something to migrate (start-up time).
        if settings.migrate_on_start and not await migrations.is_at_head(direct):
            await asyncio.to_thread(migrations.upgrade, direct)
        storage = await asyncio.to_thread(attachment_storage, settings)
        await storage.check()  # an unusable folder refuses the start, naming the setting
        pool = await create_pool(
            url,
            min_size=settings.db_pool_min,
            max_size=settings.db_pool_max,
            acquire_timeout=settings.db_acquire_timeout_seconds,
            statement_timeout=settings.db_statement_timeout_seconds,
            statement_cache_size=settings.db_statement_cache_size,
            direct_url=direct,
        )
        http = httpx.AsyncClient(
            verify=await tls, follow_redirects=False, timeout=settings.outbound_timeout_seconds
        )
        hub = None
        agent_queue: TaskQueue | None = None
        mailer = Mailer(settings)
        try:
            tracing.start()
            if settings.redis_url:  # as NATS's: reachable within the timeout, or no start
                await check_redis(settings.redis_url, settings.backend_connect_timeout_seconds)
            hub = await start_hub(settings, pool)
            agent_queue = build_task_queue(settings, pool)
            await agent_queue.start()
            identity = await load_identity(
                pool,
                public_url=settings.public_url,
                signature_window=settings.signature_window_seconds,
            )
            await check_public_url(pool, identity)
            bind_instance(identity.did)
            await check_stored_keys(pool, keyring)
            policy = OutboundPolicy.build(
                allow_private_networks=settings.allow_private_networks,
                allowed_networks=settings.outbound_allowed_networks,
            )
            resolver = DIDResolver(http, allow_http=settings.allow_http_dids, policy=policy)
            federation_policy = FederationPolicy(local_did=identity.did)
            await federation_policy.reload(pool)
            context = build_context_services(
                pool, http, clock, settings, hub, key_lookup=stored_key(pool, keyring)
            )
            accounts = Accounts(pool, identity, clock, settings)
            # a session that ends (anywhere) stops the user's sockets here at once, not at
            # their next periodic check
            accounts.session_cache.watch(hub.recheck)
            clients = ClientDirectory(pool, http, policy, clock, settings)
            app.state.confer = AppState(
                settings=settings,
                clock=clock,
                pool=pool,
                http=http,
                identity=identity,
                accounts=accounts,
                oauth=AuthorizationServer(
                    pool, identity, clock, settings, accounts.sessions, clients
                ),
                peers=PeerDirectory(
                    pool,
                    resolver,
                    clock,
                    ttl=settings.peer_cache_ttl_seconds,
                    allow_http=settings.allow_http_dids,
                    local=LocalDocuments(pool, identity),
                    failure_ttl=settings.did_failure_ttl_seconds,
                    policy=federation_policy,
                    budget=ResolutionBudget(
                        accounts.limiter,
                        clock,
                        per_host_at_once=settings.did_fetch_concurrency_host,
                        failure_ttl=settings.did_failure_ttl_seconds,
                    ),
                ),
                hub=hub,
                context=context,
                keyring=keyring,
                agent_queue=agent_queue,
                posts=GroupCommit(settings.post_group_commit_max),
                storage=storage,
                task_events=TaskEvents(hub.bus),
                federation_policy=federation_policy,
                outbound_policy=policy,
            )
            redis_client = _redis_client(settings.redis_url)
            app.state.confer.redis = redis_client
            app.state.confer.nonces = (
                RedisNonceStore(redis_client) if redis_client else PostgresNonceStore(pool)
            )
            app.state.confer.peer_limits = PeerRateLimiter(app.state.confer.accounts.limiter)
            vapid = await load_vapid_key(pool)
            app.state.confer.outbound_policy = policy
            app.state.confer.vapid = vapid
            app.state.confer.mailer = mailer
            app.state.confer.password_resets = PasswordResets(
                pool,
                clock,
                settings,
                app.state.confer.accounts.passwords,
                app.state.confer.accounts.limiter,
                mailer,
            )
            pusher = WebPushSender(
                http,
                policy,
                vapid,
                subject=vapid_subject(settings),
                ttl=settings.push_ttl_seconds,
                timeout=settings.outbound_timeout_seconds,
            )
            app.state.confer.signals = Signals(http, policy, identity)
            app.state.confer.home_link = HomeLink(
                http, policy, identity, app.state.confer.peers, settings.outbound_timeout_seconds
            )
            collector = InstanceCollector(pool, lambda: hub.device_count if hub else 0)
            app.state.confer.metrics = collector
            app.state.confer.metrics_registry = build_registry(collector)
            await app.state.confer.accounts.bootstrap_admins()
            app.state.mcp_tools = ToolDeps.of(app.state.confer)
            agents = AgentWorker(
                pool,
                context.runtime,
                clock,
                max_attempts=settings.agent_task_max_attempts,
                lease_seconds=settings.agent_task_lease_seconds,
                queue=agent_queue,
                max_per_owner=settings.agent_max_running_per_owner,
                max_per_peer=settings.agent_max_running_per_peer,
            )
            deciding = Deciding(hub, agent_queue, app.state.confer.task_events, clock)
            sweep = settings.permission_sweep_seconds
            workers: list[tuple[str, WorkerFactory]] = [
                (
                    "delivery",
                    DeliveryWorker(
                        pool,
                        http,
                        identity,
                        clock,
                        settings,
                        policy,
                        hub,
                        federation_policy,
                        tracing.tracer,
                    ).run,
                ),
                (
                    "federation-policy",
                    lambda: run_policy_listener(pool, federation_policy),
                ),
                (
                    "session-cache",
                    lambda: run_session_listener(pool, accounts.session_cache, check_seconds=30.0),
                ),
                (
                    "attachment-fetch",
                    AttachmentFetcher(pool, http, identity, clock, settings, policy, storage).run,
                ),
                (
                    "attachment-reaper",
                    lambda: run_attachment_reaper(pool, storage, clock, settings),
                ),
                (
                    "a2a-push",
                    PushWorker(pool, http, identity, clock, settings, policy).run,
                ),
                ("agents", agents.run),
                (
                    "notifications",
                    NotificationWorker(
                        pool,
                        clock,
                        settings,
                        hub.ephemeral,
                        pusher if settings.web_push else None,
                        mailer,
                    ).run,
                ),
                ("consent", lambda: run_sweeper(pool, deciding, interval=sweep)),
                ("translate", lambda: run_auto_translator(context.translator, hub)),
                ("retention", lambda: run_retention(pool, clock, settings, hub, storage)),
                ("embed", lambda: run_message_indexer(pool, context.embedder, settings)),
                (
                    "concept-decay",
                    lambda: run_concept_decay(
                        pool, clock, interval=settings.concept_decay_interval_seconds
                    ),
                ),
            ]
            try:
                async with supervised(workers) as supervisor:
                    app.state.confer.supervisor = supervisor
                    line, fields = startup_banner(
                        did=identity.did,
                        public_url=identity.public_url,
                        backends=backends(
                            database_url=settings.database_url,
                            redis_url=settings.redis_url,
                            nats_url=settings.nats_url,
                            attachments=settings.attachment_storage,
                        ),
                    )
                    log.info(line, extra=fields)
                    try:
                        yield
                    finally:
                        await mcp_app.aclose()  # mounted apps get no lifespan
            finally:
                if redis_client is not None:
                    await redis_client.aclose()
        finally:
            await asyncio.to_thread(tracing.shutdown)  # exports what is still buffered
            await mailer.aclose()
            if agent_queue is not None:
                await agent_queue.close()
            if hub is not None:
                await hub.close()
            signals = getattr(app.state, "confer", None) and app.state.confer.signals
            if signals is not None:  # at most a few, each bounded by its short deadline
                await signals.drain()
            await http.aclose()
            await storage.close()
            await pool.close()

    app = _ConferApp(
        title="Confer",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        # Served by gateway.routes.web from local assets instead of a CDN.
        docs_url=None,
        redoc_url=None,
        openapi_tags=[
            {"name": "accounts", "description": "Register, log in, sessions, profile, keys."},
            {"name": "agents", "description": "Your own agents and the provider catalog."},
            {"name": "admin", "description": "Instance administration (admins only)."},
            {"name": "conversations", "description": "Contacts, conversations, messages."},
            {"name": "moderation", "description": "Reports of messages, users and peers."},
            {"name": "identity", "description": "did:web DID documents."},
            {"name": "federation", "description": "A2A 1.0 endpoints for signed peers."},
            {"name": "memory", "description": "Agent memories, knowledge, search."},
            {"name": "system", "description": "Health."},
            {
                "name": "oauth",
                "description": "MCP sign-in: OAuth 2.1 metadata and authorization endpoint "
                "(token, registration and revocation: docs/agents.md).",
            },
        ],
    )
    install_error_handlers(app)
    if settings.redis_url:
        install_redis_handler(app)
    app.add_exception_handler(FederationRefusedError, refusal_handler)
    install_problem_schema(app)
    app.add_middleware(
        BodyLimitMiddleware,
        limit=settings.max_body_bytes,
        # Uploads may be larger: the multipart envelope gets 64 KiB on top of the file cap.
        path_limits={"/v1/attachments": settings.attachment_max_bytes + 64 * 1024},
        path_details={"/v1/attachments": file_limit_text(settings.attachment_max_bytes)},
    )
    app.add_middleware(RequestMetricsMiddleware)
    app.add_middleware(NoSniffMiddleware)
    if settings.otlp_endpoint:
        app.add_middleware(TracingMiddleware, tracing=tracing)
    app.add_middleware(RequestIdMiddleware)  # outermost: error answers carry the id too
    if settings.cors_origins:
        # Bearer tokens, not cookies: no credentials mode, so "*" is safe to allow.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=["Retry-After", "Location", "X-Request-ID"],
            max_age=600,
        )
    # Routes are tried in order, and matching one costs FastAPI about as much as the rest of
    # a small request: the conversations' are tried first, through this copy of their
    # router, left out of the OpenAPI document, which shows them at their place below; the
    # busiest of them, sending a message, before that, as a route of the app's own (an
    # included router's routes cost FastAPI twice the matching, and scope bookkeeping per
    # route tried). No route before their place answers their paths
    # (tests/gateway/test_routing.py), so every request reaches the same endpoint either way.
    conversations.add_post_message(app.router, include_in_schema=False)
    app.include_router(conversations.router, include_in_schema=False)
    for module in (
        auth,
        me,
        agents,
        admin,
        admin_federation,
        conversations,
        messages,
        participants,
        attachments,
        threads,
        identity,
        federation,
        events,
        memory,
        project_memory,
        agent_context,
        concepts,
    ):
        app.include_router(module.router)
    # Starlette serves an endpoint that is not a function as a raw ASGI app (exact path, no
    # redirect to "/mcp/" as a Mount would do); its annotation only names request handlers.
    app.router.add_route(
        "/mcp",
        mcp_app,  # type: ignore[arg-type]
        methods=["GET", "POST", "DELETE"],
        include_in_schema=False,
    )
    for module in (
        api_keys,
        cards,
        contacts,
        message_requests,
        permissions,
        reports,
        translations,
        ops,
        oauth,
        push,
        password_reset,
        retention,
    ):
        app.include_router(module.router)
    web.install_web(app)
    return app
