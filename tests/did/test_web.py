"""did:web ⇄ URL mapping (did:web §3.1 Syntax, §3.2 Read (Resolve))."""

import pytest

from did.errors import InvalidDIDError
from did.web import (
    did_document_path,
    did_from_base_url,
    did_to_url,
    instance_did,
    split_did_url,
)


@pytest.mark.parametrize(
    ("did", "url"),
    [
        # The three examples of did:web §3.2.
        ("did:web:w3c-ccg.github.io", "https://w3c-ccg.github.io/.well-known/did.json"),
        ("did:web:w3c-ccg.github.io:user:alice", "https://w3c-ccg.github.io/user/alice/did.json"),
        ("did:web:example.com%3A3000:user:alice", "https://example.com:3000/user/alice/did.json"),
        ("did:web:example.com%3A3000", "https://example.com:3000/.well-known/did.json"),
        ("did:web:example.com%3a3000", "https://example.com:3000/.well-known/did.json"),
        ("did:web:xn--bcher-kva.example", "https://xn--bcher-kva.example/.well-known/did.json"),
        ("did:web:example.com:a%20b:c_d.e-f", "https://example.com/a%20b/c_d.e-f/did.json"),
        ("did:web:localhost%3A8001", "https://localhost:8001/.well-known/did.json"),
        # host names are case-insensitive (RFC 4343); the URL names the host in lower case
        ("did:web:LOCALHOST%3A8001:users:a", "https://localhost:8001/users/a/did.json"),
        ("did:web:Example.COM", "https://example.com/.well-known/did.json"),
    ],
)
def test_did_to_url_follows_the_spec_mapping(did: str, url: str) -> None:
    assert did_to_url(did) == url


def test_did_to_url_with_allow_http_uses_http() -> None:
    assert (
        did_to_url("did:web:localhost%3A8001:users:alice", allow_http=True)
        == "http://localhost:8001/users/alice/did.json"
    )


@pytest.mark.parametrize(
    "did",
    [
        "DID:web:example.com",
        "did:WEB:example.com",
        "did:key:z6Mkh4LmfP1ev9MNPGr7JbEbtD6BD4fsu1duEj83PMCs3xHG",
        "did:web:",
        "did:web::user",
        "did:web:127.0.0.1",
        "did:web:127.0.0.1%3A8000",
        "did:web:[::1]",
        "did:web:example.com%3A",
        "did:web:example.com%3A0",
        "did:web:example.com%3A65536",
        "did:web:example.com%3A03000",
        "did:web:example.com%3A30%3A00",
        "did:web:example.com%2F",
        "did:web:exa%6Dple.com",
        "did:web:example.com:a%2",
        "did:web:example.com:a%zz",
        "did:web:example.com:a%2Fb",
        "did:web:example.com:%2E%2E",
        "did:web:example.com:..",
        "did:web:example.com:a%00",
        "did:web:example.com:a~b",
        "did:web:example.com?service=x",
        "did:web:example.com#key-1",
        "did:web:example.com/path",
        "did:web:example.com:user::alice",
        "did:web:example.com:user:",
        "did:web:example.com.",
        "did:web:-example.com",
        "did:web:exa_mple.com",
        "did:web:intranet",
        "did:web:" + "a" * 64 + ".com",
        "did:web:example.com:" + "a" * 240,
    ],
)
def test_invalid_dids_are_refused(did: str) -> None:
    with pytest.raises(InvalidDIDError) as excinfo:
        did_to_url(did)
    assert excinfo.value.code == "did_invalid"


def test_a_raw_colon_port_is_a_path_segment_not_a_port() -> None:
    # did:web §3.1: the port colon MUST be percent-encoded; eclipse-edc #1652 got this wrong.
    assert did_to_url("did:web:example.com:3000") == "https://example.com/3000/did.json"


def test_did_of_exactly_255_characters_is_accepted() -> None:
    did = "did:web:example.com:" + "a" * (255 - len("did:web:example.com:"))
    assert did_to_url(did).endswith("/did.json")
    with pytest.raises(InvalidDIDError):
        did_to_url(did + "a")


def test_non_string_did_is_refused() -> None:
    with pytest.raises(InvalidDIDError):
        did_to_url(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("did", "path"),
    [
        ("did:web:example.com", "/.well-known/did.json"),
        ("did:web:example.com%3A3000:users:alice", "/users/alice/did.json"),
    ],
)
def test_did_document_path(did: str, path: str) -> None:
    assert did_document_path(did) == path


@pytest.mark.parametrize(
    ("base_url", "path", "did"),
    [
        ("https://confer.example", (), "did:web:confer.example"),
        ("https://confer.example/", (), "did:web:confer.example"),
        ("https://Confer.Example:443", (), "did:web:confer.example"),
        ("http://localhost:8001", ("users", "alice"), "did:web:localhost%3A8001:users:alice"),
        ("http://localhost:80", (), "did:web:localhost"),
        ("https://confer.example:8443", (), "did:web:confer.example%3A8443"),
        (
            "https://host.example/confer",
            ("users", "alice"),
            "did:web:host.example:confer:users:alice",
        ),
        ("https://host.example/confer/", ("agents", "x"), "did:web:host.example:confer:agents:x"),
    ],
)
def test_did_from_base_url(base_url: str, path: tuple[str, ...], did: str) -> None:
    assert did_from_base_url(base_url, *path) == did


@pytest.mark.parametrize(
    ("base_url", "path", "url"),
    [
        ("https://confer.example", (), "https://confer.example/.well-known/did.json"),
        (
            "https://host.example/confer",
            ("users", "alice"),
            "https://host.example/confer/users/alice/did.json",
        ),
        (
            "https://confer.example:8443",
            ("users", "alice"),
            "https://confer.example:8443/users/alice/did.json",
        ),
    ],
)
def test_did_from_base_url_round_trips_through_did_to_url(
    base_url: str, path: tuple[str, ...], url: str
) -> None:
    assert did_to_url(did_from_base_url(base_url, *path)) == url


def test_localhost_round_trips_with_allow_http() -> None:
    did = did_from_base_url("http://localhost:8001", "users", "alice")
    assert did_to_url(did, allow_http=True) == "http://localhost:8001/users/alice/did.json"


@pytest.mark.parametrize(
    ("base_url", "path"),
    [
        ("ftp://confer.example", ()),
        ("confer.example", ()),
        ("https://127.0.0.1:8001", ()),
        ("https://[::1]:8001", ()),
        ("https://user:pw@confer.example", ()),
        ("https://confer.example?x=1", ()),
        ("https://confer.example#frag", ()),
        ("https://confer.example:99999", ()),
        ("https://confer.example//x", ()),
        ("https://confer.example", ("users", "")),
        ("https://confer.example", ("users", "a:b")),
        ("https://confer.example", ("users", "a/b")),
        ("https://confer.example", ("..",)),
    ],
)
def test_did_from_base_url_refuses_unsupported_input(base_url: str, path: tuple[str, ...]) -> None:
    with pytest.raises(InvalidDIDError):
        did_from_base_url(base_url, *path)


def test_split_did_url() -> None:
    assert split_did_url("did:web:x.example#key-1") == ("did:web:x.example", "key-1")
    assert split_did_url("did:web:x.example:users:a") == ("did:web:x.example:users:a", None)


@pytest.mark.parametrize(
    "did_url", ["did:web:x.example#", "did:web:x.example#a#b", "did:web:x.example#a b", "#key-1"]
)
def test_split_did_url_refuses_bad_input(did_url: str) -> None:
    with pytest.raises(InvalidDIDError):
        split_did_url(did_url)


def test_instance_did() -> None:
    assert instance_did("did:web:host.example%3A8001:users:alice") == "did:web:host.example%3A8001"
    assert instance_did("did:web:host.example") == "did:web:host.example"


def test_a_single_label_host_is_refused_with_an_accurate_message() -> None:
    with pytest.raises(InvalidDIDError, match=r"two labels or more\) or localhost"):
        did_to_url("did:web:intranet%3A8001:users:alice")
