"""The MCP sign-in's browser steps over plain HTTP, approved on the consent API as the user."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import httpx

REDIRECT_URI = "http://127.0.0.1:9/callback"


def pkce() -> tuple[str, str]:
    """A fresh PKCE verifier and its S256 challenge (RFC 7636 §4.1-4.2)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def query(url: str) -> dict[str, str]:
    """The single-valued query parameters of ``url``."""
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


async def consent(
    client: httpx.AsyncClient, authorize_url: str, user_token: str, *, approve: bool = True
) -> str:
    """Follow ``authorize_url`` to the consent page and decide as the user with ``user_token``;
    the client redirect URI the browser would be sent to."""
    response = await client.get(authorize_url, follow_redirects=False)
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    assert "/#/oauth/consent/" in location, location
    request_id = location.rsplit("/", 1)[1]
    headers = {"Authorization": f"Bearer {user_token}"}
    shown = await client.get(f"/v1/oauth/requests/{request_id}", headers=headers)
    assert shown.status_code == 200, shown.text
    decision = "approve" if approve else "deny"
    decided = await client.post(f"/v1/oauth/requests/{request_id}/{decision}", headers=headers)
    assert decided.status_code == 200, decided.text
    return str(decided.json()["redirect_to"])


@dataclass
class Client:
    """A client registered with RFC 7591."""

    client_id: str
    redirect_uri: str = REDIRECT_URI


async def register(client: httpx.AsyncClient, redirect_uri: str = REDIRECT_URI) -> Client:
    """Register a public client for ``redirect_uri``."""
    response = await client.post(
        "/oauth/register",
        json={"client_name": "Test agent", "redirect_uris": [redirect_uri]},
    )
    assert response.status_code == 201, response.text
    assert response.json()["token_endpoint_auth_method"] == "none"
    return Client(response.json()["client_id"], redirect_uri)
