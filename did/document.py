"""DID documents with Ed25519 keys: build our own, validate strangers' (DID Core 1.0 §5).

Parsing rules (beyond DID Core), chosen for Confer:

- ``id`` must equal the DID that was resolved (did:web §3.2 step 7, spec PR #80).
- Verification method ids and ``authentication``/``assertionMethod`` references may be absolute
  (``did#frag``) or relative (``#frag``); both are expanded to the absolute form, which is what
  did:web requires on output (did:web §3.3) and what RFC 9421 ``keyid`` values carry.
- A verification method must belong to the document's DID, have ``id``, ``type``, ``controller``
  and exactly one ``publicKey*`` property; duplicate ids are refused.
- Controller rule: a verification method's ``controller`` is the DID itself, or the instance DID
  that serves it (the host-only DID, e.g. ``did:web:host`` controlling
  ``did:web:host:users:alice``) — whoever controls the host controls every path on it anyway
  (did:web §3.3: path DIDs prove control of the path, not of the domain). Anything else is refused.
- Usable keys are Ed25519 as ``Multikey``/``Ed25519VerificationKey2020`` (``publicKeyMultibase``)
  or ``JsonWebKey2020``/``JsonWebKey`` (``publicKeyJwk``). Other key types (X25519, P-256, legacy
  ``publicKeyBase58`` …) are ignored — present, but not usable — rather than fatal. A JWK with a
  private ``d`` is always fatal: a document that leaks a private key is not to be trusted.
- ``authentication`` entries naming another DID's method are ignored (no cross-document lookups).
- A missing ``@context`` is tolerated (plain JSON DID processing, DID Core §6.2.2); a present one
  must start with the DID v1 context.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from did.errors import DIDDocumentError, DIDKeyError, InvalidDIDError
from did.keys import (
    ED25519_MULTICODEC,
    ed25519_public_to_jwk,
    ed25519_public_to_multibase,
    jwk_to_ed25519_public,
    multibase_decode,
    multibase_to_ed25519_public,
)
from did.web import did_to_url, instance_did, split_did_url

DID_CONTEXT_V1 = "https://www.w3.org/ns/did/v1"
MULTIKEY_CONTEXT_V1 = "https://w3id.org/security/multikey/v1"
JWS_2020_CONTEXT_V1 = "https://w3id.org/security/suites/jws-2020/v1"

KeyFormat = Literal["Multikey", "JsonWebKey2020"]

_MULTIBASE_TYPES = frozenset({"Multikey", "Ed25519VerificationKey2020"})
_JWK_TYPES = frozenset({"JsonWebKey2020", "JsonWebKey"})
_KEY_CONTEXTS: dict[str, str] = {
    "Multikey": MULTIKEY_CONTEXT_V1,
    "JsonWebKey2020": JWS_2020_CONTEXT_V1,
}


@dataclass(frozen=True)
class VerificationMethod:
    """A usable Ed25519 verification method (DID Core §5.2); ``id`` is the absolute DID URL."""

    id: str
    type: str
    controller: str
    public_key: Ed25519PublicKey


@dataclass(frozen=True)
class DIDDocument:
    """A validated DID document (see the module docstring for the rules applied).

    ``verification_methods`` maps absolute ids to the usable Ed25519 methods only;
    ``authentication`` and ``assertion_method`` hold absolute ids (which may name methods that are
    not usable); ``services`` are the ``service`` entries as published; ``raw`` is the document.
    """

    id: str
    verification_methods: Mapping[str, VerificationMethod]
    authentication: frozenset[str]
    assertion_method: frozenset[str]
    services: tuple[Mapping[str, Any], ...]
    raw: Mapping[str, Any]

    def authentication_key(self, keyid: str) -> Ed25519PublicKey:
        """The public key for ``keyid`` (``did#frag`` or ``#frag``), if it is authorised for
        ``authentication`` (DID Core §5.3.1) — the check an RFC 9421 verifier needs.
        Raises DIDKeyError if the keyid names another DID, is not under ``authentication``, or
        is not a usable Ed25519 key."""
        absolute = self._absolute_keyid(keyid)
        if absolute not in self.authentication:
            raise DIDKeyError(f"{absolute!r} is not authorised for authentication in {self.id}")
        method = self.verification_methods.get(absolute)
        if method is None:
            raise DIDKeyError(f"{absolute!r} is not a usable Ed25519 verification method")
        return method.public_key

    def service_endpoint(self, type_: str) -> str | None:
        """The endpoint URL of the first service whose ``type`` is (or includes) ``type_``;
        for a list endpoint its first string; None if there is no such service or endpoint."""
        for service in self.services:
            types = service["type"]
            if type_ != types and (isinstance(types, str) or type_ not in types):
                continue
            endpoint = service["serviceEndpoint"]
            if isinstance(endpoint, str):
                return endpoint
            if isinstance(endpoint, list):
                return next((item for item in endpoint if isinstance(item, str)), None)
        return None

    def _absolute_keyid(self, keyid: str) -> str:
        if isinstance(keyid, str) and keyid.startswith("#") and len(keyid) > 1:
            return self.id + keyid
        if isinstance(keyid, str) and keyid.startswith(self.id + "#"):
            return keyid
        raise DIDKeyError(f"keyid {keyid!r} does not name a method of {self.id}")


def build_did_document(
    did: str,
    keys: Sequence[tuple[str, Ed25519PublicKey]],
    *,
    services: Sequence[Mapping[str, Any]] = (),
    controller: str | None = None,
    key_format: KeyFormat = "Multikey",
) -> dict[str, Any]:
    """Build the JSON DID document for one of our identities (DID Core §5, did:web §3.3).

    ``keys`` are (fragment, public key) pairs such as ("key-1", key); every key gets an absolute
    id ``did#fragment`` and is listed under both ``authentication`` and ``assertionMethod``.
    ``key_format`` picks ``Multikey`` (``publicKeyMultibase``, Multikey §2.2.2) or
    ``JsonWebKey2020`` (``publicKeyJwk``, RFC 8037). ``controller`` defaults to ``did`` and may be
    the instance DID (controller rule in the module docstring). ``services`` are copied as given.
    Raises InvalidDIDError for a bad DID or fragment, DIDDocumentError for a duplicate fragment
    or a controller our own parser would refuse.
    """
    did_to_url(did)
    controller = did if controller is None else controller
    _check_controller(controller, did, did)
    methods: list[dict[str, Any]] = []
    for fragment, key in keys:
        _, checked = split_did_url(f"{did}#{fragment}")
        vm_id = f"{did}#{checked}"
        if any(method["id"] == vm_id for method in methods):
            raise DIDDocumentError(f"duplicate verification method {vm_id!r}")
        methods.append(_method_entry(vm_id, controller, key, key_format))
    ids = [method["id"] for method in methods]
    document: dict[str, Any] = {
        "@context": [DID_CONTEXT_V1, _KEY_CONTEXTS[key_format]],
        "id": did,
        "verificationMethod": methods,
        "authentication": ids,
        "assertionMethod": list(ids),
    }
    if services:
        document["service"] = [dict(service) for service in services]
    return document


def _method_entry(
    vm_id: str, controller: str, key: Ed25519PublicKey, key_format: KeyFormat
) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": vm_id, "type": key_format, "controller": controller}
    if key_format == "Multikey":
        entry["publicKeyMultibase"] = ed25519_public_to_multibase(key)
    else:
        entry["publicKeyJwk"] = ed25519_public_to_jwk(key)
    return entry


def parse_did_document(doc: Any, *, expected_did: str) -> DIDDocument:
    """Validate a decoded DID document against the rules in the module docstring.

    ``doc`` is the decoded JSON; ``expected_did`` the DID that was resolved. Raises
    InvalidDIDError if ``expected_did`` is not a did:web DID, DIDDocumentError for any rule the
    document breaks.
    """
    did_to_url(expected_did)
    if not isinstance(doc, Mapping):
        raise DIDDocumentError("a DID document must be a JSON object")
    if doc.get("id") != expected_did:
        raise DIDDocumentError(f"document id {doc.get('id')!r} is not {expected_did!r}")
    _check_context(doc.get("@context"))
    seen: set[str] = set()
    methods: dict[str, VerificationMethod] = {}
    for entry in _entries(doc, "verificationMethod"):
        _add_method(entry, expected_did, seen, methods)
    authentication = _relationship(doc, "authentication", expected_did, seen, methods)
    assertion_method = _relationship(doc, "assertionMethod", expected_did, seen, methods)
    return DIDDocument(
        id=expected_did,
        verification_methods=MappingProxyType(methods),
        authentication=authentication,
        assertion_method=assertion_method,
        services=_services(doc),
        raw=doc,
    )


def _check_context(context: Any) -> None:
    if context is None:
        return
    first = context[0] if isinstance(context, list) and context else context
    if not isinstance(first, str) or not first.startswith(DID_CONTEXT_V1):
        raise DIDDocumentError(f"@context must start with {DID_CONTEXT_V1!r}")


def _entries(doc: Mapping[str, Any], name: str) -> list[Any]:
    value = doc.get(name, [])
    if not isinstance(value, list):
        raise DIDDocumentError(f"{name} must be a list")
    return value


def _add_method(
    entry: Any, did: str, seen: set[str], methods: dict[str, VerificationMethod]
) -> str:
    """Validate one verification method, record its id, keep it if its key is usable."""
    if not isinstance(entry, Mapping):
        raise DIDDocumentError("a verification method must be a JSON object")
    vm_id = _expand(entry.get("id"), did)
    if vm_id in seen:
        raise DIDDocumentError(f"duplicate verification method {vm_id!r}")
    seen.add(vm_id)
    vm_type, controller = entry.get("type"), entry.get("controller")
    if not isinstance(vm_type, str) or not isinstance(controller, str):
        raise DIDDocumentError(f"{vm_id}: type and controller must be strings")
    _check_controller(controller, did, vm_id)
    key_properties = [name for name in entry if name.startswith("publicKey")]
    if len(key_properties) != 1:
        raise DIDDocumentError(f"{vm_id}: needs exactly one publicKey* property")
    try:
        key = _decode_key(vm_type, key_properties[0], entry[key_properties[0]])
    except DIDDocumentError as exc:
        raise DIDDocumentError(f"{vm_id}: {exc.detail}") from exc
    if key is not None:
        methods[vm_id] = VerificationMethod(vm_id, vm_type, controller, key)
    return vm_id


def _decode_key(vm_type: str, prop: str, value: Any) -> Ed25519PublicKey | None:
    """The Ed25519 key of a method, or None for a key type Confer does not use."""
    if vm_type in _MULTIBASE_TYPES:
        if prop != "publicKeyMultibase":
            raise DIDDocumentError(f"{vm_type} needs publicKeyMultibase, not {prop}")
        if vm_type == "Multikey" and not multibase_decode(value).startswith(ED25519_MULTICODEC):
            return None  # a Multikey of another curve (P-256, X25519 …)
        return multibase_to_ed25519_public(value)
    if vm_type in _JWK_TYPES:
        if prop != "publicKeyJwk" or not isinstance(value, Mapping):
            raise DIDDocumentError(f"{vm_type} needs a publicKeyJwk object")
        if "d" in value:
            raise DIDDocumentError("publicKeyJwk contains a private key ('d'); refusing it")
        if value.get("kty") != "OKP" or value.get("crv") != "Ed25519":
            return None
        return jwk_to_ed25519_public(value)
    return None


def _check_controller(controller: str, did: str, vm_id: str) -> None:
    if controller not in (did, instance_did(did)):
        raise DIDDocumentError(
            f"{vm_id}: controller {controller!r} is neither {did!r} nor its instance DID"
        )


def _expand(ref: Any, did: str) -> str:
    """Absolute DID URL for ``#frag`` or ``did#frag``; anything else does not belong to ``did``."""
    if not isinstance(ref, str):
        raise DIDDocumentError("a verification method id must be a string")
    absolute = did + ref if ref.startswith("#") else ref
    if not absolute.startswith(did + "#"):
        raise DIDDocumentError(f"verification method {ref!r} does not belong to {did!r}")
    try:
        split_did_url(absolute)
    except InvalidDIDError as exc:
        raise DIDDocumentError(f"invalid verification method id {ref!r}") from exc
    return absolute


def _relationship(
    doc: Mapping[str, Any],
    name: str,
    did: str,
    seen: set[str],
    methods: dict[str, VerificationMethod],
) -> frozenset[str]:
    """Absolute ids under a verification relationship (DID Core §5.3): references or embedded."""
    ids: set[str] = set()
    for entry in _entries(doc, name):
        if isinstance(entry, Mapping):
            ids.add(_add_method(entry, did, seen, methods))
        elif isinstance(entry, str) and entry.startswith("did:") and "#" in entry:
            if entry.startswith(did + "#"):
                ids.add(_expand(entry, did))
            # else: another DID's method; not followed, so not usable here.
        elif isinstance(entry, str) and entry.startswith("#"):
            ids.add(_expand(entry, did))
        else:
            raise DIDDocumentError(f"{name} entries must be DID URLs or verification methods")
    return frozenset(ids)


def _services(doc: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """``service`` entries (DID Core §5.4): each with string ``id``, a string or list ``type``
    and a string, object or list ``serviceEndpoint``."""
    services = _entries(doc, "service")
    for service in services:
        if not isinstance(service, Mapping) or not isinstance(service.get("id"), str):
            raise DIDDocumentError("a service must be a JSON object with a string id")
        types = service.get("type")
        if not isinstance(types, str) and not (
            isinstance(types, list) and all(isinstance(t, str) for t in types)
        ):
            raise DIDDocumentError(f"service {service['id']!r}: type must be a string or list")
        if not isinstance(service.get("serviceEndpoint"), str | list | Mapping):
            raise DIDDocumentError(f"service {service['id']!r}: missing serviceEndpoint")
    return tuple(services)
