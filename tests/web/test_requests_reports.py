"""Message requests, reports and moderation in the web client, in real headless Chromium
against one ``confer serve`` (local users who share no group are strangers, so one instance
is enough; docs/federation.md "Message requests"). Same set-up and skips as
``test_client.py``; the screenshot goes to ``.data/screenshots/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
from typing import Any

import pytest

from gateway.demo import confer_process
from tests.gateway.harness import free_port
from tests.web.test_client import (
    chromium,
    expect,
    message,
    register,
    send,
    shot,
)
from tests.web.test_client import pytestmark as client_skips
from tests.web.test_client_features import DESKTOP, PHONE, new_page

pytestmark = client_skips  # no chromium, no Playwright or no built client: skipped, saying why


async def create_admin(base_url: str, database_url: str, username: str, password: str) -> None:
    """``confer create-admin`` against the running instance's database."""
    env = {**os.environ, "CONFER_DATABASE_URL": database_url, "CONFER_PUBLIC_URL": base_url}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "create-admin",
        username,
        "--password",
        password,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, out.decode(errors="replace")


async def write_to(page: Any, username: str) -> None:
    """Open a direct conversation from the "New chat" screen ``register`` leaves open."""
    await page.get_by_label("Username or DID").fill(username)
    await page.get_by_role("button", name="Open").click()
    await expect(page.get_by_role("heading", level=2)).to_have_text(username)


async def log_in(page: Any, base_url: str, username: str, password: str) -> None:
    await page.goto(base_url + "/")
    await page.get_by_label("Username").fill(username)
    await page.get_by_label("Password").fill(password)
    await page.get_by_role("button", name="Log in").click()
    await expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()


async def test_message_requests_reports_and_moderation_in_chromium(
    make_database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice turns message requests on; bob's first message waits under Requests (badge 1, not
    in her list) until she accepts it; mallory is declined and blocked and her later messages
    never reach alice.
    alice reports bob's message (a second report is refused: 429, shown); the admin dismisses
    it in Moderation and alice is told."""
    monkeypatch.setenv("CONFER_RATE_LIMIT_REPORTS", "1/hour")
    db = await make_database()
    port = free_port()
    async with contextlib.AsyncExitStack() as stack:
        url = await stack.enter_async_context(confer_process(port, db, print))
        browser = await stack.enter_async_context(chromium())
        alice, bob, mallory = (
            await new_page(browser, DESKTOP),
            await new_page(browser, PHONE),
            await new_page(browser, PHONE),
        )
        await register(alice, url, "alice")

        # The harness turns requests off by default: alice turns them on. Unset, the setting
        # is the instance's default, so she saves it off and then on to make it hers.
        await alice.goto(url + "/#/settings")
        hold = alice.get_by_label("Hold first messages from strangers as requests")
        for on in (False, True):
            await hold.set_checked(on)
            await alice.get_by_role("button", name="Save", exact=True).click()
            await expect(alice.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
        await alice.reload()
        await expect(hold).to_be_checked()
        await alice.goto(url + "/#/")

        # bob is a stranger: his first message is a request, live, not a conversation.
        await register(bob, url, "bob")
        await write_to(bob, "alice")
        first = "Hi Alice, we met at the meetup"
        await send(bob, first)
        await expect(message(bob, first)).to_have_count(1)
        await expect(alice.get_by_test_id("requests-count")).to_have_text("1")
        await expect(alice.get_by_test_id("conversation")).to_have_count(0)
        await alice.get_by_role("link", name=re.compile("^Requests")).click()
        request = alice.get_by_test_id("request")
        await expect(request).to_have_count(1)
        await expect(request).to_contain_text("bob")
        await expect(request).to_contain_text(first)
        await alice.set_viewport_size(PHONE)
        await shot(alice, "requests-phone")
        await alice.set_viewport_size(DESKTOP)

        # Accept: the conversation joins her list and opens with bob's message.
        await request.get_by_role("button", name="Accept").click()
        await expect(alice.get_by_role("heading", level=2)).to_have_text("bob")
        await expect(message(alice, first)).to_have_count(1)
        await expect(alice.get_by_test_id("conversation").filter(has_text="bob")).to_have_count(1)
        await expect(alice.get_by_test_id("requests-count")).to_have_count(0)

        # mallory is declined and blocked: her next message is refused.
        await register(mallory, url, "mallory")
        await write_to(mallory, "alice")
        await send(mallory, "Buy cheap watches")
        await expect(alice.get_by_test_id("requests-count")).to_have_text("1")
        await alice.get_by_role("link", name=re.compile("^Requests")).click()
        await expect(alice.get_by_test_id("request")).to_contain_text("Buy cheap watches")
        await alice.get_by_role("button", name="Decline & block").click()
        await expect(alice.get_by_test_id("request")).to_have_count(0)
        await expect(alice.get_by_test_id("requests-count")).to_have_count(0)
        # A local sender is not refused at the door (that is a peer's 403 peer_blocked): her
        # message is stored but stays out of alice's sight, with no new request. bob's later
        # message is the sync point: alice's events arrive in offset order.
        await send(mallory, "Really cheap watches")
        await expect(message(mallory, "Really cheap watches")).to_have_count(1)
        await expect(mallory.get_by_test_id("pending")).to_have_count(0)
        await send(bob, "Send me your password")
        await alice.get_by_test_id("conversation").filter(has_text="bob").click()
        await expect(message(alice, "Send me your password")).to_have_count(1)
        await expect(alice.get_by_test_id("requests-count")).to_have_count(0)
        await expect(alice.get_by_test_id("conversation")).to_have_count(1)
        await alice.reload()
        await expect(alice.get_by_role("link", name="Requests", exact=True)).to_have_count(1)
        await expect(alice.get_by_test_id("conversation")).to_have_count(1)

        # alice reports bob's message; a second report passes the limit and says so.
        target = message(alice, "Send me your password")
        await target.get_by_role("button", name="Report").click()
        await alice.get_by_label("Report category").select_option("abuse")
        await alice.get_by_label("Report details").fill("asks for my password")
        await alice.get_by_role("button", name="Send report").click()
        await expect(target.get_by_role("status")).to_have_text("Reported.")
        again = message(alice, first)
        await again.get_by_role("button", name="Report").click()
        await again.get_by_role("button", name="Send report").click()
        await expect(again.get_by_role("alert")).to_contain_text("too many reports")
        await expect(again.get_by_text("Reported.")).to_have_count(0)

        # An admin dismisses it in Moderation; alice's client says so.
        await create_admin(url, db, "carol", "carol-admin-password")
        carol = await new_page(browser, DESKTOP)
        await log_in(carol, url, "carol", "carol-admin-password")
        await carol.get_by_role("link", name="Moderation").click()
        report = carol.get_by_test_id("report")
        await expect(report).to_have_count(1)
        await expect(report).to_contain_text("Send me your password")
        await expect(report).to_contain_text("asks for my password")
        await expect(report).to_contain_text("abuse")
        await report.get_by_role("button", name="Dismiss").click()
        await expect(report).to_have_count(0)
        await expect(carol.get_by_text("No open reports.")).to_be_visible()
        await expect(alice.get_by_test_id("report-outcome")).to_contain_text("dismissed")
        await expect(alice.get_by_role("link", name="Moderation")).to_have_count(0)
