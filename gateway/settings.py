"""Instance settings, read from ``CONFER_*`` environment variables and a ``.env`` file
(pydantic-settings).

Precedence, highest first: arguments given in code (``confer serve --port``), the process
environment, then ``.env`` in the working directory (``KEY=value`` lines; keys without the
``CONFER_`` prefix are ignored), then the defaults below.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from did.errors import InvalidDIDError
from did.web import did_from_base_url
from gateway.agents.catalog import WIRE_FORMATS


class Settings(BaseSettings):
    """Everything an operator configures. Every field maps to ``CONFER_<FIELD>``.

    ``public_url`` is the externally visible base URL (scheme, host, optional port; no path).
    The instance DID is derived from it (did:web §3.1), so it must be the name peers reach.
    """

    model_config = SettingsConfigDict(
        env_prefix="CONFER_", extra="ignore", env_file=".env", env_file_encoding="utf-8"
    )

    public_url: str = Field(
        default="",
        description="Base URL peers reach; unset = http://localhost:<port> (development).",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    database_url: str | None = Field(
        default=None, description="PostgreSQL URL; unset = embedded PostgreSQL under data_dir."
    )
    database_direct_url: str | None = Field(
        default=None,
        description="Direct PostgreSQL URL (not through a pooler) for LISTEN, migrations and "
        "the process claim; unset = database_url. Set it when database_url is a pgbouncer in "
        "transaction mode.",
    )
    db_statement_cache_size: int = Field(
        default=100,
        ge=0,
        description="asyncpg's prepared-statement cache per pool connection; 0 behind "
        "pgbouncer in transaction pooling mode.",
    )
    post_group_commit_max: int = Field(
        default=32,
        ge=1,
        le=1000,
        description="Most concurrent posts to one conversation that share one transaction "
        "(group commit, each in its own savepoint); 1 gives every post its own.",
    )
    data_dir: Path = Path(".data")
    migrate_on_start: bool = True
    db_pool_min: int = Field(default=1, gt=0)
    db_pool_max: int = Field(default=10, gt=0)
    db_acquire_timeout_seconds: float = Field(
        default=5.0,
        gt=0,
        description="Longest wait for a free pool connection; then 503 `database_busy` with "
        "Retry-After instead of queueing without bound.",
    )
    db_statement_timeout_seconds: float = Field(
        default=30.0,
        ge=0,
        description="PostgreSQL `statement_timeout` of the pool's connections (0 = none); a "
        "cancelled statement answers 503 `database_busy`.",
    )
    access_log: Literal["off", "sampled", "on"] = Field(
        default="off",
        description="HTTP access log of `confer serve`: off, sampled or on; written by a "
        "background thread, never by the event loop.",
    )
    access_log_sample_every: int = Field(
        default=100, gt=0, description="`sampled`: log one request in this many (and every 5xx)."
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="`confer serve` log lines: text, or one JSON object per line with "
        "request_id and did.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    metrics: bool = Field(
        default=True, description="Serve Prometheus metrics at /metrics (off: 404)."
    )
    metrics_token: str | None = Field(
        default=None,
        description="When set, /metrics wants `Authorization: Bearer <token>` (else 401).",
    )
    otlp_endpoint: str | None = Field(
        default=None,
        description="OpenTelemetry traces: the OTLP/HTTP base URL of a collector (spans are "
        "POSTed to <endpoint>/v1/traces); unset = no tracing, nothing of the SDK is loaded.",
    )

    allow_http_dids: bool = Field(
        default=False, description="Resolve did:web over plain http:// (local development only)."
    )
    allow_private_networks: bool = Field(
        default=False,
        description="Turn the outbound address policy off: DID resolution, AgentFacts fetches "
        "and federation deliveries may reach loopback/private addresses (development only).",
    )
    outbound_allowed_networks: list[str] = Field(
        default_factory=list,
        description="CIDR networks exempted from the outbound address policy while it stays on "
        "(e.g. peers on a known private network), as a JSON list.",
    )

    access_token_ttl_seconds: int = Field(default=900, gt=0)
    session_ttl_seconds: int = Field(default=30 * 24 * 3600, gt=0)
    refresh_grace_seconds: int = Field(
        default=10,
        ge=0,
        description="Re-presenting the refresh token just rotated away within this many "
        "seconds returns the same new pair (two tabs refreshing at once); later it revokes.",
    )
    oauth_access_token_ttl_seconds: int = Field(
        default=900,
        gt=0,
        description="Lifetime of an OAuth access token for /mcp (MCP sign-in); its rotating "
        "refresh token lives as long as a session (`session_ttl_seconds`).",
    )
    oauth_code_ttl_seconds: int = Field(
        default=60, gt=0, description="Lifetime of an OAuth authorization code once approved."
    )
    oauth_consent_ttl_seconds: int = Field(
        default=600, gt=0, description="How long an OAuth authorization request awaits consent."
    )
    oauth_client_cache_seconds: int = Field(
        default=300,
        ge=0,
        description="How long a fetched OAuth client ID metadata document is reused.",
    )
    oauth_client_metadata_max_bytes: int = Field(
        default=5120, gt=0, description="Largest client ID metadata document Confer reads."
    )
    oauth_allow_http_client_ids: bool = Field(
        default=False,
        description="Accept http:// client ID metadata document URLs (local development and "
        "tests only; the MCP spec requires https).",
    )
    max_body_bytes: int = Field(default=1024 * 1024, gt=0)
    max_message_chars: int = Field(default=32_000, gt=0)
    message_requests_default: bool = Field(
        default=True,
        description="Hold a stranger's first message apart as a message request for users who "
        "never set preferences.privacy.message_requests.",
    )
    max_group_members: int = Field(
        default=256,
        ge=2,
        description="Most participants a group may have, its creator included (422 beyond).",
    )
    group_backfill_messages: int = Field(
        default=200,
        ge=0,
        le=10_000,
        description="How many of a group's latest messages its home sends, as history, to an "
        "instance one of whose users or agents joins (what that instance lacks of them); "
        "0 sends none.",
    )

    signature_window_seconds: int = Field(default=60, gt=0)
    signature_max_age_seconds: int = Field(default=300, gt=0)
    signature_clock_skew_seconds: int = Field(default=5, ge=0)
    peer_cache_ttl_seconds: int = Field(default=60, gt=0)
    outbound_timeout_seconds: float = Field(default=10.0, gt=0)
    delivery_max_attempts: int = Field(default=16, gt=0)
    delivery_park_after_failures: int = Field(
        default=8, description="Consecutive failures after which a destination is parked."
    )
    delivery_probe_seconds: float = Field(
        default=600.0, description="How often a parked destination is probed."
    )
    federation_batch_max_items: int = Field(
        default=50,
        ge=1,
        le=500,
        description="Most deliveries carried in one JSON-RPC batch request, sent and accepted "
        "(the batch extension of the Agent Card); 1 turns batching off.",
    )
    federation_batch_max_bytes: int = Field(
        default=512 * 1024,
        ge=4096,
        description="Largest JSON-RPC batch body sent or accepted, in bytes (never more than "
        "CONFER_MAX_BODY_BYTES is accepted).",
    )
    federation_batch_concurrency: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Requests in flight at once to one destination; no two carry deliveries "
        "of the same conversation.",
    )
    a2a_push_max_configs_per_task: int = Field(
        default=10,
        gt=0,
        le=100,
        description="Most A2A push-notification configs (webhooks) one task may have.",
    )
    a2a_push_disable_after_failures: int = Field(
        default=8,
        gt=0,
        description="Consecutive failed deliveries after which a push-notification config is "
        "disabled (Get/List show it; creating it again re-enables it).",
    )
    a2a_push_backoff_base_seconds: float = Field(
        default=1.0,
        gt=0,
        description="Delay before a push notification's first retry, doubling per attempt "
        "(capped at 10 minutes).",
    )

    ws_queue_size: int = Field(default=256, gt=0)
    ws_max_connections_per_user: int = Field(
        default=32,
        gt=0,
        description="WebSocket connections one user may hold (on every process together when"
        " CONFER_REDIS_URL is set, else on each); the next is closed with 4029.",
    )
    proxy_headers: bool = Field(
        default=False,
        description="Trust X-Forwarded-For/-Proto from forwarded_allow_ips (behind a reverse "
        "proxy); off = the client is the TCP peer.",
    )
    forwarded_allow_ips: str = Field(
        default="127.0.0.1",
        description="Comma-separated proxy addresses or networks whose X-Forwarded-* headers "
        "are trusted when proxy_headers is on ('*' = any).",
    )

    embedding_base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible base URL (…/v1) whose /embeddings feeds semantic search;"
        " unset = full-text search only.",
    )
    embedding_model: str = Field(default="text-embedding-3-small", min_length=1, max_length=128)
    embedding_api_key: str | None = None
    search_similarity_threshold: float = 0.3
    embed_messages: bool = Field(
        default=True,
        description="Embed messages in the background so semantic search covers them (needs"
        " embedding_base_url and pgvector); false keeps message text away from the endpoint.",
    )
    message_embedding_batch: int = Field(
        default=32, gt=0, le=2048, description="Messages embedded per request to the endpoint."
    )
    message_embedding_poll_seconds: float = Field(
        default=2.0, gt=0, description="How often the message indexer looks for new messages."
    )
    agent_context_tokens: int = 8000
    agent_history_tokens: int = 4000
    agent_task_max_attempts: int = 3
    agent_task_lease_seconds: float = Field(
        default=60.0,
        ge=1.0,
        description="A running agent task's lease, renewed every third of it while it runs;"
        " a task whose process died is retried once its lease has run out.",
    )
    agent_max_running_per_owner: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="Agent tasks running at once for one owner's agents, across processes; "
        "more wait queued.",
    )
    agent_max_running_per_peer: int = Field(
        default=2,
        ge=1,
        le=1000,
        description="Agent tasks running at once that one peer DID's messages started, across "
        "processes and owners; more wait queued.",
    )
    agent_queue_stream: str = Field(
        default="CONFER_AGENT_TASKS",
        pattern=r"^[A-Za-z0-9_-]+$",
        description="JetStream stream of agent task dispatches (with CONFER_NATS_URL).",
    )
    agent_queue_consumer: str = Field(
        default="confer-agent-workers",
        pattern=r"^[A-Za-z0-9_-]+$",
        description="The durable pull consumer every Confer process shares.",
    )
    agent_queue_subject_prefix: str = Field(
        default="",
        pattern=r"^([A-Za-z0-9_-]+\.)*$",
        description="Prepended to agent.{agent_id}.tasks (e.g. 'staging.') so several"
        " deployments can share one NATS.",
    )
    agent_queue_max_age_seconds: float = Field(
        default=3600.0, gt=0, description="JetStream drops dispatches older than this."
    )
    agent_queue_sweep_seconds: float | None = Field(
        default=None,
        gt=0,
        description="How often workers look for queued tasks on their own; unset = 2 s with"
        " PostgreSQL NOTIFY, 30 s with NATS.",
    )
    llm_timeout_seconds: float = 60.0
    llm_providers: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description='Extra provider endpoints, JSON: {"id": {"base_url": …, "wire": "openai"}};'
        ' add "stream_usage": "true" when an OpenAI-compatible server accepts stream_options.',
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_level(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("llm_providers")
    @classmethod
    def _check_llm_providers(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        """Each endpoint: an id of 1–64 ``[a-z0-9._-]``, an http(s) ``base_url``, ``wire``
        ``openai`` (default) or ``anthropic``, optional ``stream_usage`` ``true``/``false``."""
        for provider_id, endpoint in value.items():
            if not re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,63}", provider_id):
                raise ValueError(f"provider id {provider_id!r}: 1-64 of a-z 0-9 . _ -")
            unknown = set(endpoint) - {"base_url", "wire", "stream_usage"}
            if unknown:
                raise ValueError(f"provider {provider_id!r}: unknown keys {sorted(unknown)}")
            if not str(endpoint.get("base_url", "")).startswith(("http://", "https://")):
                raise ValueError(f"provider {provider_id!r}: base_url must be an http(s) URL")
            if endpoint.get("wire", "openai") not in WIRE_FORMATS:
                raise ValueError(f"provider {provider_id!r}: wire is one of {WIRE_FORMATS}")
            if str(endpoint.get("stream_usage", "false")).lower() not in ("true", "false"):
                raise ValueError(f"provider {provider_id!r}: stream_usage is true or false")
        return value

    @model_validator(mode="after")
    def _default_public_url(self) -> Settings:
        if not self.public_url:
            self.public_url = f"http://localhost:{self.port}"
        return self

    @model_validator(mode="after")
    def _s3_needs_a_bucket(self) -> Settings:
        if self.attachment_storage == "s3" and not self.s3_bucket:
            raise ValueError("attachment_storage 's3' needs CONFER_S3_BUCKET")
        if bool(self.s3_access_key_id) != bool(self.s3_secret_access_key):
            raise ValueError("set both CONFER_S3_ACCESS_KEY_ID and CONFER_S3_SECRET_ACCESS_KEY")
        return self

    permission_ttl_seconds: int = Field(
        default=24 * 3600, description="How long a consent request waits before it is denied."
    )
    permission_sweep_seconds: float = 30.0

    peer_rate_limit_domain: str = Field(
        default="1200/minute", description="Inbound budget per peer domain (limits syntax)."
    )
    peer_rate_limit_agent: str = Field(
        default="600/minute", description="Inbound budget per peer DID (limits syntax)."
    )
    did_fetch_budget_host: str = Field(
        default="120/minute;1000/hour",
        description="DID document (and AgentFacts) fetches to one host, however triggered "
        "(limits syntax); beyond it a cached document is used, else did_unresolvable.",
    )
    did_fetch_budget_did: str = Field(
        default="12/minute;60/hour",
        description="Fetches of one DID's document: revalidations and refetches after an "
        "unknown keyid (limits syntax).",
    )
    did_fetch_concurrency_host: int = Field(
        default=4, ge=1, le=64, description="DID fetches to one host at once, per process."
    )
    did_failure_ttl_seconds: int = Field(
        default=30,
        ge=1,
        le=3600,
        description="A failed DID lookup (unreachable, 404, malformed or oversized document) "
        "is answered from memory this long; an unreachable host for all of its DIDs.",
    )

    # Accounts (docs/accounts.md).
    admin_usernames: str = Field(
        default="",
        description="Usernames that are admins (bootstrap): comma-separated or a JSON list.",
    )
    encryption_keys: str | None = Field(
        default=None,
        description="AES-256 keys for stored LLM keys: 'kid:base64url(32 bytes)', comma-"
        "separated, the first one encrypts new data (docs/accounts.md).",
    )
    rate_limit_prefix: str = "confer"
    rate_limit_login_ip: str = "30/minute;300/hour"
    rate_limit_login_account: str = "10/minute;50/hour"
    rate_limit_register_ip: str = "20/hour"
    rate_limit_oauth_ip: str = Field(
        default="60/minute;600/hour",
        description="Unauthenticated OAuth requests per client IP: client registrations and "
        "authorization requests (each may fetch a client ID metadata document).",
    )
    rate_limit_uploads: str = Field(
        default="30/minute;300/hour",
        description="Attachment uploads one user may start (limits syntax).",
    )
    rate_limit_reports: str = Field(
        default="10/hour;50/day", description="Reports one user may file (limits syntax)."
    )
    argon2_time_cost: int = Field(default=3, ge=1)
    argon2_memory_kib: int = Field(default=65536, ge=8)
    argon2_parallelism: int = Field(default=4, ge=1)
    argon2_max_concurrency: int = Field(
        default=4, ge=1, description="Password hashes computed at once (64 MiB each)."
    )
    ws_replay_window: int = Field(
        default=1000, description="Events per user a reconnecting device can replay."
    )
    ws_replay_max_age_seconds: int = Field(
        default=7 * 24 * 3600, description="Stored events older than this are trimmed."
    )
    # Retention (gateway/workers/retention.py, docs/retention.md).
    retention_interval_seconds: float = Field(
        default=300.0, gt=0, description="How often the retention worker deletes old rows."
    )
    retention_batch_size: int = Field(
        default=1000, gt=0, le=100_000, description="Rows deleted per statement (short locks)."
    )
    message_retention_days: int | None = Field(
        default=None,
        ge=1,
        le=3650,
        description="Messages older than this many days are purged (unset: kept forever);"
        " a conversation may choose a shorter retention, never a longer one.",
    )
    retention_inbox_seconds: int = Field(
        default=24 * 3600,
        ge=0,
        description="Inbound de-duplication rows of deleted messages are kept this long after"
        " the message arrived; rows of visible messages map the peer's ids and stay.",
    )
    retention_outbox_delivered_seconds: int = Field(
        default=7 * 24 * 3600,
        ge=0,
        description="Delivered edits, deletes and decisions leave the outbox this long after"
        " delivery; a message's original send stays (later edits and deletes follow it).",
    )
    retention_outbox_failed_seconds: int = Field(
        default=30 * 24 * 3600,
        ge=0,
        description="Deliveries given up on leave the outbox this long after they failed.",
    )
    retention_permissions_seconds: int = Field(
        default=30 * 24 * 3600,
        ge=0,
        description="allow_once and deny decisions (expired requests included) are deleted"
        " this long after the decision; allow_always grants stay.",
    )
    concept_decay_interval_seconds: float = Field(
        default=3600.0,
        gt=0,
        description="How often the concept memory's weights decay and faded concepts turn"
        " dormant or archived (gateway/workers/concept_decay.py).",
    )
    auth_cache_seconds: float = Field(
        default=2.0,
        ge=0,
        le=60,
        description="How long a process trusts a device session it checked, so a request "
        "authenticates without the database (0 = check every request). Revocation stays exact: "
        "ended sessions are announced to every process (NOTIFY confer_sessions).",
    )
    ws_session_check_seconds: float = Field(
        default=10.0, gt=0, description="How often a WebSocket re-checks its device session."
    )
    ws_ping_interval_seconds: float = 25.0
    ws_ping_timeout_seconds: float = 20.0
    ws_compression: bool = Field(
        default=False,
        description="Offer permessage-deflate (RFC 7692) on /v1/ws. Off by default: it keeps"
        " about 40 KiB of zlib state per connection and compresses every fanned-out frame once"
        " per socket instead of sharing one encoding (docs/websocket.md, 'Fan-out').",
    )
    ws_allowed_origins: list[str] = Field(
        default_factory=list,
        description="Browser origins allowed on /v1/ws besides public_url's ('*' = any).",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Origins allowed to call the REST API from a browser (CORS); a JSON list,"
        ' e.g. ["https://app.example"]; ["*"] = any. Default none.',
    )
    typing_interval_seconds: float = Field(
        default=3.0, description="At most one typing event per user and conversation per this."
    )
    attachment_max_bytes: int = Field(
        default=25 * 1024 * 1024, gt=0, description="Largest attachment upload, in bytes."
    )
    attachment_quota_bytes: int = Field(
        default=1024 * 1024 * 1024,
        gt=0,
        description="Bytes of uploads one user may keep stored (sent or not; files peers sent "
        "them do not count); beyond it an upload is 413 attachment_quota_exceeded.",
    )
    attachment_orphan_seconds: float = Field(
        default=24 * 3600.0,
        gt=0,
        description="Uploads never attached to a message are deleted (row and bytes) this "
        "long after the upload.",
    )
    attachment_reap_interval_seconds: float = Field(
        default=600.0, gt=0, description="How often unsent uploads past their age are deleted."
    )
    attachment_fetch_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        description="Longest fetch of a peer's file from its sender's instance, whole body.",
    )
    attachment_fetch_max_attempts: int = Field(
        default=6, gt=0, description="Fetches of a peer's file before it is given up on."
    )
    attachments_dir: Path | None = Field(
        default=None, description="Where uploads are stored; unset = <data_dir>/attachments."
    )
    # S3-compatible attachment storage (gateway/storage_s3.py, docs/operations.md).
    attachment_storage: Literal["local", "s3"] = Field(
        default="local",
        description="Where attachment bytes live: `local` (attachments_dir) or `s3` (an "
        "S3-compatible bucket, the s3_* settings).",
    )
    s3_endpoint_url: str | None = Field(
        default=None,
        description="The S3-compatible service's URL (e.g. http://127.0.0.1:9000 for MinIO); "
        "unset = AWS S3 of s3_region.",
    )
    s3_region: str = Field(default="us-east-1", description="The bucket's region (SigV4).")
    s3_bucket: str = Field(default="", description="The bucket (must exist); required for s3.")
    s3_prefix: str = Field(
        default="",
        pattern=r"^([A-Za-z0-9._-]+/)*$",
        description="Prepended to every object key (e.g. 'confer/'), to share a bucket.",
    )
    s3_access_key_id: str | None = Field(
        default=None, description="Access key; unset = the SDK's default credential chain."
    )
    s3_secret_access_key: str | None = None
    s3_path_style: bool = Field(
        default=False,
        description="Address the bucket in the path (http://host/bucket/key), as MinIO and "
        "most self-hosted services want; false = virtual-hosted style (bucket.host).",
    )
    pg_bin_dir: Path | None = Field(
        default=None,
        description="Folder of pg_dump and pg_restore for confer backup/restore; unset = the "
        "oldest new enough among pgserver's, PATH's and /usr/lib/postgresql/*/bin.",
    )
    nats_url: str | None = Field(
        default=None, description="NATS server for the event bus; unset = in-process bus."
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis for presence, typing, rate limits and signature nonces;"
        " unset = in-process.",
    )
    backend_connect_timeout_seconds: float = Field(
        default=15.0,
        gt=0,
        description="How long start-up tries to reach NATS and Redis (nats_url, redis_url)"
        " before refusing to start (docs/operations.md).",
    )
    # Notifications and e-mail (docs/notifications.md).
    web_push: bool = Field(
        default=True,
        description="Send Web Push notifications (RFC 8030/8291/8292) to subscribed browsers;"
        " the VAPID key is generated on first start and kept in the database.",
    )
    push_subject: str | None = Field(
        default=None,
        description="VAPID `sub` claim: a mailto: or https: contact for push services;"
        " unset = mailto:<smtp_from> when set, else public_url.",
    )
    push_ttl_seconds: int = Field(
        default=24 * 3600,
        ge=0,
        le=28 * 24 * 3600,
        description="How long a push service keeps an undelivered notification (TTL).",
    )
    notify_quiet_seconds: float = Field(
        default=10.0,
        gt=0,
        description="A burst of messages to a user with no device connected becomes one"
        " notification once no new one has come for this long,",
    )
    notify_max_delay_seconds: float = Field(
        default=60.0,
        gt=0,
        description="or once its first message is this old (a steady stream still notifies).",
    )
    notify_retry_seconds: float = Field(
        default=30.0,
        gt=0,
        description="First retry delay of a notification no channel took (doubling, ≤ 1 h).",
    )
    notify_max_attempts: int = Field(
        default=5, gt=0, description="Attempts before a notification is given up on."
    )
    smtp_host: str | None = Field(
        default=None,
        description="SMTP server for notification and password-reset e-mail; unset = no e-mail.",
    )
    smtp_port: int = Field(default=587, ge=1, le=65535)
    smtp_username: str | None = None
    smtp_password: str | None = None
    smtp_from: str = Field(
        default="", description="From address of Confer's e-mail; unset = confer@<public host>."
    )
    smtp_tls: Literal["starttls", "tls", "none"] = Field(
        default="starttls",
        description="starttls (upgrade a plain connection, e.g. port 587), tls (implicit TLS,"
        " port 465) or none (a relay on loopback only).",
    )
    smtp_timeout_seconds: float = Field(default=30.0, gt=0)
    password_reset_ttl_seconds: int = Field(
        default=1800, gt=0, le=24 * 3600, description="How long a password-reset token works."
    )
    rate_limit_reset_ip: str = Field(
        default="10/hour", description="Password-reset requests and confirmations per client IP."
    )
    rate_limit_reset_account: str = Field(
        default="3/hour", description="Reset e-mails per account (more are silently not sent)."
    )

    @field_validator("admin_usernames")
    @classmethod
    def _admins_are_a_list(cls, value: str) -> str:
        # comma-separated, or a JSON list like the other list settings; a broken JSON list
        # would otherwise make nobody an admin without a word
        if value.strip().startswith("["):
            parsed = json.loads(value)  # ValueError says where it breaks
            if not isinstance(parsed, list) or not all(isinstance(n, str) for n in parsed):
                raise ValueError("CONFER_ADMIN_USERNAMES: a JSON list of usernames")
        return value

    @field_validator(
        "peer_rate_limit_domain",
        "peer_rate_limit_agent",
        "did_fetch_budget_host",
        "did_fetch_budget_did",
        "rate_limit_login_ip",
        "rate_limit_login_account",
        "rate_limit_register_ip",
        "rate_limit_oauth_ip",
        "rate_limit_reports",
        "rate_limit_reset_ip",
        "rate_limit_reset_account",
    )
    @classmethod
    def _rate_limits_parse(cls, value: str) -> str:
        # checked here, before anything starts, not when the limiter is built; ``limits``
        # loads only when such a setting is given (validators skip the defaults)
        from limits import parse_many

        parse_many(value)  # ValueError: "couldn't parse rate limit string 'lots'"
        return value

    @field_validator("encryption_keys")
    @classmethod
    def _encryption_keys_parse(cls, value: str | None) -> str | None:
        from gateway.services.encryption import Keyring

        Keyring.from_setting(value)  # ValueError naming the bad entry
        return value

    @field_validator("outbound_allowed_networks")
    @classmethod
    def _networks_are_cidrs(cls, value: list[str]) -> list[str]:
        for network in value:
            ipaddress.ip_network(network)  # ValueError names the bad entry
        return value

    @field_validator("otlp_endpoint")
    @classmethod
    def _otlp_endpoint_is_a_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("otlp_endpoint must be an absolute http(s) URL")
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url_is_a_base(cls, value: str) -> str:
        if not value:
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("public_url must be an absolute http(s) URL")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError("public_url must not have a path, query or fragment")
        base = f"{parts.scheme}://{parts.netloc}"
        try:  # the instance DID is derived from it: a did:web host is a name, never an IP
            did_from_base_url(base)
        except InvalidDIDError as exc:
            raise ValueError(str(exc)) from None
        return base

    @property
    def instance_did(self) -> str:
        """The instance's own DID, e.g. ``did:web:confer.example`` (did:web §3.1)."""
        return did_from_base_url(self.public_url)
