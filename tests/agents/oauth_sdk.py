"""Helpers for the SDK sign-ins: a self-signed https host for client ID metadata documents
(the SDKs accept only https client ID URLs) and an in-memory token store."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.gateway.harness import free_port


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for ``localhost``/127.0.0.1 and its key, as PEM files in ``directory``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@dataclass
class DocumentHost:
    """An https server on loopback that publishes client ID metadata documents."""

    base_url: str
    documents: dict[str, dict[str, Any]]
    fetched: list[str] = field(default_factory=list)

    def publish(self, path: str, redirect_uris: list[str], name: str) -> str:
        """Publish a document at ``path``; its URL (the client_id)."""
        url = f"{self.base_url}{path}"
        self.documents[path] = {
            "client_id": url,
            "client_name": name,
            "redirect_uris": redirect_uris,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        return url


@contextlib.asynccontextmanager
async def document_host(cert: Path, key: Path) -> AsyncIterator[DocumentHost]:
    """Serve :class:`DocumentHost` over https with ``cert`` until exit."""
    port = free_port()
    host = DocumentHost(f"https://localhost:{port}", {})

    async def document(request: Request) -> Response:
        host.fetched.append(request.url.path)
        body = host.documents.get(request.url.path)
        if body is None:
            return Response(status_code=404)
        return Response(json.dumps(body), media_type="application/json")

    app = Starlette(routes=[Route("/{name:path}", document)])
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    try:
        yield host
    finally:
        server.should_exit = True
        await task


class MemoryTokens:
    """The SDK's ``TokenStorage`` in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info
