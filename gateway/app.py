"""``create_app(settings)``: the one place Confer is wired together.

The lifespan builds every shared resource (database, keys, outbound HTTP client, DID resolver,
event hub, delivery worker) and tears it down; nothing is created at import time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
from fastapi import FastAPI

from did.resolver import DIDResolver
from gateway import migrations
from gateway.clock import Clock
from gateway.db import create_pool
from gateway.embedded import embedded_postgres_url
from gateway.errors import install_error_handlers
from gateway.middleware import BodyLimitMiddleware
from gateway.realtime.backends import start_hub
from gateway.routes import (
    attachments,
    auth,
    conversations,
    events,
    federation,
    identity,
    messages,
    participants,
    threads,
)
from gateway.services.accounts import Accounts
from gateway.services.identity import load_identity
from gateway.services.peers import PeerDirectory
from gateway.settings import Settings
from gateway.state import AppState
from gateway.workers.delivery import DeliveryWorker
from gateway.workers.streams import trim_events_forever

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


def create_app(settings: Settings | None = None, *, clock: Clock | None = None) -> FastAPI:
    """Build the ASGI app. Resources are created when its lifespan starts."""
    settings = settings or Settings()
    clock = clock or Clock()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        url = await asyncio.to_thread(database_url, settings)
        if settings.migrate_on_start:
            await asyncio.to_thread(migrations.upgrade, url)
        pool = await create_pool(url, min_size=settings.db_pool_min, max_size=settings.db_pool_max)
        http = httpx.AsyncClient(follow_redirects=False, timeout=settings.outbound_timeout_seconds)
        hub = None
        try:
            hub = await start_hub(settings, pool)
            identity = await load_identity(
                pool,
                public_url=settings.public_url,
                signature_window=settings.signature_window_seconds,
            )
            resolver = DIDResolver(
                http,
                allow_http=settings.allow_http_dids,
                allow_private_networks=settings.allow_private_networks,
            )
            app.state.confer = AppState(
                settings=settings,
                clock=clock,
                pool=pool,
                http=http,
                identity=identity,
                accounts=Accounts(pool, identity, clock, settings),
                peers=PeerDirectory(
                    pool,
                    resolver,
                    clock,
                    ttl=settings.peer_cache_ttl_seconds,
                    allow_http=settings.allow_http_dids,
                ),
                hub=hub,
            )
            worker = DeliveryWorker(pool, http, identity, clock, settings)
            task = asyncio.create_task(worker.run(), name="confer-delivery")
            trimmer = asyncio.create_task(trim_events_forever(pool, clock, settings))
            try:
                yield
            finally:
                task.cancel()
                trimmer.cancel()
                await asyncio.gather(task, trimmer, return_exceptions=True)
        finally:
            if hub is not None:
                await hub.close()
            await http.aclose()
            await pool.close()

    app = FastAPI(
        title="Confer",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        openapi_tags=[
            {"name": "accounts", "description": "Register, log in, sessions."},
            {"name": "conversations", "description": "Contacts, conversations, messages."},
            {"name": "identity", "description": "did:web DID documents."},
            {"name": "federation", "description": "A2A 1.0 endpoints for signed peers."},
            {"name": "system", "description": "Health."},
        ],
    )
    install_error_handlers(app)
    app.add_middleware(
        BodyLimitMiddleware,
        limit=settings.max_body_bytes,
        # Uploads may be larger: the multipart envelope gets 64 KiB on top of the file cap.
        path_limits={"/v1/attachments": settings.attachment_max_bytes + 64 * 1024},
    )
    routers = (auth, conversations, messages, participants, attachments, threads)
    for module in (*routers, identity, federation, events):
        app.include_router(module.router)
    return app
