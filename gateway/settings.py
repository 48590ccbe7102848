"""Instance settings, read from ``CONFER_*`` environment variables (pydantic-settings)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from did.web import did_from_base_url


class Settings(BaseSettings):
    """Everything an operator configures. Every field maps to ``CONFER_<FIELD>``.

    ``public_url`` is the externally visible base URL (scheme, host, optional port; no path).
    The instance DID is derived from it (did:web §3.1), so it must be the name peers reach.
    """

    model_config = SettingsConfigDict(env_prefix="CONFER_", extra="ignore")

    public_url: str = "http://localhost:8000"
    host: str = "127.0.0.1"
    port: int = 8000
    database_url: str | None = Field(
        default=None, description="PostgreSQL URL; unset = embedded PostgreSQL under data_dir."
    )
    data_dir: Path = Path(".data")
    migrate_on_start: bool = True
    db_pool_min: int = 1
    db_pool_max: int = 10

    allow_http_dids: bool = Field(
        default=False, description="Resolve did:web over plain http:// (local development only)."
    )
    allow_private_networks: bool = Field(
        default=False, description="Let the DID resolver reach loopback/private addresses."
    )

    access_token_ttl_seconds: int = 900
    session_ttl_seconds: int = 30 * 24 * 3600
    max_body_bytes: int = 1024 * 1024
    max_message_chars: int = 32_000

    signature_window_seconds: int = 60
    signature_max_age_seconds: int = 300
    signature_clock_skew_seconds: int = 5
    peer_cache_ttl_seconds: int = 60
    outbound_timeout_seconds: float = 10.0
    delivery_max_attempts: int = 16

    ws_queue_size: int = 256
    ws_replay_window: int = Field(
        default=1000, description="Events per user a reconnecting device can replay."
    )
    ws_replay_max_age_seconds: int = Field(
        default=7 * 24 * 3600, description="Stored events older than this are trimmed."
    )
    ws_ping_interval_seconds: float = 25.0
    ws_ping_timeout_seconds: float = 20.0
    ws_allowed_origins: list[str] = Field(
        default_factory=list,
        description="Browser origins allowed on /v1/ws besides public_url's ('*' = any).",
    )
    typing_interval_seconds: float = Field(
        default=3.0, description="At most one typing event per user and conversation per this."
    )
    attachment_max_bytes: int = Field(
        default=25 * 1024 * 1024, description="Largest attachment upload, in bytes."
    )
    attachments_dir: Path | None = Field(
        default=None, description="Where uploads are stored; unset = <data_dir>/attachments."
    )
    nats_url: str | None = Field(
        default=None, description="NATS server for the event bus; unset = in-process bus."
    )
    redis_url: str | None = Field(
        default=None, description="Redis for presence, typing and rate limits; unset = memory."
    )

    @field_validator("public_url")
    @classmethod
    def _public_url_is_a_base(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("public_url must be an absolute http(s) URL")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError("public_url must not have a path, query or fragment")
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def instance_did(self) -> str:
        """The instance's own DID, e.g. ``did:web:confer.example`` (did:web §3.1)."""
        return did_from_base_url(self.public_url)
