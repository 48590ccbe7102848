"""The resources one app instance owns, built in the lifespan and reached through ``deps``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import asyncpg
import httpx
from prometheus_client import CollectorRegistry

from did.outbound import OutboundPolicy
from gateway.agents.queue import TaskQueue
from gateway.clock import Clock
from gateway.db import GroupCommit
from gateway.metrics import InstanceCollector
from gateway.realtime.hub import EventHub
from gateway.services.accounts import Accounts
from gateway.services.context import ContextServices
from gateway.services.encryption import Keyring
from gateway.services.federation_policy import FederationPolicy
from gateway.services.group_home import HomeLink
from gateway.services.identity import Identity
from gateway.services.limits import NonceStore, PeerRateLimiter
from gateway.services.mail import Mailer
from gateway.services.oauth import AuthorizationServer
from gateway.services.password_reset import PasswordResets
from gateway.services.peers import PeerDirectory
from gateway.services.push import VapidKey
from gateway.services.signals import Signals
from gateway.services.tasks import TaskEvents
from gateway.settings import Settings
from gateway.storage import AttachmentStorage
from gateway.workers.supervisor import Supervisor

if TYPE_CHECKING:  # redis-py loads only when Redis is configured
    from redis.asyncio import Redis


@dataclass
class AppState:
    """Everything request handlers may use; nothing here is created at import time."""

    settings: Settings
    clock: Clock
    pool: asyncpg.Pool
    http: httpx.AsyncClient
    identity: Identity
    accounts: Accounts
    peers: PeerDirectory
    hub: EventHub
    context: ContextServices
    keyring: Keyring
    agent_queue: TaskQueue
    oauth: AuthorizationServer
    storage: AttachmentStorage
    task_events: TaskEvents = field(default_factory=TaskEvents)
    nonces: NonceStore | None = None
    peer_limits: PeerRateLimiter | None = None
    redis: Redis | None = None
    """The client of ``CONFER_REDIS_URL`` (None without it); ``/readyz`` pings it."""
    metrics: InstanceCollector | None = None
    metrics_registry: CollectorRegistry | None = None
    supervisor: Supervisor | None = None
    outbound_policy: OutboundPolicy = field(default_factory=OutboundPolicy)
    vapid: VapidKey | None = None
    mailer: Mailer | None = None
    password_resets: PasswordResets | None = None
    home_link: HomeLink | None = None
    """How a replica asks a group's home instance for a change (built in the lifespan)."""
    signals: Signals | None = None
    """Typing and presence for peers, sent at once and dropped on failure."""
    federation_policy: FederationPolicy = field(default_factory=FederationPolicy)
    posts: GroupCommit = field(default_factory=GroupCommit)
    """Group commit of concurrent posts to one conversation (``post_group_commit_max``)."""
