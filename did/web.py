"""did:web identifiers ⇄ HTTPS URLs, following the W3C did:web method specification exactly.

Syntax (did:web §3.1, DID Core §3.1): ``did:web:<host>[%3A<port>][:<segment>]*`` where

- the prefix ``did:web:`` is lowercase;
- ``<host>`` is a DNS name (letters, digits, hyphens, dots; punycode ``xn--`` labels are fine),
  at least two labels, never an IP literal (the spec: the name MUST NOT be an IP address). The one
  exception is the single-label host ``localhost``, accepted in both directions so that local
  development instances (``http://localhost:8001``) have DIDs; whether its address may actually be
  fetched is the resolver's decision (``allow_private_networks``), not this module's. Host names
  are case-insensitive (RFC 4343): ``LOCALHOST`` is ``localhost``, and the document URL uses the
  host in lower case;
- ``%3A<port>`` (1–65535, no leading zero) is the only percent-escape allowed in the host part;
- each ``:<segment>`` is non-empty and made of DID Core ``idchar`` (``A-Z a-z 0-9 . - _`` and
  ``%XX``), must not be a dot segment (``.``/``..``, also escaped) and must not escape ``/``,
  ``\\`` or control characters, so that a DID always maps to exactly the path it names;
- no query, no fragment, at most 255 characters in total.
"""

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from did.errors import InvalidDIDError

DID_WEB_PREFIX = "did:web:"
MAX_DID_LENGTH = 255
LOCALHOST = "localhost"

_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_PORT = re.compile(r"[1-9][0-9]{0,4}")
_SEGMENT = re.compile(r"(?:[A-Za-z0-9._-]|%[0-9A-Fa-f]{2})+")
_FRAGMENT = re.compile(r"(?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})+")
_PORT_ESCAPE = re.compile(r"%3A", re.IGNORECASE)
_DEFAULT_PORTS = {"https": 443, "http": 80}


@dataclass(frozen=True)
class _WebDID:
    """A validated did:web: host, optional port and path segments (still percent-encoded)."""

    host: str
    port: int | None
    path: tuple[str, ...]

    @property
    def authority(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"

    @property
    def document_path(self) -> str:
        if not self.path:
            return "/.well-known/did.json"
        return "/" + "/".join(self.path) + "/did.json"


def did_to_url(did: str, *, allow_http: bool = False) -> str:
    """Map a did:web DID to the URL of its DID document (did:web §3.2 Read (Resolve)).

    ``did:web:example.com`` → ``https://example.com/.well-known/did.json``;
    ``did:web:example.com%3A3000:user:alice`` → ``https://example.com:3000/user/alice/did.json``.
    ``allow_http=True`` yields ``http://`` instead (local development; the caller decides when).
    Raises InvalidDIDError for anything outside the syntax in the module docstring.
    """
    parsed = _parse_did(did)
    scheme = "http" if allow_http else "https"
    return f"{scheme}://{parsed.authority}{parsed.document_path}"


def did_host(did: str) -> tuple[str, int | None]:
    """The lower-cased host and the port (None when absent) of a did:web DID (did:web §3.1):
    ``did:web:example.com%3A3000:users:alice`` → ``("example.com", 3000)``.

    Raises InvalidDIDError for anything outside the syntax in the module docstring.
    """
    parsed = _parse_did(did)
    return parsed.host, parsed.port


def did_document_path(did: str) -> str:
    """The path part of the DID document URL, e.g. ``/users/alice/did.json`` or
    ``/.well-known/did.json`` (did:web §3.2 steps 1, 4, 5). Raises InvalidDIDError."""
    return _parse_did(did).document_path


def instance_did(did: str) -> str:
    """The host-only DID of the instance serving ``did``: ``did:web:host%3A8001:users:alice`` →
    ``did:web:host%3A8001``. Raises InvalidDIDError."""
    _parse_did(did)
    return DID_WEB_PREFIX + did[len(DID_WEB_PREFIX) :].split(":", 1)[0]


def did_from_base_url(base_url: str, *path: str) -> str:
    """Build the DID for one of our own identities from the instance's public base URL.

    ``("https://confer.example")`` → ``did:web:confer.example``;
    ``("http://localhost:8001", "users", "alice")`` → ``did:web:localhost%3A8001:users:alice``;
    ``("https://host/confer", "users", "alice")`` → ``did:web:host:confer:users:alice``.
    The scheme is not part of a did:web DID, so the scheme's default port is dropped. ``path``
    segments are used verbatim (already percent-encoded if need be), never encoded here.
    Raises InvalidDIDError for a non-http(s) scheme, userinfo, query, fragment, an IP host, an
    empty path segment or a result that is not a valid did:web DID.
    """
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except (ValueError, TypeError, AttributeError) as exc:
        raise InvalidDIDError(f"not a usable base URL: {base_url!r}") from exc
    if parts.scheme not in _DEFAULT_PORTS:
        raise InvalidDIDError(f"base URL scheme must be http or https: {base_url!r}")
    if parts.username is not None or parts.query or parts.fragment or not parts.hostname:
        raise InvalidDIDError(f"base URL must be scheme://host[:port][/path]: {base_url!r}")
    base_path = parts.path[:-1] if parts.path.endswith("/") else parts.path
    segments = [*base_path.split("/")[1:], *path]
    for segment in segments:
        _check_segment(segment, base_url)
    host_part = parts.hostname
    _check_host(host_part, base_url)
    if port is not None and port != _DEFAULT_PORTS[parts.scheme]:
        host_part += f"%3A{port}"
    did = DID_WEB_PREFIX + ":".join([host_part, *segments])
    _parse_did(did)
    return did


def split_did_url(did_url: str) -> tuple[str, str | None]:
    """Split a DID URL into (DID, fragment): ``did:web:x.example#key-1`` →
    (``did:web:x.example``, ``key-1``); no ``#`` → fragment None (DID Core §3.2).
    Raises InvalidDIDError if the DID is not a valid did:web DID or the fragment is empty or
    contains characters RFC 3986 §3.5 does not allow."""
    if not isinstance(did_url, str):
        raise InvalidDIDError("a DID URL must be a string")
    did, sep, fragment = did_url.partition("#")
    _parse_did(did)
    if not sep:
        return did, None
    if not _FRAGMENT.fullmatch(fragment):
        raise InvalidDIDError(f"invalid DID URL fragment: {did_url!r}")
    return did, fragment


def _parse_did(did: str) -> _WebDID:
    """Validate a did:web DID (module docstring) and split it into its parts."""
    if not isinstance(did, str):
        raise InvalidDIDError("a DID must be a string")
    if len(did) > MAX_DID_LENGTH:
        raise InvalidDIDError(f"DID longer than {MAX_DID_LENGTH} characters")
    if not did.startswith(DID_WEB_PREFIX):
        raise InvalidDIDError(f"not a did:web DID (prefix must be 'did:web:'): {did!r}")
    if "#" in did or "?" in did:
        raise InvalidDIDError(f"a DID must not carry a query or fragment: {did!r}")
    host_part, *path = did[len(DID_WEB_PREFIX) :].split(":")
    host, port = _parse_host_part(host_part, did)
    for segment in path:
        _check_segment(segment, did)
    return _WebDID(host=host.lower(), port=port, path=tuple(path))


def _parse_host_part(host_part: str, source: str) -> tuple[str, int | None]:
    """Split ``host[%3Aport]`` and validate both halves."""
    host, *ports = _PORT_ESCAPE.split(host_part)
    if len(ports) > 1:
        raise InvalidDIDError(f"more than one port: {source!r}")
    port = None
    if ports:
        if not _PORT.fullmatch(ports[0]) or int(ports[0]) > 65535:
            raise InvalidDIDError(f"invalid port: {source!r}")
        port = int(ports[0])
    _check_host(host, source)
    return host, port


def _check_host(host: str, source: str) -> None:
    """A DNS name with at least two labels, or exactly ``localhost``; never an IP literal."""
    if not host:
        raise InvalidDIDError(f"no host: {source!r}")
    if "%" in host:
        raise InvalidDIDError(f"only %3A (port) may be percent-encoded in the host: {source!r}")
    if host.lower() == LOCALHOST:  # DNS names are case-insensitive (RFC 4343)
        return
    labels = host.split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise InvalidDIDError(f"host is not a valid DNS name: {source!r}")
    if len(labels) < 2:
        raise InvalidDIDError(
            f"host must be a fully qualified domain name (two labels or more) or localhost: "
            f"{source!r}"
        )
    if labels[-1].isdigit():
        # No top-level domain is numeric, so this is an IPv4 literal (or a look-alike).
        raise InvalidDIDError(f"host must not be an IP address: {source!r}")


def _check_segment(segment: str, source: str) -> None:
    """A non-empty idchar path segment that maps to exactly one URL path segment."""
    if not segment:
        raise InvalidDIDError(f"empty path segment: {source!r}")
    if not _SEGMENT.fullmatch(segment):
        raise InvalidDIDError(f"invalid character or percent-escape in path: {source!r}")
    decoded = unquote(segment)
    if decoded in (".", ".."):
        raise InvalidDIDError(f"dot segment in path: {source!r}")
    if any(ch in "/\\" or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in decoded):
        raise InvalidDIDError(f"path segment escapes a separator or control character: {source!r}")
