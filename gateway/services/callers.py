"""Who is calling, once the edge has authenticated the request: plain values for the services.

The edge (:mod:`gateway.federation_auth`, :mod:`gateway.a2a_callers`) verifies an RFC 9421
signature or an API key and hands the services one of these; services never see an unverified
request (Synapse's "verified origin").
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.store.api_keys import ApiKeyRow
from models import PeerAgentRow


@dataclass(frozen=True)
class VerifiedPeer:
    """A peer whose signature over this request verified: who, with which key, and the body."""

    peer: PeerAgentRow
    keyid: str
    body: bytes


@dataclass(frozen=True)
class A2ACaller:
    """An authenticated caller. ``ref`` (``peer:<did>`` / ``key:<id>``) owns its tasks."""

    ref: str
    body: bytes
    peer: VerifiedPeer | None = None
    api_key: ApiKeyRow | None = None

    @property
    def origin(self) -> str:
        """The de-duplication origin of its messages: the peer DID, or ``key:<id>``."""
        return self.peer.peer.did if self.peer else self.ref
