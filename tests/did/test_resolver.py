"""DIDResolver against a real HTTP(S) server on loopback (did:web §3.2, DESIGN.md "Identity")."""

import asyncio
import datetime
import ipaddress
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.x509.oid import NameOID

from did.document import build_did_document
from did.errors import DIDDocumentError, DIDResolutionError, InvalidDIDError
from did.resolver import DIDResolver, is_public_address

WELL_KNOWN = "/.well-known/did.json"


@dataclass
class SeenRequest:
    path: str
    headers: dict[str, str]


Route = Callable[[SeenRequest, asyncio.StreamWriter], Awaitable[None]]


class LoopbackServer:
    """A tiny HTTP/1.1 server on 127.0.0.1: one request per connection, routes set per test."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[SeenRequest] = []
        self.sni_names: list[str | None] = []
        self._ssl = ssl_context
        self._tasks: set[asyncio.Task[Any]] = set()
        if ssl_context is not None:
            ssl_context.sni_callback = lambda _obj, name, _ctx: self.sni_names.append(name)

    async def __aenter__(self) -> "LoopbackServer":
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self._ssl)
        self.port = self._server.sockets[0].getsockname()[1]
        self.scheme = "http" if self._ssl is None else "https"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await self._server.wait_closed()

    def did(self, *path: str) -> str:
        return ":".join([f"did:web:localhost%3A{self.port}", *path])

    def url(self, path: str) -> str:
        return f"{self.scheme}://localhost:{self.port}{path}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            first = await reader.readexactly(1)
            if first == b"\x16":  # a TLS ClientHello sent to the plain-HTTP server
                return
            head = first + await reader.readuntil(b"\r\n\r\n")
            request_line, *lines = head.decode("latin-1").split("\r\n")
            headers = {}
            for line in filter(None, lines):
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            request = SeenRequest(path=request_line.split(" ")[1], headers=headers)
            self.requests.append(request)
            route = self.routes.get(request.path, respond(404, b"not found", "text/plain"))
            await route(request, writer)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} X", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    return "\r\n".join(lines).encode("latin-1")


def respond(
    status: int,
    body: bytes = b"",
    content_type: str = "application/did+json",
    **extra: str,
) -> Route:
    """A route answering with a fixed response (extra headers: underscores become hyphens)."""
    headers = {"Content-Type": content_type, "Content-Length": str(len(body))}
    headers |= {k.replace("_", "-"): v for k, v in extra.items()}
    headers["Connection"] = "close"

    async def route(_request: SeenRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(_head(status, headers) + body)

    return route


def respond_json(value: Any, **extra: str) -> Route:
    return respond(200, json.dumps(value).encode(), **extra)


def respond_chunked(chunks: list[bytes]) -> Route:
    headers = {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}

    async def route(_request: SeenRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(_head(200, headers))
        for chunk in chunks:
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")

    return route


def redirect(location: str, status: int = 302) -> Route:
    return respond(status, content_type="text/plain", Location=location)


def did_document(did: str) -> dict[str, Any]:
    return build_did_document(did, [("key-1", Ed25519PrivateKey.generate().public_key())])


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(trust_env=False) as client:
        yield client


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    async with LoopbackServer() as server:
        yield server


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
        writer.write(_head(200, {"Content-Type": "application/json", "Content-Length": "500"}))
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


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate valid for DNS name ``localhost`` only (no IP SAN)."""
    key = Ed25519PrivateKey.generate()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, None)
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
async def tls_server(certificate: tuple[Path, Path]) -> AsyncIterator[LoopbackServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    async with LoopbackServer(context) as server:
        yield server


@pytest.fixture
async def tls_client(certificate: tuple[Path, Path]) -> AsyncIterator[httpx.AsyncClient]:
    """A client that trusts only the self-signed ``localhost`` certificate."""
    trust = ssl.create_default_context(cafile=str(certificate[0]))
    async with httpx.AsyncClient(verify=trust, trust_env=False) as client:
        yield client


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
