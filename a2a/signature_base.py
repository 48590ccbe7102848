"""The RFC 9421 signature base: component values and their serialisation (§2).

This is the key-free, policy-free half of Confer's HTTP Message Signatures: it turns a
request (method, absolute URL, header lines) and a list of covered components into the
exact bytes that get signed or verified. ``a2a.signatures`` builds on it to parse, sign
and verify, and re-exports this module's public names (``HeadersLike``, ``field_lines``,
``signature_base``).

Sources: RFC 9421 §2 (component identifiers), §2.1 (HTTP fields: line combination,
trimming, obs-fold), §2.2.1–§2.2.8 (request derived components, ``@query-param``
encoding), §2.5 (creating the signature base); RFC 9110 §4.2.3 (default ports dropped
from ``@authority``).

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

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias
from urllib.parse import unquote_plus

import http_sf
from http_sf.item import ser_item
from http_sf.parameters import ser_params
from http_sf.types import BareItemType, ParamsType

from a2a.errors import SignatureComponentsError, SignatureMalformedError

HeadersLike: TypeAlias = Mapping[str, str] | Iterable[tuple[str, str]]
"""``httpx.Headers``, Starlette ``Headers``, a plain mapping or ``[(name, value), ...]``."""

_Component: TypeAlias = tuple[str, dict[str, BareItemType]]
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
    return _covered(component).key


class _Covered(NamedTuple):
    """A component identifier, parsed, checked and serialised once (:func:`_covered`)."""

    name: str
    params: ParamsType  # shared by every caller of _covered: read, never changed
    key: tuple[str, frozenset[tuple[str, BareItemType]]]  # see _component_key
    identifier: str  # the sf String item of signature bases and Signature-Input


@functools.lru_cache(maxsize=256)
def _covered(component: str) -> _Covered:
    """``component`` parsed (:func:`_parse_component`, which raises for a bad one), with its key
    and serialised identifier. Every request signed or verified covers the same few
    components, so each is parsed and serialised once per process, not once per request; the
    cache is bounded (the identifiers of a received ``Signature-Input`` are a stranger's
    choice) and only ever holds what parsing the same string again would give."""
    name, params = _parse_component(component)
    key = (name, frozenset(params.items()))
    return _Covered(name, params, key, _serialise_identifier(name, params))


def _inner_list_value(components: Sequence[str], params: ParamsType) -> str:
    """The sf Inner List of ``components`` with the signature ``params``: the value of a
    ``Signature-Input`` member and of ``@signature-params`` (RFC 9421 §2.3, §4.1). Equals
    ``http_sf``'s serialisation of the same inner list. Raises SignatureMalformedError for a
    bad component identifier."""
    identifiers = " ".join(_covered(component).identifier for component in components)
    return f"({identifiers}){ser_params(params)}"


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


def _derived_value(
    name: str, params: ParamsType, method: str, target: _Target | None, status: int | None
) -> str:
    """Value of a derived component (RFC 9421 §2.2.1–§2.2.9)."""
    if name == "@status":
        if status is None:
            raise SignatureMalformedError("@status is a response component (RFC 9421 §2.2.9)")
        return str(status)
    if target is None:
        raise SignatureMalformedError(f"derived component {name!r} is not in a response")
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
    url: str | None,
    headers: HeadersLike,
    status: int | None = None,
) -> bytes:
    """Build the RFC 9421 §2.5 signature base as ASCII bytes (LF-separated, no final LF).

    ``components`` are identifier strings (module docstring); ``params_value`` is the
    serialised inner list and parameters, used verbatim as the ``@signature-params``
    value; ``url`` is the absolute target URI, still percent-encoded (None for a response,
    whose ``status`` code is the ``@status`` component, §2.2.9).

    Raises ``SignatureMalformedError`` (duplicate, unknown or unsupported component,
    relative URL, CR/LF in a value, non-ASCII base) and ``SignatureComponentsError``
    (covered field or query parameter absent from the message).
    """
    target = _Target.parse(url) if url is not None else None
    lines: list[str] = []
    seen: set[tuple[str, frozenset[tuple[str, BareItemType]]]] = set()
    for component in components:
        name, params, key, identifier = _covered(component)
        if name == "@signature-params":
            raise SignatureMalformedError("@signature-params must not be a covered component")
        if key in seen:
            raise SignatureMalformedError(f"component {component!r} is covered twice")
        seen.add(key)
        if name.startswith("@"):
            value = _derived_value(name, params, method, target, status)
        else:
            value = _field_value(headers, name)
        lines.append(f"{identifier}: {value}")
    lines.append(f'"@signature-params": {params_value}')
    if any("\n" in line or "\r" in line for line in lines):
        raise SignatureMalformedError("component values must not contain CR or LF")
    try:
        return "\n".join(lines).encode("ascii")
    except UnicodeEncodeError:
        raise SignatureMalformedError("signature base contains non-ASCII characters") from None
