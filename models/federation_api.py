"""API bodies of the federation features (docs/federation.md): API keys for stock A2A clients."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from .base import ConferModel, Timestamp, Ulid


class ApiKeyCreate(ConferModel):
    """``POST /v1/api-keys``: issue a bearer key for a stock A2A client."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=128)]


class ApiKeyPublic(ConferModel):
    """An API key as listed: never the secret, only its first characters (``prefix``)."""

    id: Ulid
    name: str
    prefix: str
    created_at: Timestamp
    last_used_at: Timestamp | None = None
    revoked_at: Timestamp | None = None


class ApiKeyIssued(ApiKeyPublic):
    """A new API key: ``key`` is shown this once and cannot be recovered."""

    key: str = Field(description="Send as `Authorization: Bearer <key>`; shown only once.")


class PermissionDecisionCreate(ConferModel):
    """``POST /v1/permissions/{id}/decision``: the owner's answer to a consent request.

    ``scope`` says what an ``allow_always`` covers later: ``peer`` (every action of the peer),
    ``peer_action`` (this action of the peer; the default) or ``global`` (this action, any peer).
    """

    decision: Literal["allow_once", "allow_always", "deny"]
    scope: Literal["peer", "peer_action", "global"] | None = None
