"""Async did:web resolver over httpx, hardened for fetching URLs that strangers chose.

did:web §3.2 Read (Resolve) plus the defences DESIGN.md ("Identity") and protocols.md §3.6 ask for:

- The DID is validated before any network call (InvalidDIDError).
- Address policy and DNS-rebinding protection: every request goes through a
  ``did.outbound.OutboundPolicy`` (the addresses of the host are checked, the request is pinned
  to a checked IP with the real ``Host`` and SNI; ``allow_private_networks=True`` switches it
  off for local development and tests). The same policy object governs the gateway's outbound
  deliveries.
- Redirects are followed by hand, at most ``max_redirects``, only to the same host, never from
  https to http, and to http only when ``allow_http`` (agentcommercekit/ack PR #133).
- One deadline, ``timeout`` seconds, covers DNS, connects, redirects and the body.
- The body is asked for uncompressed (``Accept-Encoding: identity``; an encoded body is refused,
  which rules out decompression bombs), capped at ``max_bytes`` both by ``Content-Length`` and
  while streaming, must have a JSON media type, must be UTF-8 JSON nested at most
  ``MAX_JSON_DEPTH`` deep, without duplicate keys or NaN/Infinity, and must be an object.
- The document is then validated by ``parse_did_document`` (``id`` must equal the DID).
- An ``ETag`` (kept to revalidate with ``If-None-Match``) is at most ``MAX_ETAG_LENGTH``
  visible ASCII characters (RFC 9110 §8.8.3); a longer or stranger one fails the resolution.

Every failure is a DIDResolutionError (DIDHostUnreachableError when the host itself could not
be reached or timed out) or DIDDocumentError with a precise ``detail``; no httpx exception
escapes.
"""

import asyncio
import json
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from did.document import DIDDocument, parse_did_document
from did.errors import DIDHostUnreachableError, DIDResolutionError
from did.outbound import DEFAULT_PORTS, IPNetwork, OutboundPolicy
from did.web import did_to_url

ACCEPT = "application/did+json, application/json"
MAX_JSON_DEPTH = 32
MAX_ETAG_LENGTH = 255
"""Longest ``ETag`` kept; the peer cache stores it (``peer_agents.etag VARCHAR(255)``)."""
_JSON_MEDIA_TYPES = frozenset(
    {"application/json", "application/did+json", "application/did+ld+json"}
)
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True)
class ResolvedDocument:
    """The outcome of one resolution.

    ``document`` is None exactly when ``not_modified`` (HTTP 304 to ``If-None-Match``); ``etag``
    is the response's ``ETag`` (on 304 falling back to the one sent); ``url`` is the URL the
    answer finally came from (after redirects).
    """

    document: DIDDocument | None
    etag: str | None
    not_modified: bool
    url: str


class DIDResolver:
    """Resolves did:web DIDs to validated DID documents (module docstring for the policy).

    ``client`` is the shared httpx client (its own redirect setting is overridden per request).
    ``allow_http`` fetches ``http://`` URLs (local development). ``policy`` is the outbound
    address policy shared with the rest of the process; without it one is built from
    ``allow_private_networks`` (turns the policy off) and ``allowed_networks`` (CIDR strings or
    networks exempted from it). ``max_bytes`` caps the body, ``timeout`` (seconds) the whole
    resolution.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        allow_http: bool = False,
        allow_private_networks: bool = False,
        max_bytes: int = 64 * 1024,
        timeout: float = 5.0,
        max_redirects: int = 3,
        allowed_networks: Iterable[str | IPNetwork] = (),
        policy: OutboundPolicy | None = None,
    ) -> None:
        if max_bytes <= 0 or timeout <= 0 or max_redirects < 0:
            raise ValueError("max_bytes and timeout must be positive, max_redirects >= 0")
        self._client = client
        self._allow_http = allow_http
        self._policy = policy or OutboundPolicy.build(
            allow_private_networks=allow_private_networks, allowed_networks=allowed_networks
        )
        self._max_bytes = max_bytes
        self._timeout = timeout
        self._max_redirects = max_redirects

    async def resolve(self, did: str, *, etag: str | None = None) -> ResolvedDocument:
        """Fetch and validate the DID document of ``did`` (did:web §3.2 Read (Resolve)).

        With ``etag`` the request carries ``If-None-Match`` and a 304 answer yields
        ``not_modified=True`` and no document. Raises InvalidDIDError (before any network call),
        DIDResolutionError (network, timeout, status, size, media type, JSON, address, redirect)
        or DIDDocumentError (the document fails ``parse_did_document``).
        """
        url = did_to_url(did, allow_http=self._allow_http)
        try:
            async with asyncio.timeout(self._timeout):
                return await self._resolve(did, url, etag)
        except TimeoutError as exc:
            raise DIDHostUnreachableError(
                f"resolving {did} took longer than {self._timeout}s"
            ) from exc
        except httpx.TransportError as exc:
            raise DIDHostUnreachableError(
                f"fetching the DID document of {did} failed: {type(exc).__name__}: {exc}"
            ) from exc
        except (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL) as exc:
            raise DIDResolutionError(
                f"fetching the DID document of {did} failed: {type(exc).__name__}: {exc}"
            ) from exc

    async def fetch_json(self, url: str) -> dict[str, Any]:
        """GET a JSON object a peer published (e.g. its NANDA AgentFacts) under the same policy.

        The same address checks, pinning, redirect rules (same host, no downgrade), size cap,
        deadline, media type and nesting limits as for DID documents apply. Raises
        DIDResolutionError for any failure.
        """
        try:
            async with asyncio.timeout(self._timeout):
                for _ in range(self._max_redirects + 1):
                    async with self._fetch(httpx.URL(url), None) as response:
                        if response.status_code in _REDIRECT_STATUSES:
                            url = self._redirect_target(url, response)
                            continue
                        if response.status_code != 200:
                            raise DIDResolutionError(f"{url} answered HTTP {response.status_code}")
                        _check_representation(response, url)
                        return parse_json_object(await self._read_body(response, url), url)
        except TimeoutError as exc:
            raise DIDResolutionError(f"fetching {url} took longer than {self._timeout}s") from exc
        except (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL) as exc:
            raise DIDResolutionError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from exc
        raise DIDResolutionError(f"more than {self._max_redirects} redirects fetching {url}")

    async def _resolve(self, did: str, url: str, etag: str | None) -> ResolvedDocument:
        for _ in range(self._max_redirects + 1):
            async with self._fetch(httpx.URL(url), etag) as response:
                if response.status_code in _REDIRECT_STATUSES:
                    url = self._redirect_target(url, response)
                    continue
                return await self._read(did, url, etag, response)
        raise DIDResolutionError(f"more than {self._max_redirects} redirects resolving {did}")

    @asynccontextmanager
    async def _fetch(self, url: httpx.URL, etag: str | None) -> AsyncIterator[httpx.Response]:
        """GET ``url`` streamed, no redirects; pinned to a checked address if the policy is on."""
        headers = {"Accept": ACCEPT, "Accept-Encoding": "identity"}
        if etag is not None:
            headers["If-None-Match"] = etag
        request = self._client.build_request("GET", url, headers=headers)
        response = await self._policy.send(self._client, request)
        try:
            yield response
        finally:
            await response.aclose()

    def _redirect_target(self, url: str, response: httpx.Response) -> str:
        """The next URL for a redirect, if it stays on the host and does not downgrade."""
        location = response.headers.get("Location")
        if not location:
            raise DIDResolutionError(f"{url} answered {response.status_code} without Location")
        current = httpx.URL(url)
        target = current.join(location).copy_with(fragment=None)
        if target.raw_host != current.raw_host or target.userinfo:
            raise DIDResolutionError(f"redirect from {url} to another host refused: {target}")
        if target.scheme not in DEFAULT_PORTS:
            raise DIDResolutionError(f"redirect from {url} to a non-HTTP URL refused: {target}")
        if target.scheme == "http" and (current.scheme == "https" or not self._allow_http):
            raise DIDResolutionError(f"redirect from {url} to plain http refused: {target}")
        return str(target)

    async def _read(
        self, did: str, url: str, etag: str | None, response: httpx.Response
    ) -> ResolvedDocument:
        """Turn a final (non-redirect) response into a ResolvedDocument."""
        status = response.status_code
        if status == 304:
            if etag is None:
                raise DIDResolutionError(f"{url} answered 304 to a request without If-None-Match")
            return ResolvedDocument(None, _etag(response, url) or etag, True, url)
        if status != 200:
            raise DIDResolutionError(f"{url} answered HTTP {status}")
        _check_representation(response, url)
        new_etag = _etag(response, url)
        body = await self._read_body(response, url)
        document = parse_did_document(parse_json_object(body, url), expected_did=did)
        return ResolvedDocument(document, new_etag, False, url)

    async def _read_body(self, response: httpx.Response, url: str) -> bytes:
        """The raw body, refused as soon as it is known to exceed ``max_bytes``."""
        declared = response.headers.get("Content-Length")
        if declared is not None and not (declared.isascii() and declared.isdigit()):
            raise DIDResolutionError(f"{url} sent an invalid Content-Length {declared!r}")
        if declared is not None and int(declared) > self._max_bytes:
            raise DIDResolutionError(f"{url}: Content-Length {declared} exceeds {self._max_bytes}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > self._max_bytes:
                raise DIDResolutionError(f"{url}: body exceeds {self._max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)


def parse_json_object(body: bytes, url: str, *, max_depth: int = MAX_JSON_DEPTH) -> dict[str, Any]:
    """Decode a UTF-8 JSON object (RFC 8259) nested at most ``max_depth`` deep, refusing
    duplicate member names and NaN/Infinity. Raises DIDResolutionError naming ``url``."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DIDResolutionError(f"{url}: body is not UTF-8") from exc
    if json_nesting_exceeds(text, max_depth):
        raise DIDResolutionError(f"{url}: JSON nested deeper than {max_depth}")
    try:
        value = json.loads(text, object_pairs_hook=_unique_members, parse_constant=_no_constant)
    except ValueError as exc:
        raise DIDResolutionError(f"{url}: body is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise DIDResolutionError(f"{url}: body is JSON but not an object")
    return value


def _etag(response: httpx.Response, url: str) -> str | None:
    """The response's ``ETag``, if any, bounded to ``MAX_ETAG_LENGTH`` visible ASCII characters
    (an entity-tag is ``[W/]"<etagc>*"``, RFC 9110 §8.8.3). Raises DIDResolutionError."""
    value: str | None = response.headers.get("ETag")
    if value is None:
        return None
    if len(value) > MAX_ETAG_LENGTH:
        raise DIDResolutionError(f"{url}: ETag longer than {MAX_ETAG_LENGTH} characters")
    if not all("!" <= ch <= "~" for ch in value):
        raise DIDResolutionError(f"{url}: ETag {value[:40]!r} has characters outside %x21-7E")
    return value


def _check_representation(response: httpx.Response, url: str) -> None:
    """A JSON media type (did:web §3.3, DID Core §6.2) and no content coding."""
    content_type = response.headers.get("Content-Type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    is_json = media_type in _JSON_MEDIA_TYPES or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )
    if not is_json:
        raise DIDResolutionError(f"{url}: content type {content_type!r} is not JSON")
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise DIDResolutionError(f"{url}: content coding {encoding!r} refused (asked identity)")


def json_nesting_exceeds(text: str, limit: int) -> bool:
    """True if the JSON arrays/objects in ``text`` nest deeper than ``limit``.

    A linear scan without recursion, for use before ``json.loads``: the standard parser
    recurses once per level and raises RecursionError on a body of a few thousand ``[``.
    ``text`` need not be valid JSON (brackets inside strings are skipped)."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate member name in a JSON object")
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
