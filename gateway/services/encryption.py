"""AES-256-GCM encryption of stored secrets (users' LLM and tool provider keys).

Keys come from ``CONFER_ENCRYPTION_KEYS``: ``kid:key[,kid:key…]`` where ``kid`` is
``[A-Za-z0-9_-]{1,32}`` and ``key`` is 32 bytes in base64 (URL-safe or standard). The first key
encrypts new data; every listed key still decrypts. A ciphertext is stored as the envelope

    gcm1.<kid>.<set_at>.<base64url nonce>.<base64url ciphertext+tag>

with a fresh random 96-bit nonce per encryption (NIST SP 800-38D §8.2.2) and associated data
``confer:llm-key:v1|<user id>|<provider>|<set_at>``, so a ciphertext copied into another row or
provider, or with its timestamp changed, fails authentication instead of decrypting.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gateway.errors import EncryptionKeyError, EncryptionNotConfiguredError

VERSION = "gcm1"
KEY_ID = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
NONCE_BYTES = 12
KEY_BYTES = 32


@dataclass(frozen=True)
class Envelope:
    """A parsed stored ciphertext: key id, set time (UNIX s), nonce and ciphertext."""

    kid: str
    set_at: int
    nonce: bytes
    ciphertext: bytes


def _b64decode(text: str) -> bytes:
    padded = text + "=" * (-len(text) % 4)
    return base64.urlsafe_b64decode(padded.replace("+", "-").replace("/", "_"))


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def parse_envelope(stored: str) -> Envelope:
    """Split a stored envelope. Raises EncryptionKeyError when it is not one."""
    parts = stored.split(".")
    try:
        if len(parts) != 5 or parts[0] != VERSION or not KEY_ID.fullmatch(parts[1]):
            raise ValueError("not a gcm1 envelope")
        return Envelope(parts[1], int(parts[2]), _b64decode(parts[3]), _b64decode(parts[4]))
    except (ValueError, binascii.Error) as exc:
        raise EncryptionKeyError(f"stored secret is not a valid envelope: {exc}") from exc


def generate_key_entry(kid: str) -> str:
    """A new ``kid:base64url(32 random bytes)`` entry for CONFER_ENCRYPTION_KEYS."""
    if not KEY_ID.fullmatch(kid):
        raise ValueError("a key id is 1-32 characters of A-Z a-z 0-9 _ -")
    return f"{kid}:{_b64encode(secrets.token_bytes(KEY_BYTES))}"


class Keyring:
    """The configured AES-256-GCM keys, newest (the encrypting one) first."""

    def __init__(self, keys: list[tuple[str, bytes]]) -> None:
        self._keys = dict(keys)
        self.current_kid = keys[0][0] if keys else None

    @classmethod
    def from_setting(cls, value: str | None) -> Keyring:
        """Parse CONFER_ENCRYPTION_KEYS (module docstring). Raises ValueError with a message
        naming the bad entry (duplicate id, bad base64, not 32 bytes)."""
        keys: list[tuple[str, bytes]] = []
        for index, entry in enumerate(e.strip() for e in (value or "").split(",")):
            if not entry:
                continue
            kid, sep, material = entry.partition(":")
            if not sep or not KEY_ID.fullmatch(kid):
                raise ValueError(f"CONFER_ENCRYPTION_KEYS entry {index + 1}: expected kid:base64")
            if any(k == kid for k, _ in keys):
                raise ValueError(f"CONFER_ENCRYPTION_KEYS: key id {kid!r} appears twice")
            try:
                raw = _b64decode(material)
            except (ValueError, binascii.Error) as exc:
                raise ValueError(f"CONFER_ENCRYPTION_KEYS key {kid!r}: not base64") from exc
            if len(raw) != KEY_BYTES:
                raise ValueError(
                    f"CONFER_ENCRYPTION_KEYS key {kid!r}: {len(raw)} bytes, AES-256 needs 32"
                )
            keys.append((kid, raw))
        return cls(keys)

    @property
    def configured(self) -> bool:
        """True when at least one key is configured."""
        return self.current_kid is not None

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Every configured key id, the encrypting one first."""
        return tuple(self._keys)

    def encrypt(self, plaintext: str, *, user_id: str, provider: str, set_at: int) -> str:
        """Encrypt under the current key. Raises EncryptionNotConfiguredError (503)."""
        if self.current_kid is None:
            raise EncryptionNotConfiguredError()
        nonce = os.urandom(NONCE_BYTES)
        aad = _associated_data(user_id, provider, set_at)
        ciphertext = AESGCM(self._keys[self.current_kid]).encrypt(nonce, plaintext.encode(), aad)
        return ".".join(
            [VERSION, self.current_kid, str(set_at), _b64encode(nonce), _b64encode(ciphertext)]
        )

    def decrypt(self, stored: str, *, user_id: str, provider: str) -> str:
        """Decrypt an envelope written for (user_id, provider).

        Raises EncryptionNotConfiguredError when no key is set, EncryptionKeyError when the key
        id is not configured, or the key is wrong, or the data or its binding was altered.
        """
        if not self.configured:
            raise EncryptionNotConfiguredError()
        envelope = parse_envelope(stored)
        key = self._keys.get(envelope.kid)
        if key is None:
            raise EncryptionKeyError(
                f"stored secret uses encryption key {envelope.kid!r}, which is not in "
                f"CONFER_ENCRYPTION_KEYS (configured: {', '.join(self.key_ids)})"
            )
        aad = _associated_data(user_id, provider, envelope.set_at)
        try:
            plaintext = AESGCM(key).decrypt(envelope.nonce, envelope.ciphertext, aad)
        except InvalidTag as exc:
            raise EncryptionKeyError(
                f"stored secret does not decrypt with key {envelope.kid!r}: wrong key, or the "
                "ciphertext was altered or copied from another user or provider"
            ) from exc
        return plaintext.decode()


def _associated_data(user_id: str, provider: str, set_at: int) -> bytes:
    return f"confer:llm-key:v1|{user_id}|{provider}|{set_at}".encode()
