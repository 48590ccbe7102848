"""RFC 9421 HTTP Message Signatures for Confer's A2A requests (Ed25519 only).

The flow on the receiving side is ``parse_signature`` → (await a key lookup by
``parsed.keyid``) → ``verify_request``; the sending side calls ``sign_request`` (or uses
``a2a.auth.SignatureAuth``). ``check_signature_params`` applies Confer's policy
(required components, ``created``/``expires`` window, algorithm) before any key lookup.

Sources: RFC 9421 §3.1 (creating a signature), §3.2 and §3.2.1 (verifying, application
requirements), §3.3.6 (Ed25519), §4.1/§4.2 (``Signature-Input`` and ``Signature``
fields), §7.2.6 (selecting a signature by its signed ``tag``), §7.2.8 (covering
``Content-Digest``); RFC 9530 for the digest itself (``a2a.digest``).

The signature base (component values, identifier parsing and serialisation, RFC 9421
§2) lives in ``a2a.signature_base``; its public names ``HeadersLike``, ``field_lines``
and ``signature_base`` are re-exported here. Component identifiers use the string
forms described in that module's docstring.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import http_sf
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from http_sf.byteseq import ser_byteseq
from http_sf.types import BareItemType, InnerListType, ItemType, ParamsType
from http_sf.util import ser_key

from a2a.digest import content_digest, verify_content_digest
from a2a.errors import (
    SignatureAlgorithmError,
    SignatureComponentsError,
    SignatureExpiredError,
    SignatureMalformedError,
    SignatureMissingError,
    SignatureVerificationError,
)
from a2a.signature_base import (
    HeadersLike,
    _all_lines,
    _check_component,
    _component_key,
    _covered,
    _format_component,
    _inner_list_value,
    field_lines,
    signature_base,
)

__all__ = [
    "ALGORITHM",
    "CONFER_TAG",
    "DEFAULT_COMPONENTS",
    "MAX_KEYID_LENGTH",
    "MAX_NONCE_LENGTH",
    "TRACE_CONTEXT_FIELDS",
    "HeadersLike",
    "SignatureInput",
    "check_signature_params",
    "field_lines",
    "parse_signature",
    "sign_request",
    "sign_response",
    "signature_base",
    "verify_request",
    "verify_response",
    "verify_signature",
]

RESPONSE_COMPONENTS = ("@status", "content-type", "content-digest")
"""What a signed response of ours covers (RFC 9421 §2.2.9, §7.2.8)."""
DEFAULT_COMPONENTS = ("@method", "@authority", "@path", "@query", "content-type", "content-digest")
FETCH_COMPONENTS = ("@method", "@authority", "@path", "@query")
"""Components a signed GET covers (no body, so no ``content-type`` or ``content-digest``)."""
TRACE_CONTEXT_FIELDS = ("traceparent", "tracestate")
"""W3C Trace Context fields a Confer signature covers whenever the request carries them, so a
receiver may continue the sender's trace knowing the signer chose it (``a2a.auth``)."""
CONFER_TAG = "confer-a2a"
ALGORITHM = "ed25519"

_InnerList: TypeAlias = tuple[list[ItemType], ParamsType]
_PARAM_TYPES = {"created": int, "expires": int, "keyid": str, "alg": str, "nonce": str, "tag": str}
MAX_KEYID_LENGTH = 512
"""Longest ``keyid`` accepted: a DID (did:web caps it at 255) plus a fragment, as a replay
store keeps it (``signature_nonces.keyid``)."""
MAX_NONCE_LENGTH = 128
"""Longest ``nonce`` accepted (ours are 32 hex digits; ``signature_nonces.nonce``)."""
_MAX_STRING_LENGTHS = {"keyid": MAX_KEYID_LENGTH, "nonce": MAX_NONCE_LENGTH, "alg": 32, "tag": 64}


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class SignatureInput:
    """One parsed signature: its ``Signature-Input`` member plus its ``Signature`` bytes.

    ``components`` are normalised identifier strings (``"@method"``,
    ``'"@query-param";name="Pet"'``; see ``a2a.signature_base``). ``params`` maps
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
    """Validate signature parameters: known names, right types, bounded string lengths,
    ``keyid`` present (§2.3). The bounds hold before anything stores or looks up a value."""
    params: dict[str, int | str] = {}
    for name, value in raw.items():
        expected = _PARAM_TYPES.get(name)
        if expected is None:
            raise SignatureMalformedError(f"unknown signature parameter {name!r}")
        if type(value) is not expected or not isinstance(value, int | str):
            raise SignatureMalformedError(f"parameter {name!r} must be {expected.__name__}")
        limit = _MAX_STRING_LENGTHS.get(name)
        if limit is not None and isinstance(value, str) and len(value) > limit:
            raise SignatureMalformedError(f"parameter {name!r} is longer than {limit} characters")
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
    components = _checked_components(items)
    return SignatureInput(
        label=label,
        components=components,
        params=_checked_params(raw_params),
        params_value=_inner_list_value(components, raw_params),
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
    status: int | None = None,
) -> dict[str, str]:
    """Sign a request with Ed25519 (RFC 9421 §3.1, §3.3.6) and return the fields to add.

    ``url`` is the absolute, percent-encoded target URI; ``created``/``expires`` are UNIX
    seconds. Returns ``{"Signature-Input": ..., "Signature": ...}`` plus
    ``"Content-Digest"`` (sha-256 over ``body``, RFC 9530) when ``content-digest`` is
    covered and ``headers`` lack one. Parameters are serialised in the order created,
    keyid, alg, expires, nonce, tag. An existing covered ``Content-Digest`` must match
    ``body`` (``DigestMismatchError``); other errors as for ``signature_base``.
    """
    covered = [_covered(component) for component in components]  # each checked first
    added: dict[str, str] = {}
    if any(component.name == "content-digest" for component in covered):
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
    params_value = _inner_list_value(components, params)
    base = signature_base(
        components,
        params_value,
        method=method,
        url=url,
        headers=_all_lines(headers) + list(added.items()),
        status=status,
    )
    # Dictionaries of one member, as http_sf.ser({label: ...}) writes them (RFC 8941 §4.1.2)
    added["Signature-Input"] = f"{ser_key(label)}={params_value}"
    added["Signature"] = f"{ser_key(label)}={ser_byteseq(private_key.sign(base))}"
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
    ``now``, ``max_age`` and ``clock_skew`` are in seconds. A signature may live at most
    ``max_age`` seconds (``expires - created``): a far-future ``expires`` would oblige the
    verifier to remember its nonce for as long (RFC 9421 §3.2.1 lets it bound the window). Raises
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
    if expires - created > max_age:
        raise SignatureExpiredError(f"signature 'expires' is more than {max_age} s after 'created'")


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
    if any(_covered(c).name == "content-digest" for c in parsed.components):
        lines = field_lines(headers, "content-digest")
        verify_content_digest(", ".join(lines) if lines else None, body)
    verify_signature(parsed, method=method, url=url, headers=headers, public_key=public_key)


def verify_signature(
    parsed: SignatureInput,
    *,
    method: str,
    url: str,
    headers: HeadersLike,
    public_key: Ed25519PublicKey,
) -> None:
    """Check the Ed25519 signature of ``parsed`` over the base rebuilt from the received
    request (RFC 9421 §3.2 steps 4-7), and nothing else: for a caller that has applied
    ``check_signature_params`` and checked a covered ``Content-Digest`` itself (as
    ``verify_request`` does first). Raises ``SignatureVerificationError`` and the errors of
    ``signature_base``."""
    base = signature_base(
        parsed.components, parsed.params_value, method=method, url=url, headers=headers
    )
    try:
        public_key.verify(parsed.signature, base)
    except InvalidSignature:
        raise SignatureVerificationError("signature does not verify") from None


def sign_response(
    *,
    status: int,
    headers: HeadersLike,
    body: bytes,
    private_key: Ed25519PrivateKey,
    keyid: str,
    created: int,
    expires: int,
    nonce: str,
) -> dict[str, str]:
    """Sign a response (RFC 9421 §2.2.9, §3.1) over :data:`RESPONSE_COMPONENTS`; the fields
    to add, as :func:`sign_request` returns them (``Content-Digest`` included)."""
    return sign_request(
        method="",
        url="http://response.invalid/",  # never read: a response covers no request component
        headers=headers,
        body=body,
        private_key=private_key,
        keyid=keyid,
        created=created,
        expires=expires,
        nonce=nonce,
        components=RESPONSE_COMPONENTS,
        status=status,
    )


def verify_response(
    parsed: SignatureInput,
    *,
    status: int,
    headers: HeadersLike,
    body: bytes,
    public_key: Ed25519PublicKey,
    now: int,
    max_age: int = 300,
    clock_skew: int = 5,
) -> None:
    """Verify a signed response (RFC 9421 §3.2 with ``@status``, §2.2.9): the window, the
    ``Content-Digest`` over ``body`` and the signature. Raises as :func:`verify_request`."""
    check_signature_params(
        parsed,
        now=now,
        required_components=RESPONSE_COMPONENTS,
        max_age=max_age,
        clock_skew=clock_skew,
        require_expires=True,
    )
    verify_content_digest(", ".join(field_lines(headers, "content-digest")) or None, body)
    base = signature_base(
        parsed.components, parsed.params_value, method="", url=None, headers=headers, status=status
    )
    try:
        public_key.verify(parsed.signature, base)
    except InvalidSignature:
        raise SignatureVerificationError("signature does not verify") from None
