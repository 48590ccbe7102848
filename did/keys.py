"""Ed25519 public keys as they appear in DID documents: Multikey (multibase) and JWK.

- Multikey (W3C Controlled Identifiers §2.2.2 Multikey; also Ed25519VerificationKey2020):
  ``publicKeyMultibase`` = ``z`` + base58btc(multicodec ``0xed 0x01`` ‖ 32-byte key); Ed25519
  values start with ``z6Mk``.
- JWK (RFC 8037 §2): ``{"kty": "OKP", "crv": "Ed25519", "x": base64url-no-pad(32-byte key)}``.

Decoding failures raise DIDDocumentError, because these values come from DID documents.
"""

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from did.errors import DIDDocumentError

ED25519_MULTICODEC = b"\xed\x01"
ED25519_KEY_LENGTH = 32

_BASE58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_BASE58_INDEX = {ch: i for i, ch in enumerate(_BASE58_ALPHABET)}
# A multibase key is a few dozen characters; refusing long input keeps decoding cheap.
_MAX_MULTIBASE_LENGTH = 128
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")
_JWK_ALGORITHMS = frozenset({"EdDSA", "Ed25519"})


def base58btc_encode(data: bytes) -> str:
    """Encode bytes as base58btc (Bitcoin alphabet); each leading zero byte becomes ``1``."""
    zeros = len(data) - len(data.lstrip(b"\0"))
    number = int.from_bytes(data, "big")
    digits: list[str] = []
    while number:
        number, remainder = divmod(number, 58)
        digits.append(_BASE58_ALPHABET[remainder])
    return "1" * zeros + "".join(reversed(digits))


def base58btc_decode(text: str) -> bytes:
    """Decode base58btc (Bitcoin alphabet). Raises ValueError on a character outside it."""
    number = 0
    for ch in text:
        digit = _BASE58_INDEX.get(ch)
        if digit is None:
            raise ValueError(f"invalid base58btc character {ch!r}")
        number = number * 58 + digit
    zeros = len(text) - len(text.lstrip("1"))
    body = number.to_bytes((number.bit_length() + 7) // 8, "big") if number else b""
    return b"\0" * zeros + body


def multibase_decode(value: str) -> bytes:
    """Decode a base58btc multibase string (``z`` prefix) to its bytes, multicodec included.

    Raises DIDDocumentError for a non-string, a multibase prefix other than ``z``, an oversized
    value or a character outside the base58btc alphabet (Multikey §2.2.2 requires base58btc).
    """
    if not isinstance(value, str) or not value.startswith("z"):
        raise DIDDocumentError("publicKeyMultibase must be a base58btc multibase string ('z…')")
    if len(value) > _MAX_MULTIBASE_LENGTH:
        raise DIDDocumentError("publicKeyMultibase is too long")
    try:
        return base58btc_decode(value[1:])
    except ValueError as exc:
        raise DIDDocumentError(f"publicKeyMultibase is not base58btc: {exc}") from exc


def ed25519_public_to_multibase(key: Ed25519PublicKey) -> str:
    """Encode an Ed25519 public key as a Multikey ``publicKeyMultibase`` value (``z6Mk…``)."""
    return "z" + base58btc_encode(ED25519_MULTICODEC + _raw(key))


def multibase_to_ed25519_public(value: str) -> Ed25519PublicKey:
    """Decode a Multikey / Ed25519VerificationKey2020 ``publicKeyMultibase`` value.

    Raises DIDDocumentError unless the value is ``z`` + base58btc of ``0xed 0x01`` followed by
    exactly 32 key bytes (Multikey §2.2.2; did-jwt #297: the multicodec prefix is mandatory).
    """
    decoded = multibase_decode(value)
    if not decoded.startswith(ED25519_MULTICODEC):
        raise DIDDocumentError("publicKeyMultibase is not an Ed25519 key (multicodec 0xed01)")
    return _from_raw(decoded[len(ED25519_MULTICODEC) :], "publicKeyMultibase")


def ed25519_public_to_jwk(key: Ed25519PublicKey) -> dict[str, str]:
    """Encode an Ed25519 public key as a JWK: ``{"kty": "OKP", "crv": "Ed25519", "x": …}``
    with ``x`` base64url without padding (RFC 8037 §2)."""
    x = base64.urlsafe_b64encode(_raw(key)).rstrip(b"=").decode("ascii")
    return {"kty": "OKP", "crv": "Ed25519", "x": x}


def jwk_to_ed25519_public(jwk: Mapping[str, Any]) -> Ed25519PublicKey:
    """Decode an Ed25519 public JWK (RFC 8037 §2) to a key.

    Raises DIDDocumentError if the JWK is not a mapping, carries a private part (``d``), is not
    ``kty`` OKP / ``crv`` Ed25519, names an ``alg`` other than EdDSA/Ed25519, or ``x`` is not
    unpadded base64url of exactly 32 bytes.
    """
    if not isinstance(jwk, Mapping):
        raise DIDDocumentError("publicKeyJwk must be a JSON object")
    if "d" in jwk:
        raise DIDDocumentError("publicKeyJwk contains a private key ('d'); refusing it")
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        raise DIDDocumentError("publicKeyJwk is not an Ed25519 key (kty OKP, crv Ed25519)")
    if "alg" in jwk and jwk["alg"] not in _JWK_ALGORITHMS:
        raise DIDDocumentError(f"publicKeyJwk alg {jwk['alg']!r} is not EdDSA")
    x = jwk.get("x")
    if not isinstance(x, str) or not _BASE64URL.fullmatch(x):
        raise DIDDocumentError("publicKeyJwk 'x' must be unpadded base64url")
    try:
        raw = base64.urlsafe_b64decode(x + "=" * (-len(x) % 4))
    except (binascii.Error, ValueError) as exc:
        raise DIDDocumentError("publicKeyJwk 'x' is not valid base64url") from exc
    return _from_raw(raw, "publicKeyJwk 'x'")


def _raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def _from_raw(raw: bytes, what: str) -> Ed25519PublicKey:
    if len(raw) != ED25519_KEY_LENGTH:
        raise DIDDocumentError(f"{what} must hold a {ED25519_KEY_LENGTH}-byte Ed25519 key")
    try:
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as exc:
        raise DIDDocumentError(f"{what} is not a valid Ed25519 public key") from exc
