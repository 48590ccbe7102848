"""Helpers for the SDK sign-ins: a self-signed https host for client ID metadata documents
(the SDKs accept only https client ID URLs) and an in-memory token store."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.gateway.harness import free_port, serve
from tests.gateway.serving import Served, confer_serve, serve_env
from tests.tls import self_signed_localhost


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
    async with serve(app, port, ssl_certfile=str(cert), ssl_keyfile=str(key)):
        yield host


@dataclass
class Setup:
    """A ``confer serve`` that trusts the document host's certificate, and that host."""

    served: Served
    host: DocumentHost


@contextlib.asynccontextmanager
async def serve_with_documents(database_url: str, directory: Path) -> AsyncIterator[Setup]:
    """A document host on https and a ``confer serve`` that trusts its certificate for its
    outbound fetches (httpx reads ``SSL_CERT_FILE``)."""
    cert, key = self_signed_localhost(directory)
    env = serve_env(free_port(), database_url, SSL_CERT_FILE=str(cert))
    async with document_host(cert, key) as host, confer_serve(env) as served:
        yield Setup(served, host)


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
