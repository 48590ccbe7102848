"""The instance's identity: its DID, its Ed25519 keys, and the DIDs of its users and agents.

Every user and agent DID lives under the instance DID (``did:web:<host>:users:<name>``,
``did:web:<host>:agents:<id>``); its DID document lists the instance's federation keys under
its own verification method ids, controlled by the instance DID, and its A2A service endpoint.
Source: did:web §3.1–3.2, DID Core §5.2, Multikey.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import asyncpg
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from a2a.auth import RequestSigner
from a2a.signatures import DEFAULT_COMPONENTS
from did.document import build_did_document
from did.web import did_from_base_url
from gateway.errors import PublicURLChangedError
from gateway.ids import new_id
from gateway.store import instance as instance_store
from gateway.store import keys as keys_store
from gateway.store import users as users_store

A2A_SERVICE_TYPE = "A2AService"
AGENT_FACTS_SERVICE_TYPE = "AgentFacts"
FEDERATION = "federation"
ACCESS_TOKEN = "access_token"


@dataclass(frozen=True)
class InstanceKey:
    """A private key and the fragment of its verification method (``#key-1``)."""

    fragment: str
    private_key: Ed25519PrivateKey
    retired: bool

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The Ed25519 public key."""
        return self.private_key.public_key()


@dataclass(frozen=True)
class Identity:
    """The instance's public URL, DID and keys. Built once per process in the lifespan."""

    public_url: str
    did: str
    federation_keys: tuple[InstanceKey, ...]
    token_key: InstanceKey
    signature_window: int = 60

    @property
    def signing_key(self) -> InstanceKey:
        """The newest key not retired: the one outbound requests are signed with."""
        return [k for k in self.federation_keys if not k.retired][-1]

    def user_did(self, username: str) -> str:
        """``did:web:<host>:users:<username>`` for a local user."""
        return did_from_base_url(self.public_url, "users", quote(username, safe=""))

    def agent_did(self, agent_id: str) -> str:
        """``did:web:<host>:agents:<agent id>`` for a local agent."""
        return did_from_base_url(self.public_url, "agents", agent_id)

    def local_subject(self, did: str) -> tuple[str, str] | None:
        """``("users", name)`` or ``("agents", id)`` when ``did`` is one of ours, else None."""
        prefix = self.did + ":"
        if not did.startswith(prefix):
            return None
        parts = did[len(prefix) :].split(":")
        if len(parts) != 2 or parts[0] not in ("users", "agents") or not parts[1]:
            return None
        return parts[0], parts[1]

    def endpoint_for(self, kind: str, name: str) -> str:
        """The A2A JSON-RPC endpoint URL of a local user or agent."""
        return f"{self.public_url}/{kind}/{quote(name, safe='')}/a2a"

    def did_document(
        self, did: str, *, endpoint: str | None, extra_services: Sequence[dict[str, Any]] = ()
    ) -> dict[str, Any]:
        """The DID document for ``did`` (the instance or one of its subjects).

        Lists every federation key not yet removed (retired ones included, so signatures made
        just before a rotation still verify), controlled by the instance DID.
        """
        services = []
        if endpoint:
            services.append(
                {"id": f"{did}#a2a", "type": A2A_SERVICE_TYPE, "serviceEndpoint": endpoint}
            )
        services.extend(extra_services)
        return build_did_document(
            did,
            [(k.fragment, k.public_key) for k in self.federation_keys],
            services=services,
            controller=self.did,
        )

    def signer_for(self, did: str, components: Sequence[str] = DEFAULT_COMPONENTS) -> RequestSigner:
        """An RFC 9421 signer whose ``keyid`` is ``<did>#<active key fragment>``, covering
        ``components`` (a GET has no ``content-type``: :data:`a2a.signatures.FETCH_COMPONENTS`)."""
        key = self.signing_key
        return RequestSigner(
            key.private_key,
            f"{did}#{key.fragment}",
            window=self.signature_window,
            components=components,
        )


async def _ensure_key(conn: asyncpg.Connection, purpose: str) -> list[keys_store.InstanceKeyRow]:
    rows = await keys_store.list_keys(conn, purpose=purpose)
    if not any(r.retired_at is None for r in rows):
        raw = Ed25519PrivateKey.generate().private_bytes_raw()
        await keys_store.insert_key_if_none(
            conn, id=new_id(), purpose=purpose, fragment="key-1", private_key=raw
        )
        rows = await keys_store.list_keys(conn, purpose=purpose)
    return rows


def _key(row: keys_store.InstanceKeyRow) -> InstanceKey:
    private = Ed25519PrivateKey.from_private_bytes(bytes(row.private_key))
    return InstanceKey(row.fragment, private, row.retired_at is not None)


async def load_identity(
    pool: asyncpg.Pool, *, public_url: str, signature_window: int = 60, recorded: bool = False
) -> Identity:
    """Load the instance keys, generating them on first start (kept in ``instance_keys``).

    With ``recorded`` (command-line tools), the public URL the server recorded at its start
    (:func:`check_public_url`) wins over ``public_url``, which is used only before the first
    start: a tool run with another ``CONFER_PUBLIC_URL``/``CONFER_PORT`` than the server's
    must not make users under another DID.
    """
    async with pool.acquire() as conn:
        if recorded and (row := await instance_store.get_instance(conn)) is not None:
            public_url = row.public_url
        federation = await _ensure_key(conn, FEDERATION)
        token = await _ensure_key(conn, ACCESS_TOKEN)
    active_token = [r for r in token if r.retired_at is None][-1]
    return Identity(
        public_url=public_url,
        did=did_from_base_url(public_url),
        federation_keys=tuple(_key(r) for r in federation),
        token_key=_key(active_token),
        signature_window=signature_window,
    )


async def check_public_url(pool: asyncpg.Pool, identity: Identity) -> None:
    """Refuse to start when stored users have DIDs under another instance DID; else record
    ``identity``'s DID and public URL (``instance_identity``) for the command-line tools.

    A did:web DID is derived from the public URL (did:web §3.1); changing the URL silently
    would leave every user with a DID this instance can no longer serve. Raises
    PublicURLChangedError naming both DIDs (and the recorded public URL when there is one).
    """
    async with pool.acquire() as conn, conn.transaction():
        other = await users_store.get_foreign_user_did(conn, instance_did=identity.did)
        if other is None:
            await instance_store.upsert_instance(
                conn, did=identity.did, public_url=identity.public_url
            )
            return
        recorded = await instance_store.get_instance(conn)
    served = f" (served until now at {recorded.public_url})" if recorded else ""
    raise PublicURLChangedError(
        f"CONFER_PUBLIC_URL gives the instance DID {identity.did}, but this database holds "
        f"users under another DID{served}, for example {other}. Use the original public URL, "
        "or another database (CONFER_DATABASE_URL / CONFER_DATA_DIR)."
    )
