"""How the web client shows messages and refusals, in real headless Chromium: a loaded message
(not one seen arriving live) shows an edit as "(edited)", and a citation becomes a link only
when its URL is http or https, whatever is stored (one ``confer serve``); refusals say why — a
username's rule, a field's length limit, a file's limit in MiB — file sizes are in bytes below
1 KiB, and a group member on another instance is labelled by its host (two). Same set-up and
skips as ``test_client.py``.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import asyncpg
import httpx
import pytest

from gateway.demo import confer_process
from tests.gateway.harness import free_port
from tests.web.test_client import (
    BROWSER_MARKS,
    TIMEOUT,
    chromium,
    expect,
    message,
    open_chat,
    open_conversation,
    register,
    send,
    token_of,
)

pytestmark = BROWSER_MARKS


async def _bob(url: str) -> httpx.AsyncClient:
    """bob, registered over HTTP: a client sending his token."""
    client = httpx.AsyncClient(base_url=url, timeout=30)
    made = await client.post(
        "/v1/auth/register", json={"username": "bob", "password": "bob-http-password"}
    )
    assert made.status_code == 201, made.text
    client.headers["Authorization"] = f"Bearer {made.json()['access_token']}"
    return client


async def _post(client: httpx.AsyncClient, cid: str, **body: Any) -> dict[str, Any]:
    response = await client.post(f"/v1/conversations/{cid}/messages", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_loaded_messages_show_edits_and_only_web_links(make_database) -> None:
    db = await make_database()
    async with contextlib.AsyncExitStack() as stack:
        url = await stack.enter_async_context(confer_process(free_port(), db, print))
        browser = await stack.enter_async_context(chromium())
        context = await browser.new_context()
        alice = await context.new_page()
        alice.set_default_timeout(TIMEOUT)
        await register(alice, url, "alice")
        bob = await _bob(url)
        stack.push_async_callback(bob.aclose)

        # alice writes first (so bob is no stranger to her), then bob writes and edits.
        await open_chat(alice, "bob")
        await send(alice, "Lunch tomorrow?")
        await expect(message(alice, "Lunch tomorrow?")).to_be_visible()
        cid = alice.url.rsplit("/", 1)[1]
        typo = await _post(bob, cid, content="See you at noen")
        await expect(message(alice, "See you at noen")).to_be_visible()
        await alice.close()
        changed = await bob.patch(
            f"/v1/conversations/{cid}/messages/{typo['id']}",
            json={"version": 1, "content": "See you at noon"},
        )
        assert changed.status_code == 200, changed.text
        plain = await _post(bob, cid, content="Never edited")

        # Citations: the server refuses a javascript: URL now; one stored before it did is
        # still in some databases, so put one there directly.
        sources = [
            {"source": "the spec", "url": "https://example.org/spec", "trust_level": "verified"},
            {"source": "clickme", "url": "https://example.org/x", "trust_level": "verified"},
            {"source": "inline", "url": "https://example.org/y", "trust_level": "unverified"},
        ]
        cited = await _post(
            bob, cid, content_type="citation", content="read these", citations=sources
        )
        sources[1]["url"] = "javascript:alert(document.cookie)"
        sources[2]["url"] = "data:text/html,<script>alert(1)</script>"
        conn = await asyncpg.connect(db)
        try:
            await conn.execute(
                "UPDATE messages SET citations_json = $1::jsonb WHERE id = $2",
                json.dumps(sources),
                cited["id"],
            )
        finally:
            await conn.close()

        # A fresh page loads all three: nothing of them arrived live.
        alice = await context.new_page()
        alice.set_default_timeout(TIMEOUT)
        await open_conversation(alice, url, "bob")
        edited = message(alice, "See you at noon")
        await expect(edited).to_be_visible()
        await expect(edited).to_contain_text("(edited)")
        await expect(message(alice, plain["content"])).to_be_visible()
        await expect(message(alice, plain["content"])).not_to_contain_text("(edited)")
        listed = alice.get_by_role("list", name="Sources")
        await expect(listed.get_by_role("listitem")).to_have_count(3)
        await expect(listed.get_by_role("link")).to_have_count(1)
        await expect(listed.get_by_role("link", name="the spec")).to_have_attribute(
            "href", "https://example.org/spec"
        )
        await expect(listed.get_by_role("listitem").filter(has_text="clickme")).to_be_visible()
        await expect(listed.get_by_role("listitem").filter(has_text="inline")).to_be_visible()


async def test_refusals_say_why_and_members_say_where(
    make_database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONFER_ATTACHMENT_MAX_BYTES", str(1024 * 1024))
    a_db, b_db = await make_database(), await make_database()
    b_port = free_port()
    async with contextlib.AsyncExitStack() as stack:
        a_url = await stack.enter_async_context(confer_process(free_port(), a_db, print))
        b_url = await stack.enter_async_context(confer_process(b_port, b_db, print))
        browser = await stack.enter_async_context(chromium())
        alice = await (await browser.new_context()).new_page()
        alice.set_default_timeout(TIMEOUT)

        # Usernames: the rule is said, and only a valid name is ever suggested.
        await alice.goto(a_url + "/")
        await alice.get_by_role("button", name="No account? Create one").click()
        alert = alice.get_by_role("alert")
        for typed, shown in (
            ("bad user!", "a-z, 0-9, '.', '_' and '-'"),
            ("Bad!", "a-z, 0-9, '.', '_' and '-'"),
            ("Alice", "use 'alice'"),
            ("x" * 65, "at most 64 characters"),
        ):
            await alice.get_by_label("Username").fill(typed)
            await alice.get_by_label("Password").fill("alice-browser-password")
            await alice.get_by_role("button", name="Create account").click()
            await expect(alert).to_contain_text(shown)
            await expect(alert).not_to_contain_text("use 'bad!'")
        await register(alice, a_url, "alice")
        bob = await _bob(b_url)
        stack.push_async_callback(bob.aclose)
        bob_did = (await bob.get("/v1/me")).json()["did"]

        # A group with bob of B: the members page says where he is, not "peer_agent".
        api = httpx.AsyncClient(
            base_url=a_url, headers={"Authorization": f"Bearer {await token_of(alice)}"}
        )
        stack.push_async_callback(api.aclose)
        made = await api.post(
            "/v1/conversations",
            json={"type": "group", "name": "launch", "participant_dids": [bob_did]},
            timeout=60,
        )
        assert made.status_code == 201, made.text
        gid = made.json()["id"]
        await alice.goto(f"{a_url}/#/c/{gid}/members")
        members = alice.get_by_test_id("member")
        await expect(members).to_have_count(2)
        await expect(members.filter(has_text="bob")).to_contain_text(
            f"member · on localhost:{b_port}"
        )
        await expect(alice.get_by_role("list", name="Members")).not_to_contain_text("peer_agent")

        # Files: a tiny one's size in bytes; one over the limit is refused with the limit.
        await alice.goto(f"{a_url}/#/c/{gid}")
        await alice.get_by_label("Attach a file").set_input_files(
            {"name": "two.txt", "mimeType": "text/plain", "buffer": b"hi"}
        )
        await expect(alice.get_by_role("button", name="Download two.txt (2 bytes)")).to_be_visible()
        await alice.get_by_label("Attach a file").set_input_files(
            {"name": "big.bin", "mimeType": "application/octet-stream", "buffer": b"x" * (2 << 20)}
        )
        await expect(alice.get_by_role("alert")).to_have_text(
            re.compile("files are limited to 1 MiB")
        )

        # A message over the length limit: not sent, and why.
        await send(alice, "y" * 32_001)
        await expect(alice.get_by_test_id("pending")).to_contain_text(
            "not sent: invalid fields: body.content: String should have at most 32000 characters"
        )
