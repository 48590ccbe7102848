"""RFC 9421 HTTP Message Signatures for Confer's A2A requests (Ed25519 only).

The flow on the receiving side is ``parse_signature`` → (await a key lookup by
``parsed.keyid``) → ``verify_request``; the sending side calls ``sign_request`` (or uses
``a2a.auth.SignatureAuth``).

Component identifiers are passed around as strings in one of two forms:

* a bare lowercase name when the identifier has no parameters: ``"@method"``,
  ``"content-type"``;
* otherwise the sf-serialised String item with its parameters:
  ``'"@query-param";name="Pet"'``.

Inputs may also use the quoted form without parameters (``'"@method"'``); everything
this module returns uses the normalised form above. Supported components: the request
derived components of RFC 9421 §2.2 (``@method @target-uri @authority @scheme
@request-target @path @query @query-param``) and HTTP fields without parameters
(§2.1). Field parameters (``sf``, ``key``, ``bs``, ``req``, ``tr``) are rejected as
unsupported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias
from urllib.parse import unquote_plus

import http_sf
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from http_sf.innerlist import ser_innerlist
from http_sf.item import ser_item
from http_sf.types import BareItemType, InnerListType, ItemType, ParamsType

from a2a.digest import content_digest, verify_content_digest
from a2a.errors import (
    SignatureAlgorithmError,
    SignatureComponentsError,
    SignatureExpiredError,
    SignatureMalformedError,
    SignatureMissingError,
    SignatureVerificationError,
)

DEFAULT_COMPONENTS = ("@method", "@authority", "@path", "@query", "content-type", "content-digest")
CONFER_TAG = "confer-a2a"
ALGORITHM = "ed25519"

HeadersLike: TypeAlias = Mapping[str, str] | Iterable[tuple[str, str]]
"""``httpx.Headers``, Starlette ``Headers``, a plain mapping or ``[(name, value), ...]``."""

_Component: TypeAlias = tuple[str, dict[str, BareItemType]]
_InnerList: TypeAlias = tuple[list[ItemType], ParamsType]
_PARAM_TYPES = {"created": int, "expires": int, "keyid": str, "alg": str, "nonce": str, "tag": str}
_DEFAULT_PORTS = {"http": 80, "https": 443}
_URL_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]+)([^?#]*)(?:\?([^#]*))?")
_OBS_FOLD_RE = re.compile(r"\r?\n[ \t]+")
# application/x-www-form-urlencoded percent-encode set leaves only these bytes as-is.
_FORM_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789*-._")


# --------------------------------------------------------------------------- headers


def field_lines(headers: HeadersLike, name: str) -> list[str]:
    """Return every line of field ``name`` (case-insensitive), in received order.

    Uses ``get_list`` (httpx) or ``getlist`` (Starlette, multidicts) when present so that
    repeated lines are not merged; otherwise scans a mapping's items or a list of pairs.
    """
    lower = name.lower()
    for attribute in ("get_list", "getlist"):
        getter = getattr(headers, attribute, None)
        if callable(getter):
            return list(getter(lower))
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return [value for key, value in pairs if key.lower() == lower]


def _all_lines(headers: HeadersLike) -> list[tuple[str, str]]:
    """Return all field lines of ``headers`` as ``(name, value)`` pairs."""
    multi_items = getattr(headers, "multi_items", None)  # httpx merges lines in .items()
    if callable(multi_items):
        return list(multi_items())
    return list(headers.items() if isinstance(headers, Mapping) else headers)


# --------------------------------------------------------------------------- components


def _parse_component(component: str) -> _Component:
    """Parse a component identifier string into ``(name, params)``; RFC 9421 §2."""
    if component.startswith('"'):
        try:
            item = http_sf.parse(component.encode("ascii"), tltype="item")
        except (UnicodeEncodeError, http_sf.StructuredFieldError) as exc:
            raise SignatureMalformedError(f"bad component {component!r}: {exc}") from None
        if not isinstance(item, tuple) or type(item[0]) is not str:
            raise SignatureMalformedError(f"component identifier {component!r} is not a string")
        name, params = item[0], dict(item[1])
    else:
        name, params = component, {}
    _check_component(name, params)
    return name, params


def _check_component(name: str, params: ParamsType) -> None:
    """Reject identifiers this implementation does not support (RFC 9421 §2.1, §2.2)."""
    if not name or name != name.lower() or not name.isascii():
        raise SignatureMalformedError(f"component name {name!r} must be lowercase ASCII")
    if name == "@query-param":
        if set(params) != {"name"} or type(params["name"]) is not str:
            raise SignatureMalformedError('@query-param needs exactly one String "name" parameter')
    elif params:
        raise SignatureMalformedError(f"unsupported parameters {sorted(params)} on {name!r}")


def _format_component(name: str, params: ParamsType) -> str:
    """Return the normalised string form of a component identifier (see module docstring)."""
    return _serialise_identifier(name, params) if params else name


def _serialise_identifier(name: str, params: ParamsType) -> str:
    """Serialise ``(name, params)`` as the sf String item used in bases and Signature-Input."""
    try:
        return ser_item((name, params))
    except ValueError as exc:
        raise SignatureMalformedError(f"bad component identifier {name!r}: {exc}") from None


def _component_key(component: str) -> tuple[str, frozenset[tuple[str, BareItemType]]]:
    """Identity of a component: parameter order is not significant (RFC 9421 §2)."""
    name, params = _parse_component(component)
    return name, frozenset(params.items())


# --------------------------------------------------------------------------- derived values


@dataclass(frozen=True)
class _Target:
    """The parts of an absolute target URI, still percent-encoded."""

    uri: str
    scheme: str
    authority: str
    path: str
    query: str | None

    @classmethod
    def parse(cls, url: str) -> _Target:
        match = _URL_RE.fullmatch(url.split("#", 1)[0])
        if match is None:
            raise SignatureMalformedError("target URI must be absolute (scheme://authority/...)")
        scheme, authority, path, query = match.groups()
        host_port = authority.rpartition("@")[2]  # userinfo is never part of @authority
        return cls(match.group(0), scheme.lower(), host_port, path, query)

    def normalised_authority(self) -> str:
        """Host lowercased, default port dropped (RFC 9421 §2.2.3, RFC 9110 §4.2.3)."""
        if self.authority.startswith("["):  # IPv6 literal
            end = self.authority.find("]") + 1
            if end == 0:
                raise SignatureMalformedError("unterminated IPv6 literal in authority")
            host, port = self.authority[:end], self.authority[end + 1 :]
        else:
            host, _, port = self.authority.partition(":")
        if not port or (port.isdigit() and int(port) == _DEFAULT_PORTS.get(self.scheme)):
            return host.lower()
        return f"{host.lower()}:{port}"


def _derived_value(name: str, params: ParamsType, method: str, target: _Target) -> str:
    """Value of a request derived component (RFC 9421 §2.2.1–§2.2.8)."""
    path = target.path or "/"
    if name == "@method":
        return method
    if name == "@target-uri":
        return target.uri
    if name == "@authority":
        return target.normalised_authority()
    if name == "@scheme":
        return target.scheme
    if name == "@request-target":
        return path if target.query is None else f"{path}?{target.query}"
    if name == "@path":
        return path
    if name == "@query":
        return f"?{target.query or ''}"
    if name == "@query-param":
        return _query_param(target.query or "", str(params["name"]))
    raise SignatureMalformedError(f"derived component {name!r} is not supported in a request")


def _form_encode(text: str) -> str:
    """Percent-encode ``text`` with the form-urlencoded set, space as ``%20`` (§2.2.8)."""
    return "".join(chr(b) if b in _FORM_SAFE else f"%{b:02X}" for b in text.encode("utf-8"))


def _query_param(query: str, encoded_name: str) -> str:
    """Value of ``@query-param;name=...``; the parameter must occur exactly once (§2.2.8)."""
    values = []
    for pair in query.split("&"):
        if pair:
            key, _, value = pair.partition("=")
            if _form_encode(unquote_plus(key)) == encoded_name:
                values.append(_form_encode(unquote_plus(value)))
    if len(values) != 1:
        state = "absent from" if not values else "repeated in"
        raise SignatureComponentsError(f"query parameter {encoded_name!r} is {state} the URL")
    return values[0]


def _field_value(headers: HeadersLike, name: str) -> str:
    """Combined value of an HTTP field: lines trimmed, joined with ``", "`` (§2.1)."""
    lines = field_lines(headers, name)
    if not lines:
        raise SignatureComponentsError(f"covered field {name!r} is absent from the message")
    return ", ".join(_OBS_FOLD_RE.sub(" ", line).strip(" \t") for line in lines)


def signature_base(
    components: Sequence[str],
    params_value: str,
    *,
    method: str,
    url: str,
    headers: HeadersLike,
) -> bytes:
    """Build the RFC 9421 §2.5 signature base as ASCII bytes (LF-separated, no final LF).

    ``components`` are identifier strings (module docstring); ``params_value`` is the
    serialised inner list and parameters, used verbatim as the ``@signature-params``
    value; ``url`` is the absolute target URI, still percent-encoded.

    Raises ``SignatureMalformedError`` (duplicate, unknown or unsupported component,
    relative URL, CR/LF in a value, non-ASCII base) and ``SignatureComponentsError``
    (covered field or query parameter absent from the message).
    """
    target = _Target.parse(url)
    lines: list[str] = []
    seen: set[tuple[str, frozenset[tuple[str, BareItemType]]]] = set()
    for component in components:
        name, params = _parse_component(component)
        if name == "@signature-params":
            raise SignatureMalformedError("@signature-params must not be a covered component")
        key = (name, frozenset(params.items()))
        if key in seen:
            raise SignatureMalformedError(f"component {component!r} is covered twice")
        seen.add(key)
        if name.startswith("@"):
            value = _derived_value(name, params, method, target)
        else:
            value = _field_value(headers, name)
        lines.append(f"{_serialise_identifier(name, params)}: {value}")
    lines.append(f'"@signature-params": {params_value}')
    if any("\n" in line or "\r" in line for line in lines):
        raise SignatureMalformedError("component values must not contain CR or LF")
    try:
        return "\n".join(lines).encode("ascii")
    except UnicodeEncodeError:
        raise SignatureMalformedError("signature base contains non-ASCII characters") from None


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class SignatureInput:
    """One parsed signature: its ``Signature-Input`` member plus its ``Signature`` bytes.

    ``components`` are normalised identifier strings (``"@method"``,
    ``'"@query-param";name="Pet"'``; see the module docstring). ``params`` maps
    signature parameter names (RFC 9421 §2.3) to ints (``created``, ``expires``, UNIX
    seconds) or strings (``keyid``, ``alg``, ``nonce``, ``tag``). ``params_value`` is the
    exact ``@signature-params`` serialisation; ``signature`` the raw signature bytes.
    """

    label: str
    components: tuple[str, ...]
    params: dict[str, int | str]
    params_value: str
    signature: bytes

    @property
    def keyid(self) -> str:
        """The signed ``keyid`` (always present after ``parse_signature``)."""
        return str(self.params["keyid"])

    @property
    def created(self) -> int | None:
        """The signed ``created`` time, UNIX seconds."""
        value = self.params.get("created")
        return value if isinstance(value, int) else None

    @property
    def expires(self) -> int | None:
        """The signed ``expires`` time, UNIX seconds."""
        value = self.params.get("expires")
        return value if isinstance(value, int) else None

    @property
    def nonce(self) -> str | None:
        """The signed ``nonce``; replay detection is the caller's job (RFC 9421 §7.2.2)."""
        return self._string("nonce")

    @property
    def tag(self) -> str | None:
        """The signed application ``tag``."""
        return self._string("tag")

    @property
    def alg(self) -> str | None:
        """The signed ``alg``, if the signer included it."""
        return self._string("alg")

    def _string(self, name: str) -> str | None:
        value = self.params.get(name)
        return value if isinstance(value, str) else None


def _parse_dictionary_field(headers: HeadersLike, name: str) -> http_sf.DictionaryType:
    """Parse all lines of a Dictionary field, rejecting duplicate keys anywhere."""

    def reject_duplicate(key: str, context: str) -> None:
        raise SignatureMalformedError(f"{name} has duplicate {context} {key!r}")

    value = ", ".join(line for line in field_lines(headers, name) if line.strip())
    if not value:
        return {}
    try:
        parsed = http_sf.parse(
            value.encode("ascii"), tltype="dictionary", on_duplicate_key=reject_duplicate
        )
    except (UnicodeEncodeError, http_sf.StructuredFieldError) as exc:
        raise SignatureMalformedError(f"{name} is not a valid Dictionary: {exc}") from None
    if not isinstance(parsed, dict):  # pragma: no cover - tltype guarantees a dict
        raise SignatureMalformedError(f"{name} is not a Dictionary")
    return parsed


def _as_inner_list(label: str, member: ItemType | InnerListType) -> _InnerList:
    if isinstance(member, tuple) and isinstance(member[0], list):
        return member[0], member[1]
    raise SignatureMalformedError(f"Signature-Input {label!r} is not an inner list")


def _as_bytes(label: str, member: ItemType | InnerListType) -> bytes:
    if isinstance(member, tuple) and isinstance(member[0], bytes):
        return member[0]
    raise SignatureMalformedError(f"Signature {label!r} is not a byte sequence")


def _checked_params(raw: ParamsType) -> dict[str, int | str]:
    """Validate signature parameters: known names, right types, ``keyid`` present (§2.3)."""
    params: dict[str, int | str] = {}
    for name, value in raw.items():
        expected = _PARAM_TYPES.get(name)
        if expected is None:
            raise SignatureMalformedError(f"unknown signature parameter {name!r}")
        if type(value) is not expected or not isinstance(value, int | str):
            raise SignatureMalformedError(f"parameter {name!r} must be {expected.__name__}")
        params[name] = value
    if "keyid" not in params:
        raise SignatureMalformedError("signature parameter 'keyid' is required")
    return params


def _checked_components(items: list[ItemType]) -> tuple[str, ...]:
    components = []
    for item in items:
        value, params = item if isinstance(item, tuple) else (item, {})
        if type(value) is not str:
            raise SignatureMalformedError("component identifiers must be sf Strings")
        _check_component(value, params)
        components.append(_format_component(value, params))
    if len({_component_key(c) for c in components}) != len(components):
        raise SignatureMalformedError("a component is covered twice")
    return tuple(components)


def parse_signature(headers: HeadersLike, *, tag: str | None = CONFER_TAG) -> SignatureInput:
    """Parse ``Signature-Input``/``Signature`` and select the signature signed with ``tag``.

    Selection uses the *signed* ``tag`` parameter, never the label (RFC 9421 §7.2.6);
    ``tag=None`` accepts any tag but then requires exactly one signature. Both fields are
    sf Dictionaries and may span several lines (RFC 9421 §4.1, §4.2).

    Raises ``SignatureMissingError`` (a field absent, or no signature with ``tag``) and
    ``SignatureMalformedError`` (unparseable field, label in only one field, several
    candidate signatures, unknown or mistyped parameter, missing ``keyid``).
    """
    inputs = _parse_dictionary_field(headers, "Signature-Input")
    signatures = _parse_dictionary_field(headers, "Signature")
    if not inputs or not signatures:
        raise SignatureMissingError("request has no Signature-Input/Signature")
    if inputs.keys() != signatures.keys():
        unmatched = sorted(inputs.keys() ^ signatures.keys())
        raise SignatureMalformedError(f"labels {unmatched} appear in only one signature field")
    candidates = []
    for label, member in inputs.items():
        items, raw_params = _as_inner_list(label, member)
        signature = _as_bytes(label, signatures[label])
        if tag is None or (type(raw_params.get("tag")) is str and raw_params["tag"] == tag):
            candidates.append((label, items, raw_params, signature))
    if not candidates:
        raise SignatureMissingError(f"no signature with tag {tag!r}")
    if len(candidates) > 1:
        raise SignatureMalformedError(f"{len(candidates)} signatures match tag {tag!r}")
    label, items, raw_params, signature = candidates[0]
    return SignatureInput(
        label=label,
        components=_checked_components(items),
        params=_checked_params(raw_params),
        params_value=ser_innerlist((items, raw_params)),
        signature=signature,
    )


# --------------------------------------------------------------------------- sign / verify


def sign_request(
    *,
    method: str,
    url: str,
    headers: HeadersLike,
    body: bytes,
    private_key: Ed25519PrivateKey,
    keyid: str,
    created: int,
    expires: int | None,
    nonce: str | None,
    tag: str | None = CONFER_TAG,
    components: Sequence[str] = DEFAULT_COMPONENTS,
    label: str = "sig1",
    include_alg: bool = True,
) -> dict[str, str]:
    """Sign a request with Ed25519 (RFC 9421 §3.1, §3.3.6) and return the fields to add.

    ``url`` is the absolute, percent-encoded target URI; ``created``/``expires`` are UNIX
    seconds. Returns ``{"Signature-Input": ..., "Signature": ...}`` plus
    ``"Content-Digest"`` (sha-256 over ``body``, RFC 9530) when ``content-digest`` is
    covered and ``headers`` lack one. Parameters are serialised in the order created,
    keyid, alg, expires, nonce, tag. An existing covered ``Content-Digest`` must match
    ``body`` (``DigestMismatchError``); other errors as for ``signature_base``.
    """
    parsed = [_parse_component(component) for component in components]
    added: dict[str, str] = {}
    if any(name == "content-digest" for name, _ in parsed):
        existing = field_lines(headers, "content-digest")
        if existing:
            verify_content_digest(", ".join(existing), body)
        else:
            added["Content-Digest"] = content_digest(body)
    ordered: dict[str, BareItemType | None] = {
        "created": created,
        "keyid": keyid,
        "alg": ALGORITHM if include_alg else None,
        "expires": expires,
        "nonce": nonce,
        "tag": tag,
    }
    params = {name: value for name, value in ordered.items() if value is not None}
    inner: InnerListType = ([(name, p) for name, p in parsed], params)
    params_value = ser_innerlist(inner)
    base = signature_base(
        components,
        params_value,
        method=method,
        url=url,
        headers=_all_lines(headers) + list(added.items()),
    )
    added["Signature-Input"] = http_sf.ser({label: inner})
    added["Signature"] = http_sf.ser({label: private_key.sign(base)})
    return added


def check_signature_params(
    parsed: SignatureInput,
    *,
    now: int,
    required_components: Sequence[str] = DEFAULT_COMPONENTS,
    max_age: int = 300,
    clock_skew: int = 5,
    require_expires: bool = True,
) -> None:
    """Apply Confer's policy to a parsed signature before any key lookup (RFC 9421 §3.2.1).

    Cheap checks only, so a caller may run them before an expensive key resolution.
    ``now``, ``max_age`` and ``clock_skew`` are in seconds. Raises
    ``SignatureComponentsError``, ``SignatureAlgorithmError`` or ``SignatureExpiredError``.
    """
    covered = {_component_key(component) for component in parsed.components}
    missing = [c for c in required_components if _component_key(c) not in covered]
    if missing:
        raise SignatureComponentsError(f"signature does not cover {missing}")
    if parsed.alg is not None and parsed.alg != ALGORITHM:
        raise SignatureAlgorithmError(f"algorithm {parsed.alg!r} is not accepted")
    created, expires = parsed.created, parsed.expires
    if created is None:
        raise SignatureExpiredError("signature has no 'created' parameter")
    if created > now + clock_skew:
        raise SignatureExpiredError("signature 'created' is in the future")
    if now - created > max_age:
        raise SignatureExpiredError(f"signature is older than {max_age} s")
    if expires is None:
        if require_expires:
            raise SignatureExpiredError("signature has no 'expires' parameter")
        return
    if expires < created or expires < now - clock_skew:
        raise SignatureExpiredError("signature has expired")


def verify_request(
    parsed: SignatureInput,
    *,
    method: str,
    url: str,
    headers: HeadersLike,
    body: bytes,
    public_key: Ed25519PublicKey,
    now: int,
    required_components: Sequence[str] = DEFAULT_COMPONENTS,
    max_age: int = 300,
    clock_skew: int = 5,
    require_expires: bool = True,
) -> None:
    """Verify ``parsed`` against the received request (RFC 9421 §3.2).

    Runs ``check_signature_params``; if ``content-digest`` is covered, recomputes it over
    the received ``body`` (RFC 9421 §7.2.8); rebuilds the base from ``method``, the
    canonical absolute ``url`` and ``headers``; checks the Ed25519 signature. Nonce replay
    is *not* checked (use ``parsed.nonce``). Raises the ``SignatureError`` subclasses
    documented on ``check_signature_params`` and ``signature_base``, plus
    ``DigestMismatchError`` and ``SignatureVerificationError``.
    """
    check_signature_params(
        parsed,
        now=now,
        required_components=required_components,
        max_age=max_age,
        clock_skew=clock_skew,
        require_expires=require_expires,
    )
    if any(_parse_component(c)[0] == "content-digest" for c in parsed.components):
        lines = field_lines(headers, "content-digest")
        verify_content_digest(", ".join(lines) if lines else None, body)
    base = signature_base(
        parsed.components, parsed.params_value, method=method, url=url, headers=headers
    )
    try:
        public_key.verify(parsed.signature, base)
    except InvalidSignature:
        raise SignatureVerificationError("signature does not verify") from None
