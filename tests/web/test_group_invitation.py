"""A group invitation from an instance bob does not know, in the web client (real headless
Chromium against two ``confer serve`` processes; docs/federation.md, "Consent to a group's
home"): it waits under Requests naming the group and who added him, and "Accept and join"
opens the group with what was said meanwhile. Same set-up and skips as ``test_client.py``;
the screenshot goes to ``.data/screenshots/``.
"""

from __future__ import annotations

import contextlib
import re

import httpx

from tests.gateway.harness import free_port
from tests.gateway.serving import confer_serve, serve_env
from tests.web.test_client import chromium, expect, message, register, shot
from tests.web.test_client import pytestmark as client_skips
from tests.web.test_client_features import DESKTOP, PHONE, new_page

pytestmark = client_skips  # no chromium, no Playwright or no built client: skipped, saying why


async def test_a_group_invitation_waits_under_requests_until_accepted(make_database) -> None:
    ports = [free_port() for _ in range(2)]
    envs = [
        serve_env(port, await make_database(), CONFER_MESSAGE_REQUESTS_DEFAULT="true")
        for port in ports
    ]
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(confer_serve(envs[0]))
        b = await stack.enter_async_context(confer_serve(envs[1]))
        on_a = await stack.enter_async_context(httpx.AsyncClient(base_url=a.base_url, timeout=60))
        browser = await stack.enter_async_context(chromium())
        bob = await new_page(browser, DESKTOP)
        bob_did = await register(bob, b.base_url, "bob")
        await bob.goto(b.base_url + "/#/")

        registered = await on_a.post(
            "/v1/auth/register", json={"username": "alice", "password": "alice-password-1"}
        )
        assert registered.status_code == 201, registered.text
        alice = {"Authorization": f"Bearer {registered.json()['access_token']}"}
        created = await on_a.post(
            "/v1/conversations",
            headers=alice,
            json={"type": "group", "name": "Launch plans", "participant_dids": [bob_did]},
        )
        assert created.status_code == 201, created.text
        group = created.json()["id"]
        posted = await on_a.post(
            f"/v1/conversations/{group}/messages", headers=alice, json={"content": "Welcome!"}
        )
        assert posted.status_code == 201, posted.text

        # The invitation, live: a request, not a conversation.
        await expect(bob.get_by_test_id("requests-count")).to_have_text("1")
        await expect(bob.get_by_test_id("conversation")).to_have_count(0)
        await bob.get_by_role("link", name=re.compile("^Requests")).click()
        request = bob.get_by_test_id("request")
        await expect(request).to_have_count(1)
        invitation = request.get_by_test_id("invitation")
        await expect(invitation).to_have_text("alice added you to the group Launch plans")
        await expect(request).to_contain_text(f"lives on localhost:{ports[0]}")
        await expect(
            request.get_by_role("button", name=f"Decline & block localhost:{ports[0]}")
        ).to_be_visible()
        await bob.set_viewport_size(PHONE)
        await shot(bob, "group-invitation-phone")
        await bob.set_viewport_size(DESKTOP)
        await shot(bob, "group-invitation")

        # Accept and join: the group opens, with what alice said while he was asked.
        await request.get_by_role("button", name="Accept and join").click()
        await expect(bob.get_by_role("heading", level=2)).to_have_text("Launch plans")
        await expect(message(bob, "Welcome!")).to_have_count(1)
        await expect(bob.get_by_test_id("requests-count")).to_have_count(0)
        await expect(
            bob.get_by_test_id("conversation").filter(has_text="Launch plans")
        ).to_have_count(1)
