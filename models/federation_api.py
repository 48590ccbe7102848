"""API bodies of the federation features (docs/federation.md): API keys for stock A2A clients."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from .base import ConferModel, KeyName, Timestamp, Ulid


class ApiKeyCreate(ConferModel):
    """``POST /v1/api-keys``: issue a bearer key for a stock A2A client."""

    name: KeyName


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


DeliveryState = Literal["queued", "retrying", "delivered", "failed"]
"""Where a message's delivery to one peer stands: ``queued`` (not attempted yet), ``retrying``
(an attempt failed; the next is at ``next_attempt_at``), ``delivered``, ``failed`` (given up
for good; ``reason`` says why)."""


class DeliveryPublic(ConferModel):
    """A message's delivery to one peer (``GET …/messages/{id}/deliveries``, the
    ``message.delivery_updated`` event).

    ``destination`` is the peer instance's host (``host:port``), ``peer_did`` the DID the
    message is addressed to there; ``attempts`` counts the requests sent so far;
    ``next_attempt_at`` is set while ``retrying`` (a parked destination, ``parked``, is probed
    every ``delivery_probe_seconds`` instead); ``reason`` is the last failure.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "01J9Z8Q6X3V5N2K7M4R1T0W8YD",
                    "message_id": "01J9Z8Q6X3V5N2K7M4R1T0W8YC",
                    "destination": "b.example",
                    "peer_did": "did:web:b.example:users:bob",
                    "state": "retrying",
                    "attempts": 2,
                    "next_attempt_at": "2026-11-30T09:15:04Z",
                    "reason": "HTTP 503",
                    "parked": False,
                    "delivered_at": None,
                    "failed_at": None,
                    "created_at": "2026-11-30T09:15:00Z",
                }
            ]
        }
    )

    id: Ulid
    message_id: Ulid
    destination: str
    peer_did: str
    state: DeliveryState
    attempts: int
    next_attempt_at: Timestamp | None = None
    reason: str | None = None
    parked: bool = False
    delivered_at: Timestamp | None = None
    failed_at: Timestamp | None = None
    created_at: Timestamp


class DeliveryList(ConferModel):
    """``GET …/messages/{id}/deliveries``: one entry per peer the message goes to (empty for a
    message no peer takes part in)."""

    items: list[DeliveryPublic]
