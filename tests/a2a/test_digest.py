"""RFC 9530 Content-Digest: vectors from protocols.md §1.10 and rejection cases."""

from __future__ import annotations

import pytest

from a2a.digest import content_digest, verify_content_digest
from a2a.errors import DigestMismatchError

HELLO = b'{"hello": "world"}'
HELLO_SHA256 = "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"
HELLO_SHA512 = (
    "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgB"
    "WnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:"
)
EMPTY_SHA256 = "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"


def test_sha256_vector() -> None:
    assert content_digest(HELLO) == HELLO_SHA256


def test_sha512_vector() -> None:
    assert content_digest(HELLO, "sha-512") == HELLO_SHA512


def test_trailing_newline_changes_digest() -> None:
    assert content_digest(HELLO + b"\n") == "sha-256=:RK/0qy18MlBSVnWgjwz6lZEWjP/lF5HF9bvEF8FabDg=:"


def test_empty_body_vector() -> None:
    assert content_digest(b"") == EMPTY_SHA256
    verify_content_digest(EMPTY_SHA256, b"")


def test_unsupported_algorithm_cannot_be_produced() -> None:
    with pytest.raises(ValueError):
        content_digest(HELLO, "md5")


@pytest.mark.parametrize(
    "header",
    [HELLO_SHA256, HELLO_SHA512, f"{HELLO_SHA512}, {HELLO_SHA256}", f"md5=:AAAA:, {HELLO_SHA256}"],
)
def test_verify_accepts_matching_digests(header: str) -> None:
    verify_content_digest(header, HELLO)


@pytest.mark.parametrize(
    "header",
    [
        HELLO_SHA256,  # body differs
        f"{EMPTY_SHA256.replace('sha-256', 'sha-512')}",  # right bytes, wrong algorithm
        f"{content_digest(b'')}, {HELLO_SHA512}",  # one of two members is wrong
    ],
)
def test_verify_rejects_mismatch(header: str) -> None:
    with pytest.raises(DigestMismatchError):
        verify_content_digest(header, b"")


@pytest.mark.parametrize(
    "header",
    [
        "md5=:XrY7u+Ae7tCTyyK7j1rNww==:",
        "sha=:AAAA:, unixsum=30637",
        "sha-384=:AAAA:",
    ],
)
def test_verify_ignores_deprecated_and_unknown_algorithms(header: str) -> None:
    with pytest.raises(DigestMismatchError, match="no supported algorithm"):
        verify_content_digest(header, HELLO)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "sha-256",  # boolean, not a byte sequence
        "sha-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=",  # not a byte sequence
        "sha-256=:not base64!:",
        "SHA-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",  # uppercase key
        f"{HELLO_SHA256}, sha-256=:AAAA:",  # duplicate key must not silently override
        "sha-256=(:AAAA:)",
        "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:é",
    ],
)
def test_verify_rejects_missing_or_malformed(header: str | None) -> None:
    with pytest.raises(DigestMismatchError):
        verify_content_digest(header, HELLO)


def test_error_code() -> None:
    with pytest.raises(DigestMismatchError) as info:
        verify_content_digest(None, HELLO)
    assert info.value.code == "content_digest_mismatch"
    assert info.value.detail == "Content-Digest is missing"
