"""What the MCP endpoint's gate and tools use, built once from the app's resources.

The MCP server and its tools are registered when the app is built, before the lifespan has
opened the pool and started the services, so each call reaches its dependencies through a
getter. That getter yields :class:`ToolDeps` — not the whole ``AppState`` — so a tool sees only
what tools need (no settings, HTTP client, peer directory, keyring or nonce store), and a new
dependency shows up here, typed, instead of being reached for ad hoc.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from gateway.agents.embeddings import Embedder
from gateway.agents.queue import TaskQueue
from gateway.clock import Clock
from gateway.realtime.hub import EventHub
from gateway.services import consent
from gateway.services.accounts import Accounts
from gateway.services.search import SearchService
from gateway.services.tasks import TaskEvents
from gateway.state import AppState


@dataclass(frozen=True)
class ToolDeps:
    """The MCP tools' dependencies: the database, the clock, account authentication (access
    tokens), the event hub and agent task queue (a posted message's fan-out and the agent's
    answer), A2A task subscribers (a consent decision settles a peer's task), search and
    the embeddings client (a recorded memory is indexed)."""

    pool: asyncpg.Pool
    clock: Clock
    accounts: Accounts
    hub: EventHub
    queue: TaskQueue
    task_events: TaskEvents
    search: SearchService
    embedder: Embedder
    resource: str
    """The endpoint's OAuth resource identifier (RFC 8707): OAuth tokens must name it."""

    @classmethod
    def of(cls, state: AppState) -> ToolDeps:
        """The tools' share of ``state`` (called once, in the app's lifespan)."""
        return cls(
            pool=state.pool,
            clock=state.clock,
            accounts=state.accounts,
            hub=state.hub,
            queue=state.agent_queue,
            task_events=state.task_events,
            search=state.context.search,
            embedder=state.context.embedder,
            resource=state.oauth.resource,
        )

    @property
    def deciding(self) -> consent.Deciding:
        """What resolving a consent request touches (:class:`gateway.services.consent.Deciding`)."""
        return consent.Deciding(self.hub, self.queue, self.task_events, self.clock)
