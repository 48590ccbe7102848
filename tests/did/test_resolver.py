"""DIDResolver against a real HTTP(S) server on loopback (did:web §3.2, DESIGN.md "Identity").

The server (``tests/did/httpserver.py``) and its ``server``/``tls_server`` fixtures
(``tests/did/conftest.py``) are shared; the resolver fixtures are defined here.
"""

import asyncio
import ipaddress
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from did.document import build_did_document
from did.errors import DIDDocumentError, DIDResolutionError, InvalidDIDError
from did.outbound import is_public_address
from did.resolver import DIDResolver
from tests.did.httpserver import (
    LoopbackServer,
    SeenRequest,
    raw_head,
    redirect,
    respond,
    respond_chunked,
    respond_json,
)

WELL_KNOWN = "/.well-known/did.json"


def did_document(did: str) -> dict[str, Any]:
    return build_did_document(did, [("key-1", Ed25519PrivateKey.generate().public_key())])


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(trust_env=False) as client:
        yield client


@pytest.fixture
def dev(client: httpx.AsyncClient) -> DIDResolver:
    """The local-development resolver: http allowed, address policy off."""
    return DIDResolver(client, allow_http=True, allow_private_networks=True, timeout=2.0)


@pytest.fixture
def pinned(client: httpx.AsyncClient) -> DIDResolver:
    """Address policy on, loopback exempted: requests are pinned to the checked IP."""
    return DIDResolver(client, allow_http=True, allowed_networks=["127.0.0.0/8"], timeout=2.0)


async def test_200_with_etag(dev: DIDResolver, server: LoopbackServer) -> None:
    did = server.did("users", "alice")
    server.routes["/users/alice/did.json"] = respond_json(did_document(did), ETag='"v1"')
    resolved = await dev.resolve(did)
    assert resolved.document is not None and resolved.document.id == did
    assert resolved.document.authentication_key("#key-1") is not None
    assert (resolved.etag, resolved.not_modified) == ('"v1"', False)
    assert resolved.url == server.url("/users/alice/did.json")
    (request,) = server.requests
    assert request.headers["accept"] == "application/did+json, application/json"
    assert "if-none-match" not in request.headers


async def test_304_with_if_none_match(dev: DIDResolver, server: LoopbackServer) -> None:
    server.routes[WELL_KNOWN] = respond(304, ETag='"v1"')
    resolved = await dev.resolve(server.did(), etag='"v1"')
    assert (resolved.document, resolved.etag, resolved.not_modified) == (None, '"v1"', True)
    assert server.requests[0].headers["if-none-match"] == '"v1"'


async def test_304_without_if_none_match_is_refused(
    dev: DIDResolver, server: LoopbackServer
) -> None:
    server.routes[WELL_KNOWN] = respond(304)
    with pytest.raises(DIDResolutionError, match="without If-None-Match"):
        await dev.resolve(server.did())


async def test_non_200_status_is_refused(dev: DIDResolver, server: LoopbackServer) -> None:
    with pytest.raises(DIDResolutionError, match="HTTP 404") as excinfo:
        await dev.resolve(server.did())
    assert excinfo.value.code == "did_unresolvable"


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/did+ld+json; charset=utf-8", "application/ld+json"],
)
async def test_json_media_types_are_accepted(
    dev: DIDResolver, server: LoopbackServer, content_type: str
) -> None:
    server.routes[WELL_KNOWN] = respond(
        200, json.dumps(did_document(server.did())).encode(), content_type
    )
    assert (await dev.resolve(server.did())).document is not None


async def test_oversized_body_declared_by_content_length(
    client: httpx.AsyncClient, server: LoopbackServer
) -> None:
    resolver = DIDResolver(client, allow_http=True, allow_private_networks=True, max_bytes=1024)
    server.routes[WELL_KNOWN] = respond(200, b" " * 2000, "application/json")
    with pytest.raises(DIDResolutionError, match="Content-Length 2000 exceeds 1024"):
        await resolver.resolve(server.did())


async def test_oversized_body_streamed_in_chunks(
    client: httpx.AsyncClient, server: LoopbackServer
) -> None:
    resolver = DIDResolver(client, allow_http=True, allow_private_networks=True, max_bytes=1024)
    server.routes[WELL_KNOWN] = respond_chunked([b" " * 600] * 4)
    with pytest.raises(DIDResolutionError, match="body exceeds 1024 bytes"):
        await resolver.resolve(server.did())


async def test_chunked_body_within_the_cap_is_read(
    dev: DIDResolver, server: LoopbackServer
) -> None:
    body = json.dumps(did_document(server.did())).encode()
    server.routes[WELL_KNOWN] = respond_chunked([body[:50], body[50:]])
    assert (await dev.resolve(server.did())).document is not None


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        (b"<html></html>", "text/html", "is not JSON"),
        (b"{}", "", "is not JSON"),
        (b"{not json", "application/json", "not valid JSON"),
        (b"\xff\xfe{}", "application/json", "not UTF-8"),
        (b"[1, 2]", "application/json", "not an object"),
        (b'{"id": 1, "id": 2}', "application/json", "duplicate member"),
        (b'{"x": NaN}', "application/json", "NaN"),
        (b'{"a": ' + b"[" * 40 + b"]" * 40 + b"}", "application/json", "deeper than 32"),
    ],
)
async def test_bad_bodies_are_refused(
    dev: DIDResolver, server: LoopbackServer, body: bytes, content_type: str, message: str
) -> None:
    server.routes[WELL_KNOWN] = respond(200, body, content_type)
    with pytest.raises(DIDResolutionError, match=message):
        await dev.resolve(server.did())


async def test_deep_brackets_inside_strings_do_not_count(
    dev: DIDResolver, server: LoopbackServer
) -> None:
    document = did_document(server.did()) | {"note": '[[[[{{{{\\"' * 20}
    server.routes[WELL_KNOWN] = respond_json(document)
    assert (await dev.resolve(server.did())).document is not None


async def test_compressed_body_is_refused(dev: DIDResolver, server: LoopbackServer) -> None:
    server.routes[WELL_KNOWN] = respond(
        200, b"\x1f\x8b", "application/json", Content_Encoding="gzip"
    )
    with pytest.raises(DIDResolutionError, match="content coding 'gzip'"):
        await dev.resolve(server.did())
    assert server.requests[0].headers["accept-encoding"] == "identity"


async def test_truncated_response_is_a_resolution_error(
    dev: DIDResolver, server: LoopbackServer
) -> None:
    async def truncated(_request: SeenRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(raw_head(200, {"Content-Type": "application/json", "Content-Length": "500"}))
        writer.write(b"{")

    server.routes[WELL_KNOWN] = truncated
    with pytest.raises(DIDResolutionError, match="failed: RemoteProtocolError"):
        await dev.resolve(server.did())


async def test_id_mismatch_is_a_document_error(dev: DIDResolver, server: LoopbackServer) -> None:
    server.routes[WELL_KNOWN] = respond_json(did_document("did:web:evil.example"))
    with pytest.raises(DIDDocumentError, match="is not"):
        await dev.resolve(server.did())


@pytest.mark.parametrize("pin", [False, True], ids=["unpinned", "pinned"])
async def test_redirect_to_the_same_host_is_followed(
    client: httpx.AsyncClient, server: LoopbackServer, pin: bool
) -> None:
    resolver = DIDResolver(
        client, allow_http=True, allow_private_networks=not pin, allowed_networks=["127.0.0.1/32"]
    )
    server.routes[WELL_KNOWN] = redirect("/moved/did.json", status=301)
    server.routes["/moved/did.json"] = respond_json(did_document(server.did()))
    resolved = await resolver.resolve(server.did())
    assert resolved.url == server.url("/moved/did.json")
    assert [r.path for r in server.requests] == [WELL_KNOWN, "/moved/did.json"]


@pytest.mark.parametrize(
    "location",
    [
        "http://127.0.0.1:{port}/.well-known/did.json",
        "https://evil.example/did.json",
        "//evil.example/did.json",
        "http://user@localhost:{port}/x",
        "file:///etc/passwd",
    ],
)
async def test_redirect_off_the_host_is_refused(
    dev: DIDResolver, server: LoopbackServer, location: str
) -> None:
    server.routes[WELL_KNOWN] = redirect(location.format(port=server.port))
    with pytest.raises(DIDResolutionError, match="refused"):
        await dev.resolve(server.did())
    assert len(server.requests) == 1


async def test_redirect_loop_stops_after_max_redirects(
    dev: DIDResolver, server: LoopbackServer
) -> None:
    server.routes[WELL_KNOWN] = redirect(WELL_KNOWN, status=307)
    with pytest.raises(DIDResolutionError, match="more than 3 redirects"):
        await dev.resolve(server.did())
    assert len(server.requests) == 4


async def test_timeout_covers_a_server_that_sleeps(
    client: httpx.AsyncClient, server: LoopbackServer
) -> None:
    async def sleepy(_request: SeenRequest, _writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(10)

    server.routes[WELL_KNOWN] = sleepy
    resolver = DIDResolver(client, allow_http=True, allow_private_networks=True, timeout=0.3)
    with pytest.raises(DIDResolutionError, match=r"took longer than 0.3s"):
        await resolver.resolve(server.did())


async def test_private_address_is_refused_by_default(
    client: httpx.AsyncClient, server: LoopbackServer
) -> None:
    server.routes[WELL_KNOWN] = respond_json(did_document(server.did()))
    resolver = DIDResolver(client, allow_http=True)
    with pytest.raises(DIDResolutionError, match=r"127\.0\.0\.1, which is not a public address"):
        await resolver.resolve(server.did())
    assert server.requests == []


async def test_private_address_is_allowed_with_the_flag(
    dev: DIDResolver, server: LoopbackServer
) -> None:
    server.routes[WELL_KNOWN] = respond_json(did_document(server.did()))
    assert (await dev.resolve(server.did())).document is not None


async def test_pinned_request_keeps_the_host_header(
    pinned: DIDResolver, server: LoopbackServer
) -> None:
    server.routes[WELL_KNOWN] = respond_json(did_document(server.did()))
    assert (await pinned.resolve(server.did())).document is not None
    assert server.requests[0].headers["host"] == f"localhost:{server.port}"
    assert server.requests[0].headers["connection"] == "close"


async def test_http_is_refused_unless_allowed(
    client: httpx.AsyncClient, server: LoopbackServer
) -> None:
    server.routes[WELL_KNOWN] = respond_json(did_document(server.did()))
    resolver = DIDResolver(client, allow_private_networks=True)
    with pytest.raises(DIDResolutionError, match="failed: ConnectError"):
        await resolver.resolve(server.did())
    assert server.requests == []


async def test_invalid_did_is_refused_before_any_network_call(
    dev: DIDResolver, server: LoopbackServer
) -> None:
    with pytest.raises(InvalidDIDError):
        await dev.resolve("did:web:127.0.0.1%3A" + str(server.port))
    assert server.requests == []


async def test_unknown_host_is_a_resolution_error(pinned: DIDResolver) -> None:
    with pytest.raises(DIDResolutionError, match="cannot resolve host"):
        await pinned.resolve("did:web:nonexistent.invalid")


def test_resolver_refuses_nonsense_limits(client: httpx.AsyncClient) -> None:
    with pytest.raises(ValueError):
        DIDResolver(client, max_bytes=0)


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("::ffff:8.8.8.8", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("255.255.255.255", False),
        ("240.0.0.1", False),
        ("192.0.2.1", False),
        ("::1", False),
        ("::", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("ff02::1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:169.254.169.254", False),
        ("2002:7f00:1::", False),  # 6to4 wrapping 127.0.0.1
        ("64:ff9b::7f00:1", False),  # NAT64
    ],
)
def test_is_public_address(address: str, public: bool) -> None:
    assert is_public_address(ipaddress.ip_address(address)) is public


# --- TLS: SNI and certificate verification for pinned requests -------------------------------


async def test_pinned_https_verifies_the_certificate_for_the_host_name(
    tls_client: httpx.AsyncClient, tls_server: LoopbackServer
) -> None:
    tls_server.routes[WELL_KNOWN] = respond_json(did_document(tls_server.did()))
    resolver = DIDResolver(tls_client, allowed_networks=["127.0.0.0/8"])
    resolved = await resolver.resolve(tls_server.did())
    assert resolved.url == tls_server.url(WELL_KNOWN)
    # The connection went to 127.0.0.1 (not in the certificate), but SNI and verification used
    # the DID's host name.
    assert tls_server.sni_names == ["localhost"]
    assert tls_server.requests[0].headers["host"] == f"localhost:{tls_server.port}"


async def test_https_to_http_redirect_is_refused(
    tls_client: httpx.AsyncClient, tls_server: LoopbackServer
) -> None:
    tls_server.routes[WELL_KNOWN] = redirect(f"http://localhost:{tls_server.port}/x/did.json")
    # allow_http only lets http:// DIDs be fetched; it never permits a downgrade.
    resolver = DIDResolver(tls_client, allow_private_networks=True)
    with pytest.raises(DIDResolutionError, match="plain http refused"):
        await resolver.resolve(tls_server.did())
