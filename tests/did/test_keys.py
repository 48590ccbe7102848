"""Ed25519 key encodings: Multikey (multibase base58btc) and JWK, with the RFC 9421 test key."""

from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)

from did.errors import DIDDocumentError
from did.keys import (
    base58btc_decode,
    base58btc_encode,
    ed25519_public_to_jwk,
    ed25519_public_to_multibase,
    jwk_to_ed25519_public,
    multibase_to_ed25519_public,
)

# RFC 9421 Appendix B.1.4 test-key-ed25519 (protocols.md §1.9).
RFC9421_PUBLIC_PEM = (
    b"-----BEGIN PUBLIC KEY-----\n"
    b"MCowBQYDK2VwAyEAJrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=\n"
    b"-----END PUBLIC KEY-----\n"
)
RFC9421_PRIVATE_PEM = (
    b"-----BEGIN PRIVATE KEY-----\n"
    b"MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n"
    b"-----END PRIVATE KEY-----\n"
)
RFC9421_RAW_HEX = "26b40b8f93fff3d897112f7ebc582b232dbd72517d082fe83cfb30ddce43d1bb"
RFC9421_MULTIBASE = "z6Mkh4LmfP1ev9MNPGr7JbEbtD6BD4fsu1duEj83PMCs3xHG"
RFC9421_JWK_X = "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"


def _public_pem_key() -> Ed25519PublicKey:
    key = load_pem_public_key(RFC9421_PUBLIC_PEM)
    assert isinstance(key, Ed25519PublicKey)
    return key


def _raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def test_rfc9421_key_pem_and_raw_hex_agree() -> None:
    private = load_pem_private_key(RFC9421_PRIVATE_PEM, None)
    assert isinstance(private, Ed25519PrivateKey)
    assert _raw(private.public_key()).hex() == RFC9421_RAW_HEX
    assert _raw(_public_pem_key()).hex() == RFC9421_RAW_HEX


def test_rfc9421_key_to_multibase() -> None:
    assert ed25519_public_to_multibase(_public_pem_key()) == RFC9421_MULTIBASE


def test_rfc9421_multibase_to_key() -> None:
    assert _raw(multibase_to_ed25519_public(RFC9421_MULTIBASE)).hex() == RFC9421_RAW_HEX


def test_rfc9421_key_to_jwk_and_back() -> None:
    jwk = ed25519_public_to_jwk(_public_pem_key())
    assert jwk == {"kty": "OKP", "crv": "Ed25519", "x": RFC9421_JWK_X}
    assert _raw(jwk_to_ed25519_public(jwk)).hex() == RFC9421_RAW_HEX


def test_random_keys_round_trip() -> None:
    for _ in range(20):
        key = Ed25519PrivateKey.generate().public_key()
        assert ed25519_public_to_multibase(key).startswith("z6Mk")
        assert _raw(multibase_to_ed25519_public(ed25519_public_to_multibase(key))) == _raw(key)
        assert _raw(jwk_to_ed25519_public(ed25519_public_to_jwk(key))) == _raw(key)


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"", ""),
        (b"\0", "1"),
        (b"\0\0\x01", "112"),
        (b"hello world", "StV1DL6CwTryKyV"),
    ],
)
def test_base58btc_known_values(data: bytes, text: str) -> None:
    assert base58btc_encode(data) == text
    assert base58btc_decode(text) == data


def test_base58btc_refuses_characters_outside_the_alphabet() -> None:
    for bad in ("0", "O", "I", "l", "+"):
        with pytest.raises(ValueError):
            base58btc_decode("z" + bad)


@pytest.mark.parametrize(
    "value",
    [
        "",
        RFC9421_MULTIBASE[1:],  # no multibase prefix
        "u" + RFC9421_JWK_X,  # base64url multibase: not allowed for Multikey Ed25519
        "z" + base58btc_encode(bytes.fromhex(RFC9421_RAW_HEX)),  # no multicodec (did-jwt #297)
        "z" + base58btc_encode(b"\x12\x00" + bytes(33)),  # P-256 multicodec
        "z" + base58btc_encode(b"\xed\x01" + bytes(31)),  # short key
        "z" + base58btc_encode(b"\xed\x01" + bytes(33)),  # long key
        "z0OIl",
        "z" + "2" * 500,
    ],
)
def test_multibase_refuses_bad_values(value: str) -> None:
    with pytest.raises(DIDDocumentError) as excinfo:
        multibase_to_ed25519_public(value)
    assert excinfo.value.code == "did_document_invalid"


def test_multibase_refuses_non_strings() -> None:
    with pytest.raises(DIDDocumentError):
        multibase_to_ed25519_public(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "jwk",
    [
        {"kty": "OKP", "crv": "Ed25519", "x": RFC9421_JWK_X, "d": "n4Ni-HpISpVObnQMW0wOhCKROaI"},
        {"kty": "EC", "crv": "P-256", "x": RFC9421_JWK_X},
        {"kty": "OKP", "crv": "X25519", "x": RFC9421_JWK_X},
        {"kty": "OKP", "crv": "Ed25519"},
        {"kty": "OKP", "crv": "Ed25519", "x": RFC9421_JWK_X + "="},
        {"kty": "OKP", "crv": "Ed25519", "x": RFC9421_JWK_X.replace("_", "/")},
        {"kty": "OKP", "crv": "Ed25519", "x": RFC9421_JWK_X[:-4]},
        {"kty": "OKP", "crv": "Ed25519", "x": RFC9421_JWK_X + "AAAA"},
        {"kty": "OKP", "crv": "Ed25519", "x": 42},
        {"kty": "OKP", "crv": "Ed25519", "x": RFC9421_JWK_X, "alg": "ES256"},
        ["OKP", "Ed25519"],
    ],
)
def test_jwk_refuses_bad_keys(jwk: Any) -> None:
    with pytest.raises(DIDDocumentError):
        jwk_to_ed25519_public(jwk)


def test_jwk_accepts_eddsa_alg_and_extra_members() -> None:
    jwk = {"kty": "OKP", "crv": "Ed25519", "x": RFC9421_JWK_X, "alg": "EdDSA", "kid": "k1"}
    assert _raw(jwk_to_ed25519_public(jwk)).hex() == RFC9421_RAW_HEX
