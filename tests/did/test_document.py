"""DID documents: build → parse round trips and validation failures (DID Core §5, did:web §3.3)."""

import copy
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from did.document import (
    DID_CONTEXT_V1,
    JWS_2020_CONTEXT_V1,
    MULTIKEY_CONTEXT_V1,
    KeyFormat,
    build_did_document,
    parse_did_document,
)
from did.errors import DIDDocumentError, DIDKeyError, InvalidDIDError
from did.keys import base58btc_encode, multibase_to_ed25519_public

DID = "did:web:confer.example"
ALICE = "did:web:confer.example:users:alice"
RFC9421_MULTIBASE = "z6Mkh4LmfP1ev9MNPGr7JbEbtD6BD4fsu1duEj83PMCs3xHG"
RFC9421_JWK = {"kty": "OKP", "crv": "Ed25519", "x": "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"}
A2A_SERVICE = {
    "id": f"{DID}#a2a",
    "type": "A2AAgentCard",
    "serviceEndpoint": "https://confer.example/.well-known/agent-card.json",
}


def _raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def _key() -> Ed25519PublicKey:
    return Ed25519PrivateKey.generate().public_key()


def _protocols_example() -> dict[str, Any]:
    """The DID document of protocols.md §3.4 (both methods carry the RFC 9421 test key)."""
    return {
        "@context": [DID_CONTEXT_V1, MULTIKEY_CONTEXT_V1, JWS_2020_CONTEXT_V1],
        "id": DID,
        "verificationMethod": [
            {
                "id": f"{DID}#key-1",
                "type": "Multikey",
                "controller": DID,
                "publicKeyMultibase": RFC9421_MULTIBASE,
            },
            {
                "id": f"{DID}#key-1-jwk",
                "type": "JsonWebKey2020",
                "controller": DID,
                "publicKeyJwk": dict(RFC9421_JWK),
            },
        ],
        "authentication": [f"{DID}#key-1"],
        "assertionMethod": [f"{DID}#key-1"],
        "service": [dict(A2A_SERVICE)],
    }


@pytest.mark.parametrize("key_format", ["Multikey", "JsonWebKey2020"])
def test_build_then_parse_round_trips(key_format: KeyFormat) -> None:
    key1, key2 = _key(), _key()
    raw = build_did_document(
        DID, [("key-1", key1), ("key-2", key2)], services=[A2A_SERVICE], key_format=key_format
    )
    assert raw["@context"][0] == DID_CONTEXT_V1
    assert raw["verificationMethod"][0]["type"] == key_format
    assert raw["authentication"] == [f"{DID}#key-1", f"{DID}#key-2"]
    assert raw["assertionMethod"] == raw["authentication"]

    document = parse_did_document(raw, expected_did=DID)
    assert document.id == DID
    assert set(document.verification_methods) == {f"{DID}#key-1", f"{DID}#key-2"}
    assert _raw(document.authentication_key(f"{DID}#key-1")) == _raw(key1)
    assert _raw(document.authentication_key("#key-2")) == _raw(key2)
    assert document.assertion_method == {f"{DID}#key-1", f"{DID}#key-2"}
    assert document.service_endpoint("A2AAgentCard") == A2A_SERVICE["serviceEndpoint"]
    assert document.service_endpoint("Nope") is None


def test_built_multikey_document_matches_the_protocols_example() -> None:
    key = multibase_to_ed25519_public(RFC9421_MULTIBASE)
    raw = build_did_document(DID, [("key-1", key)], services=[A2A_SERVICE])
    assert raw["@context"] == [DID_CONTEXT_V1, MULTIKEY_CONTEXT_V1]
    assert raw["verificationMethod"] == [_protocols_example()["verificationMethod"][0]]
    assert raw["service"] == [A2A_SERVICE]


def test_built_jwk_document_uses_the_jws_2020_context() -> None:
    raw = build_did_document(DID, [("key-1", _key())], key_format="JsonWebKey2020")
    assert raw["@context"] == [DID_CONTEXT_V1, JWS_2020_CONTEXT_V1]
    assert set(raw["verificationMethod"][0]["publicKeyJwk"]) == {"kty", "crv", "x"}


def test_build_with_the_instance_as_controller() -> None:
    raw = build_did_document(ALICE, [("key-1", _key())], controller=DID)
    assert raw["verificationMethod"][0]["controller"] == DID
    assert parse_did_document(raw, expected_did=ALICE).verification_methods


@pytest.mark.parametrize(
    ("did", "keys", "controller", "error"),
    [
        ("did:web:127.0.0.1", [("key-1", _key())], None, InvalidDIDError),
        (DID, [("#key-1", _key())], None, InvalidDIDError),
        (DID, [("", _key())], None, InvalidDIDError),
        (DID, [("key-1", _key()), ("key-1", _key())], None, DIDDocumentError),
        (DID, [("key-1", _key())], "did:web:other.example", DIDDocumentError),
    ],
)
def test_build_refuses_bad_input(
    did: str, keys: list[tuple[str, Ed25519PublicKey]], controller: str | None, error: type
) -> None:
    with pytest.raises(error):
        build_did_document(did, keys, controller=controller)


def test_parse_the_protocols_example() -> None:
    document = parse_did_document(_protocols_example(), expected_did=DID)
    assert set(document.verification_methods) == {f"{DID}#key-1", f"{DID}#key-1-jwk"}
    assert _raw(document.authentication_key(f"{DID}#key-1")) == _raw(
        multibase_to_ed25519_public(RFC9421_MULTIBASE)
    )
    # Listed as a method, but not under authentication.
    with pytest.raises(DIDKeyError) as excinfo:
        document.authentication_key(f"{DID}#key-1-jwk")
    assert excinfo.value.code == "did_key_unknown"


@pytest.mark.parametrize(
    "keyid", [f"{DID}#key-9", "#key-9", "did:web:other.example#key-1", "key-1", "#", ""]
)
def test_authentication_key_refuses_unknown_keyids(keyid: str) -> None:
    document = parse_did_document(_protocols_example(), expected_did=DID)
    with pytest.raises(DIDKeyError):
        document.authentication_key(keyid)


def test_relative_references_are_expanded() -> None:
    raw = _protocols_example()
    raw["verificationMethod"][0]["id"] = "#key-1"
    raw["authentication"] = ["#key-1"]
    raw["assertionMethod"] = ["#key-1-jwk"]
    document = parse_did_document(raw, expected_did=DID)
    assert set(document.verification_methods) == {f"{DID}#key-1", f"{DID}#key-1-jwk"}
    assert document.verification_methods[f"{DID}#key-1"].id == f"{DID}#key-1"
    assert document.authentication == {f"{DID}#key-1"}
    assert document.assertion_method == {f"{DID}#key-1-jwk"}


def test_embedded_methods_in_authentication_count() -> None:
    raw = _protocols_example()
    embedded = raw["verificationMethod"].pop(1)
    raw["authentication"].append(embedded)
    document = parse_did_document(raw, expected_did=DID)
    assert _raw(document.authentication_key("#key-1-jwk")) == _raw(
        multibase_to_ed25519_public(RFC9421_MULTIBASE)
    )


def test_other_key_types_are_ignored_not_fatal() -> None:
    raw = _protocols_example()
    p256 = "z" + base58btc_encode(b"\x80\x24" + bytes(33))
    raw["verificationMethod"] += [
        {"id": f"{DID}#p256", "type": "Multikey", "controller": DID, "publicKeyMultibase": p256},
        {
            "id": f"{DID}#ec",
            "type": "JsonWebKey2020",
            "controller": DID,
            "publicKeyJwk": {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"},
        },
        {
            "id": f"{DID}#legacy",
            "type": "Ed25519VerificationKey2018",
            "controller": DID,
            "publicKeyBase58": "3zyr4J",
        },
    ]
    raw["authentication"].append("#p256")
    document = parse_did_document(raw, expected_did=DID)
    assert set(document.verification_methods) == {f"{DID}#key-1", f"{DID}#key-1-jwk"}
    with pytest.raises(DIDKeyError, match="not a usable"):
        document.authentication_key("#p256")


def test_missing_context_and_relationships_are_tolerated() -> None:
    document = parse_did_document({"id": DID}, expected_did=DID)
    assert document.verification_methods == {}
    assert document.authentication == frozenset()
    assert document.services == ()


def test_path_did_may_be_controlled_by_its_instance() -> None:
    raw = build_did_document(ALICE, [("key-1", _key())])
    raw["verificationMethod"][0]["controller"] = DID
    parse_did_document(raw, expected_did=ALICE)


def test_references_to_other_dids_are_ignored() -> None:
    raw = _protocols_example()
    raw["authentication"].append("did:web:other.example#key-1")
    document = parse_did_document(raw, expected_did=DID)
    assert document.authentication == {f"{DID}#key-1"}


def test_service_endpoint_variants() -> None:
    raw = _protocols_example()
    raw["service"] = [
        {"id": "#map", "type": "Map", "serviceEndpoint": {"origins": ["https://x.example"]}},
        {"id": "#list", "type": ["A", "B"], "serviceEndpoint": [{"x": 1}, "https://b.example"]},
    ]
    document = parse_did_document(raw, expected_did=DID)
    assert document.service_endpoint("Map") is None
    assert document.service_endpoint("B") == "https://b.example"


def _mutate(path: str, value: Any) -> dict[str, Any]:
    """A copy of the protocols example with ``path`` (dot-separated, ints index lists) set."""
    raw = copy.deepcopy(_protocols_example())
    *parents, last = path.split(".")
    target: Any = raw
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[int(last) if last.isdigit() else last] = value
    return raw


INVALID_DOCUMENTS: list[tuple[str, Any, str]] = [
    ("not an object", ["not", "an", "object"], "JSON object"),
    ("id mismatch", _mutate("id", "did:web:evil.example"), "is not"),
    ("id missing", {"verificationMethod": []}, "is not"),
    ("bad context", _mutate("@context", ["https://example.com/ctx"]), "@context"),
    ("foreign VM", _mutate("verificationMethod.0.id", "did:web:evil.example#key-1"), "belong"),
    ("bare VM id", _mutate("verificationMethod.0.id", "key-1"), "belong"),
    ("empty fragment", _mutate("verificationMethod.0.id", "#"), "invalid verification"),
    ("duplicate VM", _mutate("verificationMethod.1.id", "#key-1"), "duplicate"),
    ("foreign controller", _mutate("verificationMethod.0.controller", "did:web:e.x"), "control"),
    ("no type", _mutate("verificationMethod.0.type", None), "type and controller"),
    ("two key properties", _mutate("verificationMethod.0.publicKeyJwk", RFC9421_JWK), "exactly"),
    ("no key property", _mutate("verificationMethod.0.publicKeyMultibase", None), "exactly"),
    ("private jwk", _mutate("verificationMethod.1.publicKeyJwk.d", "n4Ni"), "private"),
    ("bad multibase prefix", _mutate("verificationMethod.0.publicKeyMultibase", "u6Mk"), "base58"),
    (
        "Ed25519VerificationKey2020 without multicodec",
        _mutate(
            "verificationMethod.0",
            {
                **_protocols_example()["verificationMethod"][0],
                "type": "Ed25519VerificationKey2020",
                "publicKeyMultibase": "z" + base58btc_encode(bytes(32)),
            },
        ),
        "0xed01",
    ),
    ("jwk short x", _mutate("verificationMethod.1.publicKeyJwk.x", "AAAA"), "32-byte"),
    ("jwk type with multibase", _mutate("verificationMethod.1.type", "Multikey"), "Multibase"),
    ("relationships not a list", _mutate("authentication", "#key-1"), "must be a list"),
    ("bad relationship entry", _mutate("authentication", [42]), "DID URLs"),
    ("service without id", _mutate("service.0.id", None), "string id"),
    ("service bad type", _mutate("service.0.type", 5), "type must"),
    ("service no endpoint", _mutate("service.0.serviceEndpoint", None), "serviceEndpoint"),
]


@pytest.mark.parametrize(
    ("doc", "message"),
    [(doc, message) for _, doc, message in INVALID_DOCUMENTS],
    ids=[name for name, _, _ in INVALID_DOCUMENTS],
)
def test_invalid_documents_are_refused(doc: Any, message: str) -> None:
    if isinstance(doc, dict):
        # _mutate sets a property to None to express "missing".
        for method in doc.get("verificationMethod", []):
            for name in [k for k, v in method.items() if v is None]:
                del method[name]
    with pytest.raises(DIDDocumentError, match=message) as excinfo:
        parse_did_document(doc, expected_did=DID)
    assert excinfo.value.code == "did_document_invalid"


def test_parse_refuses_an_invalid_expected_did() -> None:
    with pytest.raises(InvalidDIDError):
        parse_did_document({"id": "did:web:1.2.3.4"}, expected_did="did:web:1.2.3.4")
