"""Both official MCP SDKs sign in to a real ``confer serve`` with OAuth and use its tools.

The Python ``mcp`` SDK's ``OAuthClientProvider`` (client ID metadata document, then dynamic
client registration) and the TypeScript ``@modelcontextprotocol/sdk`` (tests/oauth_ts/) each
discover Confer from the 401, run the authorization code + PKCE flow and refresh; the browser
step is a headless handler that approves on the consent API as the logged-in user.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata

from tests.agents.oauth_sdk import MemoryTokens, serve_with_documents
from tests.gateway.oauth_flow import consent, query

ROOT = Path(__file__).resolve().parents[2]
TS_DIR = ROOT / "tests" / "oauth_ts"
REDIRECT_URI = "http://127.0.0.1:9/callback"


async def _user_token(base_url: str, username: str) -> str:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.post(
            "/v1/auth/register", json={"username": username, "password": "correct horse battery"}
        )
        assert response.status_code == 201, response.text
        return str(response.json()["access_token"])


def _provider(
    base_url: str, user_token: str, client_metadata_url: str | None
) -> tuple[OAuthClientProvider, MemoryTokens]:
    decisions: list[dict[str, str]] = []

    async def approve(authorize_url: str) -> None:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
            decisions.append(query(await consent(http, authorize_url, user_token)))

    async def callback() -> AuthorizationCodeResult:
        params = decisions.pop()
        return AuthorizationCodeResult(
            code=params["code"], state=params.get("state"), iss=params.get("iss")
        )

    storage = MemoryTokens()
    provider = OAuthClientProvider(
        server_url=f"{base_url}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="Python SDK agent",
            redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=approve,
        callback_handler=callback,
        client_metadata_url=client_metadata_url,
    )
    return provider, storage


async def _use_tools(base_url: str, provider: OAuthClientProvider) -> None:
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
        async with Client(transport) as client:  # type: ignore[arg-type]
            tools = await client.list_tools()
            assert "confer_list_conversations" in {t.name for t in tools.tools}
            result = await client.call_tool("confer_list_conversations", {"limit": 5})
            assert not result.is_error, result
            assert dict(result.structured_content or {})["conversations"] == []


async def _grants(database_url: str) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(database_url)
    try:
        return [dict(r) for r in await conn.fetch("SELECT * FROM oauth_grants ORDER BY created_at")]
    finally:
        await conn.close()


async def test_python_sdk_signs_in_with_a_metadata_document_and_by_registration(
    database_url: str, tmp_path: Path
) -> None:
    async with serve_with_documents(database_url, tmp_path) as setup:
        host, served = setup.host, setup.served
        client_id = host.publish("/agents/python.json", [REDIRECT_URI], "Python SDK agent")
        token = await _user_token(served.base_url, "alice")

        provider, storage = _provider(served.base_url, token, client_id)
        await _use_tools(served.base_url, provider)
        assert storage.tokens is not None and storage.tokens.refresh_token
        assert host.fetched == ["/agents/python.json"]

        registered, _ = _provider(served.base_url, token, None)
        await _use_tools(served.base_url, registered)

        grants = await _grants(database_url)
        assert len(grants) == 2 and grants[0]["client_id"] == client_id
        assert grants[1]["client_id"].startswith("confer-client-")
        assert {g["resource"] for g in grants} == {f"{served.base_url}/mcp"}


def _node() -> str | None:
    node = shutil.which("node")
    if node is None or not (TS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        return None
    return node


@pytest.mark.skipif(_node() is None, reason="run `npm ci` in tests/oauth_ts (needs node)")
async def test_typescript_sdk_signs_in(database_url: str, tmp_path: Path) -> None:
    async with serve_with_documents(database_url, tmp_path) as setup:
        host, served = setup.host, setup.served
        client_id = host.publish("/agents/ts.json", [REDIRECT_URI], "TypeScript SDK agent")
        token = await _user_token(served.base_url, "alice")
        for metadata_url in (client_id, ""):
            # asyncio's subprocess: the document host runs on this event loop
            process = await asyncio.create_subprocess_exec(
                str(_node()),
                "signin.mjs",
                cwd=TS_DIR,
                env={
                    **os.environ,
                    "CONFER_URL": served.base_url,
                    "CONFER_USER_TOKEN": token,
                    "CLIENT_METADATA_URL": metadata_url,
                    "REDIRECT_URI": REDIRECT_URI,
                },
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
            assert process.returncode == 0, (stdout + stderr).decode()
            report = json.loads(stdout.decode().strip().splitlines()[-1])
            assert "confer_list_conversations" in report["tools"]
            assert report["call"]["conversations"] == []
            assert report["refreshed"] is True
        grants = await _grants(database_url)
        assert grants[0]["client_id"] == client_id
        assert grants[1]["client_id"].startswith("confer-client-")
        assert host.fetched == ["/agents/ts.json"]
