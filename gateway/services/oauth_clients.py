"""Who an OAuth client is: a client ID metadata document, or a dynamically registered client.

The MCP authorization spec (2026) prefers **client ID metadata documents**
(draft-ietf-oauth-client-id-metadata-document): the ``client_id`` is an https URL with a path,
and the JSON document there describes the client (``client_id`` equal to that URL,
``redirect_uris``, ``client_name``). Confer fetches it through the outbound address policy
(:class:`did.outbound.OutboundPolicy`: no private addresses, no redirects), reads at most
``oauth_client_metadata_max_bytes``, and keeps it ``oauth_client_cache_seconds`` in memory.
**Dynamic client registration** (RFC 7591) is the fallback the SDKs still use: the client
POSTs its metadata and gets a ``client_id`` stored in ``oauth_clients``.

Confer's clients are public (RFC 6749 §2.1, ``token_endpoint_auth_method: none``): PKCE binds
each code to the client that asked for it, so no client secret is issued or accepted.
Redirect URIs must be https, http on a loopback host (RFC 8252 §7.3), or a private-use scheme
(RFC 8252 §7.1); never with a fragment.
"""

from __future__ import annotations

import json
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx

from did.errors import DIDError
from did.outbound import OutboundPolicy
from gateway.clock import Clock
from gateway.errors import OAuthClientInvalidError, OAuthError
from gateway.settings import Settings
from gateway.store import oauth as oauth_store
from models.base import clean_name

CACHE_ENTRIES = 512
MAX_REDIRECT_URIS = 10
MAX_URI_CHARS = 2000
MAX_NAME_CHARS = 200
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}


@dataclass(frozen=True)
class OAuthClient:
    """A client Confer can authorize: its id, display name and exact redirect URIs."""

    client_id: str
    client_name: str | None
    redirect_uris: tuple[str, ...]


def redirect_uri_problem(uri: object) -> str | None:
    """Why ``uri`` cannot be a redirect URI (see module docstring), or None if it can."""
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_CHARS:
        return "a redirect URI must be a string of at most 2000 characters"
    parts = urlsplit(uri)
    if not parts.scheme or parts.fragment or "#" in uri:
        return f"{uri!r} is not an absolute URI without a fragment"
    if parts.scheme == "https":
        return None if parts.hostname else f"{uri!r} has no host"
    if parts.scheme == "http":
        host = (parts.hostname or "").lower()
        return None if host in LOOPBACK_HOSTS else f"{uri!r}: http only on a loopback host"
    if parts.scheme in {"javascript", "data", "file", "vbscript"}:
        return f"{uri!r} has a forbidden scheme"
    return None  # a native app's private-use scheme


def _redirect_uris(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or len(value) > MAX_REDIRECT_URIS:
        raise ValueError("redirect_uris must be a list of 1 to 10 URIs")
    for uri in value:
        problem = redirect_uri_problem(uri)
        if problem:
            raise ValueError(problem)
    return tuple(value)


def _name(value: object) -> str | None:
    """``client_name`` as shown on the consent page: cleaned like every name shown to people
    (:func:`models.base.clean_name`: no control, bidi or zero-width characters, so a U+202E
    cannot reverse the heading). Raises ValueError (too long, not a string, NUL, or nothing
    visible left)."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_NAME_CHARS:
        raise ValueError("client_name must be a string of at most 200 characters")
    if "\x00" in value:
        raise ValueError("client_name must not contain NUL characters")
    shown = clean_name(value)
    if shown is None:
        raise ValueError(
            "client_name must contain a visible character (control, bidi, zero-width"
            " characters and surrounding whitespace are removed)"
        )
    return shown


def _public_client(metadata: dict[str, Any]) -> None:
    method = metadata.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise ValueError(f"token_endpoint_auth_method {method!r}: Confer's clients are public")
    if not set(metadata.get("grant_types") or []) <= {"authorization_code", "refresh_token"}:
        raise ValueError("grant_types: only authorization_code and refresh_token")
    if not set(metadata.get("response_types") or []) <= {"code"}:
        raise ValueError("response_types: only code")


class ClientDirectory:
    """Finds clients (metadata documents fetched and cached, registered ones in the database)
    and registers new ones (RFC 7591)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        http: httpx.AsyncClient,
        policy: OutboundPolicy,
        clock: Clock,
        settings: Settings,
    ) -> None:
        self._pool = pool
        self._http = http
        self._policy = policy
        self._clock = clock
        self._settings = settings
        self._cache: OrderedDict[str, tuple[float, OAuthClient]] = OrderedDict()

    def is_metadata_url(self, client_id: str) -> bool:
        """True if ``client_id`` names a metadata document: https (http when
        ``oauth_allow_http_client_ids``), a host, a path other than ``/``, no fragment or
        credentials (CIMD draft §3)."""
        parts = urlsplit(client_id)
        schemes = {"https", "http"} if self._settings.oauth_allow_http_client_ids else {"https"}
        return (
            parts.scheme in schemes
            and bool(parts.hostname)
            and parts.path not in ("", "/")
            and not parts.fragment
            and parts.username is None
            and len(client_id) <= MAX_URI_CHARS
        )

    async def get(self, client_id: str) -> OAuthClient:
        """The client ``client_id``. Raises OAuthClientInvalidError (unknown client, or a
        metadata document that cannot be fetched or is not valid)."""
        if self.is_metadata_url(client_id):
            return await self._metadata_client(client_id)
        if client_id.startswith(("https:", "http:")):
            raise OAuthClientInvalidError(f"{client_id!r} is not a usable client ID URL")
        async with self._pool.acquire() as conn:
            row = await oauth_store.get_client(conn, client_id=client_id)
        if row is None:
            raise OAuthClientInvalidError(f"unknown client_id {client_id!r}")
        # cleaned again: a name registered before names were cleaned is shown cleaned too
        name = clean_name(row["client_name"])
        return OAuthClient(row["client_id"], name, tuple(row["redirect_uris"]))

    async def _metadata_client(self, url: str) -> OAuthClient:
        now = self._clock.time()
        cached = self._cache.get(url)
        if cached is not None and cached[0] > now:
            return cached[1]
        client = _client_from_document(url, await self._fetch(url))
        self._cache[url] = (now + self._settings.oauth_client_cache_seconds, client)
        self._cache.move_to_end(url)
        while len(self._cache) > CACHE_ENTRIES:
            self._cache.popitem(last=False)
        return client

    async def _fetch(self, url: str) -> bytes:
        limit = self._settings.oauth_client_metadata_max_bytes
        request = self._http.build_request("GET", url, headers={"Accept": "application/json"})
        try:
            response = await self._policy.send(self._http, request)
            try:
                if response.status_code != 200:
                    raise OAuthClientInvalidError(
                        f"client metadata document {url} answered HTTP {response.status_code}"
                    )
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > limit:
                        raise OAuthClientInvalidError(
                            f"client metadata document {url} is over {limit} bytes"
                        )
                return bytes(body)
            finally:
                await response.aclose()
        except (httpx.HTTPError, DIDError) as exc:
            raise OAuthClientInvalidError(
                f"cannot fetch client metadata document {url}: {type(exc).__name__} {exc}"
            ) from exc

    async def register(self, metadata: Any) -> dict[str, Any]:
        """Register a client from its RFC 7591 §2 metadata; the §3.2.1 response.

        Raises OAuthError ``invalid_redirect_uri`` / ``invalid_client_metadata`` (§3.2.2)."""
        if not isinstance(metadata, dict):
            raise OAuthError("invalid_client_metadata", "the body must be a JSON object")
        try:
            redirect_uris = _redirect_uris(metadata.get("redirect_uris"))
        except ValueError as exc:
            raise OAuthError("invalid_redirect_uri", str(exc)) from exc
        try:
            name = _name(metadata.get("client_name"))
            # RFC 7591 §2 defaults to client_secret_basic; Confer registers public clients
            # only and says so in its answer (§3.2.1 lets the server replace values).
            _public_client({**metadata, "token_endpoint_auth_method": "none"})
        except ValueError as exc:
            raise OAuthError("invalid_client_metadata", str(exc)) from exc
        client_id = f"confer-client-{secrets.token_urlsafe(18)}"
        stored = {
            "client_name": name,
            "redirect_uris": list(redirect_uris),
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        async with self._pool.acquire() as conn:
            await oauth_store.insert_client(
                conn,
                client_id=client_id,
                client_name=name,
                redirect_uris=list(redirect_uris),
                metadata=stored,
            )
        issued_at = int(self._clock.time())
        return {"client_id": client_id, "client_id_issued_at": issued_at, **stored}


def _client_from_document(url: str, body: bytes) -> OAuthClient:
    """The client a metadata document describes. Raises OAuthClientInvalidError."""
    try:
        document = json.loads(body)
        if not isinstance(document, dict):
            raise ValueError("the document is not a JSON object")
        if document.get("client_id") != url:
            raise ValueError("its client_id is not the URL it was fetched from")
        if "client_secret" in document or "client_secret_expires_at" in document:
            raise ValueError("a metadata document must not carry a client secret")
        _public_client(document)
        return OAuthClient(
            url, _name(document.get("client_name")), _redirect_uris(document.get("redirect_uris"))
        )
    except ValueError as exc:  # also json.JSONDecodeError
        raise OAuthClientInvalidError(f"client metadata document {url}: {exc}") from exc
