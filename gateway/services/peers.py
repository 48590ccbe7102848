"""Peers: remote users and agents known by DID, cached in ``peer_agents``.

Store first, fetch on miss (Synapse's remote-key pattern): a cached row is fresh for
``ttl`` seconds (60 by default, DESIGN "Identity"); after that it is revalidated with
``If-None-Match`` and a 304 only refreshes ``fetched_at``. An unknown ``keyid`` forces one
refetch (key rotation), at most once per ``refetch_interval`` per DID. Failed lookups (the
host unreachable, a 404, a malformed document) are remembered for ``failure_ttl`` seconds.
Every network fetch spends the host's and the DID's budget (``services.did_budget``); when it
is spent, a cached row is used even if stale.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import asyncpg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from did.document import DIDDocument, parse_did_document
from did.errors import DIDDocumentError, DIDError, DIDKeyError, DIDResolutionError
from did.keys import ed25519_public_to_jwk, jwk_to_ed25519_public
from did.resolver import DIDResolver, ResolvedDocument
from did.web import did_to_url, split_did_url
from gateway.clock import Clock
from gateway.metrics import DID_RESOLUTIONS
from gateway.services.did_budget import DIDBudgetExhaustedError, KeyedLocks, ResolutionBudget
from gateway.services.federation_policy import FederationPolicy
from gateway.services.identity import A2A_SERVICE_TYPE, AGENT_FACTS_SERVICE_TYPE, Identity
from gateway.services.public_profiles import PROFILE_SERVICE_TYPE, clean_profile
from gateway.store import peers as peers_store
from gateway.store import users as users_store
from models import Agent, PeerAgentRow, User

log = logging.getLogger(__name__)


def _authentication_keys(document: DIDDocument) -> dict[str, Any]:
    keys = []
    for vm_id in sorted(document.authentication):
        try:
            public = document.authentication_key(vm_id)
        except DIDKeyError:
            continue
        keys.append(
            {"id": vm_id, "type": "JsonWebKey2020", "publicKeyJwk": ed25519_public_to_jwk(public)}
        )
    return {"authentication": keys}


def _endpoint(did: str, document: DIDDocument, allow_http: bool) -> str:
    endpoint = document.service_endpoint(A2A_SERVICE_TYPE)
    if not endpoint:
        raise DIDDocumentError(f"{did} has no {A2A_SERVICE_TYPE} service endpoint")
    # The endpoint must live on the DID's own origin: a document may not point us elsewhere.
    if not _same_origin(did, endpoint, allow_http):
        raise DIDDocumentError(f"{did}: A2A endpoint {endpoint!r} is not on the DID's origin")
    return endpoint


def _same_origin(did: str, url: str, allow_http: bool) -> bool:
    expected = urlsplit(did_to_url(did, allow_http=allow_http))
    actual = urlsplit(url)
    return (actual.scheme, actual.netloc) == (expected.scheme, expected.netloc)


def find_key(peer: PeerAgentRow, keyid: str) -> Ed25519PublicKey | None:
    """The cached authentication key with verification method id ``keyid``, or None."""
    cached = peer.public_key_json
    entries = cached.get("authentication") if isinstance(cached, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("id") == keyid:
            jwk = entry.get("publicKeyJwk")
            return jwk_to_ed25519_public(jwk) if isinstance(jwk, dict) else None
    return None


def _facts(cached: PeerAgentRow | None) -> dict[str, Any]:
    facts = cached.agent_facts_json if cached else None
    return facts if isinstance(facts, dict) else {}


MAX_REMEMBERED_FAILURES = 10_000
Profile = tuple[str | None, str | None]
"""A peer's cleaned public profile: display name and avatar URL."""
NO_PROFILE: Profile = (None, None)

KEY_MEMO_SECONDS = 5.0
"""How long a verified request's ``(peer, key)`` is reused from memory for the same ``keyid``
(never past the peer's cache TTL): a busy peer costs no ``peer_agents`` read and no key
parsing per request, and a change of the row (a rename) shows within seconds."""

MAX_KEY_MEMOS = 10_000


class LocalDocuments:
    """DID documents of this instance's own users and agents, built without any network call.

    A local user is a peer like any other (a contact, a conversation participant), but fetching
    our own documents over HTTP would be wasteful and, behind the SSRF rules, impossible on a
    loopback development instance.
    """

    def __init__(self, pool: asyncpg.Pool, identity: Identity) -> None:
        self._pool = pool
        self._identity = identity

    async def resolve(self, did: str) -> ResolvedDocument | None:
        """The document of a local DID (``url`` = its A2A endpoint); None for foreign DIDs.

        Raises DIDResolutionError for a local DID that names no existing user or agent.
        """
        identity = self._identity
        subject = identity.local_subject(did)
        if subject is None:
            return None
        kind, name = subject
        found: User | Agent | None
        async with self._pool.acquire() as conn:
            if kind == "users":
                found = await users_store.get_user_by_username(conn, username=name)
            else:
                found = await users_store.get_agent(conn, id=name)
        if found is None or found.did != did:
            raise DIDResolutionError(f"{did}: no such {kind[:-1]} on this instance")
        endpoint = identity.endpoint_for(kind, name)
        document = parse_did_document(
            identity.did_document(did, endpoint=endpoint), expected_did=did
        )
        return ResolvedDocument(document=document, etag=None, not_modified=False, url=endpoint)


class PeerDirectory:
    """Resolves peer DIDs through the ``peer_agents`` cache. One per process."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        resolver: DIDResolver,
        clock: Clock,
        *,
        ttl: int = 60,
        refetch_interval: int = 10,
        allow_http: bool = False,
        local: LocalDocuments | None = None,
        failure_ttl: int = 10,
        policy: FederationPolicy | None = None,
        budget: ResolutionBudget | None = None,
    ) -> None:
        self._pool = pool
        self._policy = policy
        self._budget = budget
        self._local = local
        self._failure_ttl = timedelta(seconds=failure_ttl)
        self._failures: dict[str, tuple[datetime, DIDError]] = {}
        self._resolver = resolver
        self._clock = clock
        self._ttl = timedelta(seconds=ttl)
        self._refetch_interval = timedelta(seconds=refetch_interval)
        self._allow_http = allow_http
        self._locks = KeyedLocks()
        self._keys: dict[str, tuple[float, PeerAgentRow, Ed25519PublicKey]] = {}

    async def resolve(self, did: str, *, force: bool = False) -> PeerAgentRow:
        """The peer for ``did``, fetched or revalidated when stale (or ``force``).

        Raises InvalidDIDError, DIDResolutionError or DIDDocumentError (``did.errors``), and
        FederationRefusedError for a peer the instance federation policy refuses (nothing is
        fetched for it).
        """
        if self._policy is not None:
            self._policy.check(did)
        async with self._pool.acquire() as conn:
            cached = await peers_store.get_peer_by_did(conn, did=did)
        if cached and not force and self._clock.now() - cached.fetched_at < self._ttl:
            DID_RESOLUTIONS.labels("cache_hit").inc()
            return cached
        # Single flight per DID: concurrent requests wait for one fetch instead of each
        # revalidating the same stale entry.
        if force:  # an explicit refetch is not answered from the recent-failure cache
            self._failures.pop(did, None)
        async with self._locks.hold(did):
            async with self._pool.acquire() as conn:
                fresh = await peers_store.get_peer_by_did(conn, did=did)
            if fresh and (cached is None or fresh.fetched_at > cached.fetched_at):
                DID_RESOLUTIONS.labels("cache_hit").inc()
                return fresh  # another request refreshed it while we waited
            self._raise_recent_failure(did)
            try:
                peer = await self._fetch(did, fresh)
            except DIDBudgetExhaustedError:  # our own limit, not the peer's failure
                DID_RESOLUTIONS.labels("over_budget").inc()
                raise
            except DIDError as exc:
                DID_RESOLUTIONS.labels("error").inc()
                self._remember_failure(did, exc)
                raise
            DID_RESOLUTIONS.labels("fetched").inc()
            self._forget_keys(did, peer)
            return peer

    def _remember_failure(self, did: str, error: DIDError) -> None:
        now = self._clock.now()
        if len(self._failures) >= MAX_REMEMBERED_FAILURES:  # bounded under a flood of DIDs
            self._failures = {
                d: f for d, f in self._failures.items() if now - f[0] < self._failure_ttl
            }
            if len(self._failures) >= MAX_REMEMBERED_FAILURES:
                self._failures.clear()
        self._failures[did] = (now, error)

    def _raise_recent_failure(self, did: str) -> None:
        """Re-raise a lookup of ``did`` that failed less than ``failure_ttl`` ago.

        Failed lookups are cached briefly so that a flood of requests naming an unreachable or
        slow DID costs one fetch, not one each.
        """
        failure = self._failures.get(did)
        if failure is None:
            return
        when, error = failure
        if self._clock.now() - when < self._failure_ttl:
            raise error
        del self._failures[did]

    async def _fetch(self, did: str, cached: PeerAgentRow | None) -> PeerAgentRow:
        now = self._clock.now()
        local = await self._local.resolve(did) if self._local else None
        if local is not None:  # one of ours: no network, and our own endpoint by definition
            return await self._store(did, cached, local, local.url, {}, now)
        etag = cached.etag if cached else None
        if self._budget is None:
            result = await self._resolver.resolve(did, etag=etag)
        else:
            try:
                host = await self._budget.spend(did)
            except DIDBudgetExhaustedError:
                if cached is None:
                    raise
                return cached  # stale, but better than nothing: the budget is ours
            async with self._budget.fetching(host):
                result = await self._resolver.resolve(did, etag=etag)
        async with self._pool.acquire() as conn:
            if result.not_modified and cached is not None:
                await peers_store.touch_peer(conn, did=did, fetched_at=now)
                return cached.model_copy(update={"fetched_at": now})
            document = result.document
            if document is None:
                raise DIDDocumentError(f"{did}: 304 Not Modified without a cached document")
        endpoint = _endpoint(did, document, self._allow_http)
        facts = await self._agent_facts(did, document)
        if facts is None:
            stored = cached.agent_facts_json if cached else None
            facts = stored if isinstance(stored, dict) else {}
        profile = await self._profile(did, document)
        peer = await self._store(did, cached, result, endpoint, facts, now)
        async with self._pool.acquire() as conn:
            if profile == NO_PROFILE:
                await peers_store.delete_profile(conn, peer_id=peer.id)
            elif profile is not None:
                name, avatar = profile
                await peers_store.save_profile(
                    conn, peer_id=peer.id, display_name=name, avatar_url=avatar, fetched_at=now
                )
        return peer

    async def _store(
        self,
        did: str,
        cached: PeerAgentRow | None,
        result: ResolvedDocument,
        endpoint: str,
        facts: dict[str, Any],
        now: datetime,
    ) -> PeerAgentRow:
        assert result.document is not None
        label = facts.get("label")
        async with self._pool.acquire() as conn:
            return await peers_store.upsert_peer(
                conn,
                did=did,
                name=label[:128] if isinstance(label, str) else (cached.name if cached else None),
                endpoint=endpoint,
                public_key_json=_authentication_keys(result.document),
                agent_facts_json=facts,
                etag=result.etag,
                fetched_at=now,
            )

    async def _extra(self, did: str, document: DIDDocument, service: str) -> dict[str, Any] | None:
        """The JSON object the document's ``service`` lists on the DID's own origin, fetched
        under the resolver's rules and the DID's budget; None when it lists none, or the fetch
        fails (logged): extras never block resolution."""
        url = document.service_endpoint(service)
        if not url or not _same_origin(did, url, self._allow_http):
            return None
        try:
            if self._budget is None:
                return await self._resolver.fetch_json(url)
            host = await self._budget.spend(did, document=False)
            async with self._budget.fetching(host):
                return await self._resolver.fetch_json(url)
        except DIDError as exc:  # the budget's refusal included
            log.info("%s of %s not fetched: %s", service, did, exc)
            return None

    async def _agent_facts(self, did: str, document: DIDDocument) -> dict[str, Any] | None:
        """The peer's NANDA AgentFacts when its document lists them on its own origin.

        None when it lists none or the fetch fails: AgentFacts are self-asserted extras and
        never block resolution (protocols brief §5.4).
        """
        facts = await self._extra(did, document, AGENT_FACTS_SERVICE_TYPE)
        return facts if facts is not None and facts.get("id") in (None, did) else None

    async def _profile(self, did: str, document: DIDDocument) -> Profile | None:
        """The peer's public profile, cleaned (:func:`public_profiles.clean_profile`):
        ``(name, avatar URL)``, ``(None, None)`` when its document lists none on its own
        origin or nothing in it is usable (so none is cached); None when the fetch fails or
        the profile names another DID (the cached one stays). Never raises: a profile never
        blocks resolution."""
        url = document.service_endpoint(PROFILE_SERVICE_TYPE)
        if not url or not _same_origin(did, url, self._allow_http):
            return NO_PROFILE
        raw = await self._extra(did, document, PROFILE_SERVICE_TYPE)
        return clean_profile(did, raw) if raw is not None else None

    async def authentication_key(self, keyid: str) -> tuple[PeerAgentRow, Ed25519PublicKey]:
        """The peer behind the DID URL ``keyid`` and its key, authorised for authentication.

        Refetches the document once when the key is unknown (rotation), unless it was fetched
        less than ``refetch_interval`` ago. Raises DIDKeyError when the key stays unknown.
        A found key is remembered for :data:`KEY_MEMO_SECONDS` (the federation policy is
        applied every time).
        """
        did, fragment = split_did_url(keyid)
        if fragment is None:
            raise DIDKeyError(f"keyid {keyid!r} is not a DID URL with a fragment")
        memo = self._keys.get(keyid)
        if memo is not None:
            when, peer, known = memo
            fresh = self._clock.now() - peer.fetched_at < self._ttl
            if fresh and time.monotonic() - when < KEY_MEMO_SECONDS:
                if self._policy is not None:
                    self._policy.check(did)
                return peer, known
            del self._keys[keyid]
        peer, key = await self._authentication_key(did, keyid)
        self._forget_keys(did, peer)
        if len(self._keys) >= MAX_KEY_MEMOS:  # bounded under a flood of keyids
            self._keys.clear()
        self._keys[keyid] = time.monotonic(), peer, key
        return peer, key

    def _forget_keys(self, did: str, current: PeerAgentRow) -> None:
        """Drop remembered keys of ``did`` taken from another version of its document than
        ``current`` (a rotation removes a key at once in this process)."""
        prefix = did + "#"
        for keyid in [k for k, m in self._keys.items() if k.startswith(prefix)]:
            if self._keys[keyid][1].fetched_at != current.fetched_at:
                del self._keys[keyid]

    async def _authentication_key(
        self, did: str, keyid: str
    ) -> tuple[PeerAgentRow, Ed25519PublicKey]:
        peer = await self.resolve(did)
        key = find_key(peer, keyid)
        if key is None and self._clock.now() - peer.fetched_at >= self._refetch_interval:
            peer = await self.resolve(did, force=True)
            key = find_key(peer, keyid)
        if key is None:
            raise DIDKeyError(f"{keyid} is not an authentication key of {did}")
        return peer, key
