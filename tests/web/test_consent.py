"""The MCP sign-in consent page (web/src/consent.tsx) in real headless Chromium.

A client's authorization request opens the consent page in the browser of a logged-in user;
Allow sends the browser to the client's redirect URI with a code the client then exchanges
(with its PKCE verifier) for an MCP token; Deny sends ``error=access_denied``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import httpx

from gateway.demo import confer_process
from tests.gateway.harness import free_port
from tests.gateway.oauth_flow import REDIRECT_URI, pkce, query, register
from tests.web.test_client import TIMEOUT, chromium, expect, shot
from tests.web.test_client import register as register_in_browser


def _authorize(base_url: str, client_id: str, challenge: str) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "browser-state",
        "resource": f"{base_url}/mcp",
    }
    return f"{base_url}/oauth/authorize?{urlencode(params)}"


async def test_consent_page_approves_and_denies_in_chromium(database_url: str) -> None:
    port = free_port()
    async with (
        confer_process(port, database_url, lambda _: None) as base_url,
        chromium() as browser,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        client = await register(http)
        page = await browser.new_page()
        arrived: list[str] = []

        async def callback(route: Any) -> None:  # the MCP client's loopback listener
            arrived.append(route.request.url)
            await route.fulfill(status=200, body="signed in", content_type="text/plain")

        await page.route(f"{REDIRECT_URI}**", callback)
        await register_in_browser(page, base_url, "alice")

        verifier, challenge = pkce()
        await page.goto(_authorize(base_url, client.client_id, challenge))
        await expect(page.get_by_role("heading", name="Allow Test agent")).to_be_visible(
            timeout=TIMEOUT
        )
        await expect(page.get_by_text("127.0.0.1:9")).to_be_visible()
        await shot(page, "oauth-consent")
        await page.get_by_role("button", name="Allow").click()
        await expect(page.get_by_text("signed in")).to_be_visible(timeout=TIMEOUT)
        params = query(arrived[-1])
        assert params["state"] == "browser-state" and params["iss"] == base_url
        tokens = await http.post(
            "/oauth/token",
            data={
                "grant_type": "authorization_code",
                "code": params["code"],
                "code_verifier": verifier,
                "client_id": client.client_id,
                "redirect_uri": REDIRECT_URI,
            },
        )
        assert tokens.status_code == 200, tokens.text

        await page.goto(_authorize(base_url, client.client_id, pkce()[1]))
        await page.get_by_role("button", name="Deny").click()
        await expect(page.get_by_text("signed in")).to_be_visible(timeout=TIMEOUT)
        assert query(arrived[-1])["error"] == "access_denied"
