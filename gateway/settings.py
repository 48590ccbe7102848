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

    # Accounts (docs/accounts.md).
    admin_usernames: str = Field(
        default="", description="Comma-separated usernames that are admins (bootstrap)."
    )
    encryption_keys: str | None = Field(
        default=None,
        description="AES-256 keys for stored LLM keys: 'kid:base64url(32 bytes)', comma-"
        "separated, the first one encrypts new data (docs/llm-keys.md).",
    )
    redis_url: str | None = Field(
        default=None, description="redis://… for shared rate limits; unset = in-process."
    )
    rate_limit_prefix: str = "confer"
    rate_limit_login_ip: str = "30/minute;300/hour"
    rate_limit_login_account: str = "10/minute;50/hour"
    rate_limit_register_ip: str = "20/hour"
    argon2_time_cost: int = Field(default=3, ge=1)
    argon2_memory_kib: int = Field(default=65536, ge=8)
    argon2_parallelism: int = Field(default=4, ge=1)
    argon2_max_concurrency: int = Field(
        default=4, ge=1, description="Password hashes computed at once (64 MiB each)."
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
