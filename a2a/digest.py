"""RFC 9530 ``Content-Digest``: compute and verify digests of message content.

Only the active algorithms ``sha-256`` and ``sha-512`` (RFC 9530 §5 / §7.2) are
produced or trusted. Deprecated algorithms (``md5``, ``sha``, ``unixsum``,
``unixcksum``, ``adler``, ``crc32c``) and unknown ones are ignored: a header that
carries only those is treated as having no usable digest.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable

import http_sf

from a2a.errors import DigestMismatchError

SUPPORTED_ALGORITHMS: dict[str, Callable[[bytes], bytes]] = {
    "sha-256": lambda data: hashlib.sha256(data).digest(),
    "sha-512": lambda data: hashlib.sha512(data).digest(),
}


def content_digest(body: bytes, algorithm: str = "sha-256") -> str:
    """Return a ``Content-Digest`` field value for ``body`` (RFC 9530 §2).

    ``body`` is the content as sent, i.e. after any ``Content-Encoding``. The result is
    an sf Dictionary with one member, e.g.
    ``sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:``.

    Raises ``ValueError`` if ``algorithm`` is not ``sha-256`` or ``sha-512``.
    """
    hasher = SUPPORTED_ALGORITHMS.get(algorithm)
    if hasher is None:
        raise ValueError(f"unsupported Content-Digest algorithm {algorithm!r}")
    return http_sf.ser({algorithm: hasher(body)})


def verify_content_digest(header_value: str | None, body: bytes) -> None:
    """Check a received ``Content-Digest`` field value against the received ``body``.

    ``header_value`` is the combined field value (several lines joined with ``", "``)
    or ``None`` when the field is absent. Every ``sha-256``/``sha-512`` member is
    recomputed over ``body`` and compared in constant time; at least one such member
    is required. Other algorithms are ignored, never trusted (RFC 9530 §2, §6.4).

    Raises ``DigestMismatchError`` if the field is absent, malformed (including
    duplicate members), has no supported algorithm, or any supported member differs.
    """
    if not header_value:
        raise DigestMismatchError("Content-Digest is missing")
    members = _parse_digest_field(header_value)
    checked = 0
    for algorithm, member in members.items():
        hasher = SUPPORTED_ALGORITHMS.get(algorithm)
        if hasher is None:
            continue
        value = member[0] if isinstance(member, tuple) else member
        if not isinstance(value, bytes):
            raise DigestMismatchError(f"Content-Digest member {algorithm} is not a byte sequence")
        if not hmac.compare_digest(value, hasher(body)):
            raise DigestMismatchError(f"Content-Digest {algorithm} does not match the content")
        checked += 1
    if checked == 0:
        raise DigestMismatchError("Content-Digest has no supported algorithm (sha-256, sha-512)")


def _parse_digest_field(header_value: str) -> http_sf.DictionaryType:
    """Parse ``header_value`` as an sf Dictionary, rejecting duplicate keys."""

    def reject_duplicate(key: str, context: str) -> None:
        raise DigestMismatchError(f"Content-Digest has duplicate {context} key {key!r}")

    try:
        parsed = http_sf.parse(
            header_value.encode("ascii"), tltype="dictionary", on_duplicate_key=reject_duplicate
        )
    except (UnicodeEncodeError, http_sf.StructuredFieldError) as exc:
        raise DigestMismatchError(f"Content-Digest is malformed: {exc}") from None
    if not isinstance(parsed, dict):  # pragma: no cover - tltype guarantees a dict
        raise DigestMismatchError("Content-Digest is not a dictionary")
    return parsed
