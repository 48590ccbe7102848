"""The web client in real headless Chromium (Debian's ``chromium``, driven by Playwright).

Two ``confer serve`` processes on loopback, alice in one browser context on A and bob in another
on B: register, open a conversation by DID, chat both ways, edit, delete, and a restart of B in
the middle of the conversation with no message lost or repeated. Screenshots of the main screens
go to ``.data/screenshots/``. Skipped with the reason when no chromium or no Playwright is found
(``.ci/run`` installs both; ``playwright install`` is never needed).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.demo import confer_process
from tests.gateway.harness import free_port

playwright_api = pytest.importorskip(
    "playwright.async_api", reason="Python playwright is not installed (pip install -e '.[dev]')"
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
STATIC = Path(__file__).resolve().parents[2] / "gateway" / "static" / "index.html"
SHOTS = Path(__file__).resolve().parents[2] / ".data" / "screenshots"

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
    pytest.mark.skipif(
        not STATIC.is_file(), reason="web client not built (cd web && npm ci && npm run build)"
    ),
]

expect = playwright_api.expect
TIMEOUT = 45_000  # ms; federation hops on a loaded machine


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            yield browser
        finally:
            await browser.close()


async def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"))


@contextlib.asynccontextmanager
async def restarted(port: int, database_url: str) -> AsyncIterator[str]:
    """``confer serve`` again on a port it just left (uvicorn binds with SO_REUSEADDR; the
    demo's free-port check would see the browser's closed sockets in TIME_WAIT)."""
    base_url = f"http://localhost:{port}"
    env = {
        **os.environ,
        "CONFER_PUBLIC_URL": base_url,
        "CONFER_PORT": str(port),
        "CONFER_HOST": "127.0.0.1",
        "CONFER_DATABASE_URL": database_url,
        "CONFER_ALLOW_HTTP_DIDS": "true",
        "CONFER_ALLOW_PRIVATE_NETWORKS": "true",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "serve",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        async with httpx.AsyncClient(timeout=2) as client:
            while True:
                assert process.returncode is None, f"{base_url} exited with {process.returncode}"
                assert time.monotonic() < deadline, f"{base_url} did not come back"
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(base_url + "/healthz")).status_code == 200:
                        break
                await asyncio.sleep(0.3)
        yield base_url
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()


async def register(page: Any, base_url: str, username: str) -> str:
    """Register in the client; returns the user's DID as the client shows it."""
    await page.goto(base_url + "/")
    await page.get_by_role("button", name="No account? Create one").click()
    await page.get_by_label("Username").fill(username)
    await page.get_by_label("Password").fill(f"{username}-browser-password")
    await page.get_by_role("button", name="Create account").click()
    await expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible(
        timeout=TIMEOUT
    )
    await page.get_by_role("button", name="New chat").click()
    did = await page.get_by_test_id("my-did").inner_text()
    assert did.endswith(f":users:{username}")
    return did


async def send(page: Any, text: str) -> None:
    await page.get_by_label("Message", exact=True).fill(text)
    await page.get_by_label("Message", exact=True).press("Enter")


def message(page: Any, text: str) -> Any:
    return page.get_by_test_id("message").filter(has_text=text)


async def test_two_people_chat_across_instances_in_chromium(make_database) -> None:
    started = time.monotonic()
    a_db, b_db = await make_database(), await make_database()
    a_port, b_port = free_port(), free_port()
    steps: list[str] = []
    async with contextlib.AsyncExitStack() as stack:
        a_url = await stack.enter_async_context(confer_process(a_port, a_db, steps.append))
        b_stack = contextlib.AsyncExitStack()
        b_url = await b_stack.enter_async_context(confer_process(b_port, b_db, steps.append))
        stack.push_async_callback(b_stack.aclose)
        browser = await stack.enter_async_context(chromium())
        alice_ctx = await browser.new_context(viewport={"width": 1280, "height": 800})
        bob_ctx = await browser.new_context(viewport={"width": 390, "height": 844})  # a phone
        alice, bob = await alice_ctx.new_page(), await bob_ctx.new_page()
        for page in (alice, bob):
            page.on("dialog", lambda dialog: dialog.accept())
            page.set_default_timeout(TIMEOUT)

        await register(alice, a_url, "alice")
        bob_did = await register(bob, b_url, "bob")

        # Alice opens a conversation with bob by his DID on the other instance.
        await alice.get_by_label("Username or DID").fill(bob_did)
        await alice.get_by_role("button", name="Open").click()
        await expect(alice.get_by_role("heading", level=2)).to_have_text("bob")
        await send(alice, "Hello Bob, from instance A")
        await expect(message(alice, "Hello Bob, from instance A")).to_have_count(1)
        await expect(alice.get_by_test_id("pending")).to_have_count(0)

        # Bob's list updates live with an unread count; he opens it and answers.
        await bob.goto(b_url + "/#/")
        conv = bob.get_by_test_id("conversation")
        await expect(conv).to_have_count(1)
        await expect(conv.get_by_test_id("unread")).to_have_text("1")
        await expect(conv).to_contain_text("Hello Bob, from instance A")
        await shot(bob, "conversation-list-phone")
        await conv.click()
        await expect(message(bob, "Hello Bob, from instance A")).to_have_count(1)
        await send(bob, "Hi Alice, verified on B")
        await expect(message(alice, "Hi Alice, verified on B")).to_have_count(1)
        await shot(alice, "chat-desktop")

        # Edit and delete reach the other instance.
        mine = message(alice, "Hello Bob, from instance A")
        await mine.get_by_role("button", name="Edit").click()
        await alice.get_by_label("Message", exact=True).fill("Hello Bob, edited")
        await alice.get_by_label("Message", exact=True).press("Enter")
        await expect(message(bob, "Hello Bob, edited")).to_contain_text("(edited)")
        await shot(bob, "chat-phone-edited")
        await send(alice, "This one goes away")
        await expect(message(bob, "This one goes away")).to_have_count(1)
        await message(alice, "This one goes away").get_by_role("button", name="Delete").click()
        await expect(message(bob, "This message was deleted.")).to_have_count(1)
        await expect(message(bob, "This one goes away")).to_have_count(0)

        # B restarts mid-conversation: bob's tab shows it, resumes, nothing lost or repeated.
        await b_stack.aclose()
        await expect(bob.locator("[data-state=offline], [data-state=connecting]")).to_have_count(1)
        await send(alice, "Sent while B was down")
        await expect(message(alice, "Sent while B was down")).to_have_count(1)
        await shot(bob, "chat-phone-offline")
        b_stack = contextlib.AsyncExitStack()
        await b_stack.enter_async_context(restarted(b_port, b_db))
        stack.push_async_callback(b_stack.aclose)
        await expect(bob.locator("[data-state=online]")).to_have_count(1, timeout=2 * TIMEOUT)
        await expect(message(bob, "Sent while B was down")).to_have_count(1)
        await send(bob, "Back after the restart")
        await expect(message(alice, "Back after the restart")).to_have_count(1)
        await expect(bob.get_by_test_id("pending")).to_have_count(0)
        for page in (alice, bob):
            texts = await page.get_by_test_id("message").all_inner_texts()
            bodies = [re.sub(r"\s+", " ", t) for t in texts]
            assert len(bodies) == 5, bodies  # hello(edited), hi, deleted, down, back
            assert sum("Sent while B was down" in b for b in bodies) == 1
            assert sum("Back after the restart" in b for b in bodies) == 1
        await shot(bob, "chat-phone-after-restart")

        await alice.get_by_role("link", name="Agent").click()
        await expect(alice.get_by_role("heading", name="My agent")).to_be_visible()
        await shot(alice, "agent-settings")
    print(f"browser test took {time.monotonic() - started:.1f} s")


async def test_docs_render_with_no_network(database_url: str) -> None:
    """/docs lists the operations with every request off this origin blocked."""
    port = free_port()
    async with confer_process(port, database_url, lambda _: None) as base_url, chromium() as b:
        page = await b.new_page()
        outside: list[str] = []

        async def only_local(route: Any) -> None:
            if route.request.url.startswith(base_url):
                await route.continue_()
            else:
                outside.append(route.request.url)
                await route.abort()

        await page.route("**/*", only_local)
        await page.goto(base_url + "/docs")
        await expect(page.locator(".opblock").first).to_be_visible(timeout=TIMEOUT)
        assert await page.locator(".opblock").count() > 20
        path = page.locator(".opblock-summary-path", has_text=re.compile(r"^/v1/auth/login$"))
        await expect(path).to_have_count(1)
        await shot(page, "docs")
        await page.goto(base_url + "/redoc")
        await expect(page.locator("h1", has_text="Confer").first).to_be_visible(timeout=TIMEOUT)
        await page.goto(base_url + "/")
        await expect(page.get_by_role("button", name="Log in", exact=True)).to_be_visible(
            timeout=TIMEOUT
        )
        assert outside == [], outside
