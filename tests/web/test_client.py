"""The web client in real headless Chromium (Debian's ``chromium``, driven by Playwright).

Two ``confer serve`` processes on loopback, alice in one browser context on A and bob in another
on B: register, open a conversation by DID, chat both ways, edit, delete, and a restart of B in
the middle of the conversation with no message lost or repeated; then a file, a group across
instances, a permission request approved in the client, the own agent's streamed answer, and
receipts, typing, presence, logging in again, older pages, group settings, contacts, provider
keys and memories. Screenshots of the main screens
go to ``.data/screenshots/``. Skipped with the reason when no chromium or no Playwright is found
(``.ci/run`` installs both; ``playwright install`` is never needed).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import shutil
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
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

# What every browser test needs; the other browser test modules take the same marks.
BROWSER_MARKS = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
    pytest.mark.skipif(
        not STATIC.is_file(), reason="web client not built (cd web && npm ci && npm run build)"
    ),
]
pytestmark = BROWSER_MARKS

expect = playwright_api.expect
TIMEOUT = 45_000  # ms; federation hops on a loaded machine
expect.set_options(timeout=TIMEOUT)


DOCS_PAGES = ("/docs", "/redoc")
"""Pages whose policy blocks something on purpose (ReDoc's logo from cdn.redoc.ly)."""


def _watch_policy(page: Any, violations: list[str]) -> None:
    """Record every Content-Security-Policy violation the client's pages report."""

    def on_console(message: Any) -> None:
        if "Content Security Policy" in message.text and urlsplit(page.url).path not in DOCS_PAGES:
            violations.append(f"{page.url}: {message.text}")

    page.on("console", on_console)


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    """A headless Chromium; a test fails when a page of the client breaks its
    Content-Security-Policy (a blocked script, style, image or connection)."""
    violations: list[str] = []
    async with playwright_api.async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        new_page, new_context = browser.new_page, browser.new_context

        async def watched_page(*args: Any, **kwargs: Any) -> Any:
            page = await new_page(*args, **kwargs)
            _watch_policy(page, violations)
            return page

        async def watched_context(*args: Any, **kwargs: Any) -> Any:
            context = await new_context(*args, **kwargs)
            context.on("page", lambda page: _watch_policy(page, violations))
            return context

        browser.new_page, browser.new_context = watched_page, watched_context
        try:
            yield browser
        finally:
            await browser.close()
    assert violations == [], violations


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
        "CONFER_MESSAGE_REQUESTS_DEFAULT": "false",  # as the demo; requests: test_requests_reports
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


@contextlib.asynccontextmanager
async def _connection(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    try:
        yield conn
    finally:
        await conn.close()


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
        # Swagger UI virtualises its lists (only what is near the viewport is in the DOM):
        # scroll down through the page collecting the operations' paths
        seen: set[str] = set()
        deadline = time.monotonic() + TIMEOUT / 1000
        while len(seen) <= 20:
            assert time.monotonic() < deadline, f"only {len(seen)} operations: {sorted(seen)}"
            seen |= set(await page.locator(".opblock-summary-path").all_inner_texts())
            await page.mouse.wheel(0, 600)
            await asyncio.sleep(0.2)
        await page.evaluate("window.scrollTo(0, 0)")
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


# Records every text the streaming bubble shows, so a test can tell that partial text was on
# screen before the final message replaced it (the offline provider streams fast).
RECORD_STREAMS = """
window.__streamed = [];
new MutationObserver(() => {
  for (const el of document.querySelectorAll('[data-testid=streaming] .text')) {
    const t = el.textContent;
    if (t && window.__streamed[window.__streamed.length - 1] !== t) window.__streamed.push(t);
  }
}).observe(document, { subtree: true, childList: true, characterData: true });
"""


async def open_chat(page: Any, target: str) -> None:
    await page.get_by_role("button", name="New chat").click()
    await page.get_by_label("Username or DID").fill(target)
    await page.get_by_role("button", name="Open").click()


async def open_conversation(page: Any, base_url: str, title: str) -> None:
    await page.goto(base_url + "/#/")
    conv = page.get_by_test_id("conversation").filter(has_text=title)
    await expect(conv).to_have_count(1)
    await conv.click()
    await expect(page.get_by_role("heading", level=2)).to_have_text(title)


async def test_files_groups_consent_and_streaming_in_chromium(make_database) -> None:
    """A file between two people of A; a group of A and B; bob approves a request to his agent
    from alice (policy ``ask``); alice watches her own agent stream its answer."""
    started = time.monotonic()
    a_db, b_db = await make_database(), await make_database()
    steps: list[str] = []
    async with contextlib.AsyncExitStack() as stack:
        a_url = await stack.enter_async_context(confer_process(free_port(), a_db, steps.append))
        b_url = await stack.enter_async_context(confer_process(free_port(), b_db, steps.append))
        browser = await stack.enter_async_context(chromium())
        pages = []
        for size in ({"width": 1280, "height": 800}, {"width": 1280, "height": 800}, None):
            ctx = await browser.new_context(
                viewport=size or {"width": 390, "height": 844}, accept_downloads=True
            )
            await ctx.add_init_script(RECORD_STREAMS)
            page = await ctx.new_page()
            page.on("dialog", lambda dialog: dialog.accept())
            page.set_default_timeout(TIMEOUT)
            pages.append(page)
        alice, carol, bob = pages
        await register(alice, a_url, "alice")
        await register(carol, a_url, "carol")
        bob_did = await register(bob, b_url, "bob")

        # A file from alice to carol (both on A): upload, then carol downloads the same bytes.
        # (A file across instances: test_client_features.py.)
        await open_chat(alice, "carol")
        await expect(alice.get_by_role("heading", level=2)).to_have_text("carol")
        payload = b"Quarterly numbers\n" * 200
        await alice.get_by_label("Attach a file").set_input_files(
            {"name": "q3-plan.txt", "mimeType": "text/plain", "buffer": payload}
        )
        await expect(
            alice.get_by_role("button", name=re.compile("Download q3-plan.txt"))
        ).to_have_count(1)
        await expect(alice.get_by_test_id("pending")).to_have_count(0)
        await open_conversation(carol, a_url, "alice")
        async with carol.expect_download() as download_info:
            await carol.get_by_role("button", name=re.compile("Download q3-plan.txt")).click()
        download = await download_info.value
        assert download.suggested_filename == "q3-plan.txt"
        saved = await download.path()
        assert await asyncio.to_thread(Path(saved).read_bytes) == payload
        await shot(carol, "chat-file")

        # A group of alice, carol (A) and bob (B): alice's message reaches both.
        await alice.get_by_role("button", name="New group").click()
        await alice.get_by_label("Name", exact=True).fill("launch")
        await alice.get_by_label(re.compile("^Members")).fill(f"carol {bob_did}")
        await alice.get_by_role("button", name="Create group").click()
        await expect(alice.get_by_role("heading", level=2)).to_have_text("launch")
        await expect(alice.get_by_text("3 members")).to_be_visible()
        await send(alice, "Ship it on Friday")
        await expect(message(alice, "Ship it on Friday")).to_have_count(1)
        for page, url in ((carol, a_url), (bob, b_url)):
            await page.goto(url + "/#/")
            conv = page.get_by_test_id("conversation").filter(has_text="Ship it on Friday")
            await expect(conv).to_have_count(1)
            await conv.click()
            await expect(message(page, "Ship it on Friday")).to_have_count(1)
        await send(carol, "Carol agrees")
        await expect(message(alice, "Carol agrees")).to_have_count(1)
        await shot(alice, "group-desktop")

        # One order everywhere: bob's post waits on B (A's destination parked there) while
        # alice writes on A; the home orders alice's first, and bob's client moves his own
        # post behind hers when the home's answer places it (message.ordered).
        # B's outbox row for bob's post is held from the moment it is written (a trigger in
        # B's database), so it cannot reach A before alice's post, however the machine is
        # loaded; it is let go once bob has alice's post.
        async with _connection(b_db) as conn:
            await conn.execute(
                """CREATE FUNCTION test_hold_bobs_post() RETURNS trigger AS $$
                   BEGIN
                     IF EXISTS (SELECT 1 FROM messages m WHERE m.id = NEW.message_id
                                AND m.content = 'Bob writes first') THEN
                       NEW.next_attempt_at := NOW() + interval '1 hour';
                     END IF;
                     RETURN NEW;
                   END $$ LANGUAGE plpgsql"""
            )
            await conn.execute(
                """CREATE TRIGGER test_hold_bobs_post BEFORE INSERT ON federation_outbox
                   FOR EACH ROW EXECUTE FUNCTION test_hold_bobs_post()"""
            )
        await send(bob, "Bob writes first")
        await expect(message(bob, "Bob writes first")).to_have_count(1)
        await send(alice, "Alice answers before it reaches her")
        await expect(message(bob, "Alice answers before it reaches her")).to_have_count(1)
        async with _connection(b_db) as conn:
            await conn.execute("DROP TRIGGER test_hold_bobs_post ON federation_outbox")
            held = await conn.fetch(
                """UPDATE federation_outbox o SET next_attempt_at = NOW()
                   FROM messages m WHERE m.id = o.message_id AND m.content = 'Bob writes first'
                     AND o.delivered_at IS NULL AND o.failed_at IS NULL
                   RETURNING pg_notify('confer_outbox', o.destination)"""
            )
            assert held, "bob's post left B before alice's reached him"
        for page in (alice, bob):
            await expect(message(page, "Bob writes first")).to_have_count(1)
            await expect(page.get_by_test_id("message").last).to_contain_text("Bob writes first")
            await expect(page.get_by_test_id("message").nth(-2)).to_contain_text(
                "Alice answers before it reaches her"
            )

        # Alice addresses bob's agent; its policy asks bob; he approves once in the client.
        await bob.goto(b_url + "/#/agent")
        agent_did = await bob.get_by_test_id("agent-did").inner_text()
        assert ":agents:" in agent_did
        await bob.goto(b_url + "/#/")
        await open_chat(alice, agent_did)
        await send(alice, "May I see the Q3 plan?")
        await expect(message(alice, "May I see the Q3 plan?")).to_have_count(1)
        request = bob.get_by_test_id("conversation").filter(has_text="Permission request")
        await expect(request).to_have_count(1)
        await request.click()
        card = bob.get_by_role("group", name="Permission request")
        await expect(card).to_contain_text("ask")
        await shot(bob, "permission-request-phone")
        await card.get_by_role("button", name="Approve once").click()
        await expect(message(alice, "Approved: your request was delivered.")).to_have_count(1)
        await expect(card.get_by_role("status")).to_contain_text("approved once")
        held = bob.get_by_test_id("message").filter(has=bob.locator(".who", has_text="alice"))
        await expect(held).to_have_text(re.compile("May I see the Q3 plan"))
        await expect(bob.get_by_test_id("message").first.locator(".who")).to_have_text("Confer")
        await shot(bob, "permission-approved-phone")

        # Alice's own agent streams its answer: partial text first, then the final message.
        await alice.get_by_role("button", name="New chat").click()
        await alice.get_by_role("button", name="Chat with my agent").click()
        await send(alice, "What do you remember about the launch?")
        answer = message(alice, "This is Confer's offline provider")
        await expect(answer).to_have_count(1)
        await expect(alice.get_by_test_id("streaming")).to_have_count(0)
        final = await answer.locator(".text").inner_text()
        streamed = await alice.evaluate("window.__streamed")
        assert streamed, "no partial answer was shown while the agent streamed"
        assert all(final.startswith(s.strip()) for s in streamed), (streamed, final)
        assert len(streamed[0]) < len(final)
        await shot(alice, "agent-answer")
    print(f"browser test took {time.monotonic() - started:.1f} s")


async def token_of(page: Any) -> str:
    """The access token the client keeps for this browser profile."""
    tokens = await page.evaluate("JSON.parse(localStorage.getItem('confer.tokens'))")
    return str(tokens["access_token"])


async def test_accounts_receipts_groups_contacts_keys_memories_in_chromium(
    make_database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read receipts, typing, presence, log out and in, older pages, group rename / archive /
    leave, contacts (add by DID, alias, block), provider keys (never shown), memories."""
    started = time.monotonic()
    key = base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
    monkeypatch.setenv("CONFER_ENCRYPTION_KEYS", f"web1:{key}")
    a_db, b_db = await make_database(), await make_database()
    async with contextlib.AsyncExitStack() as stack:
        a_url = await stack.enter_async_context(confer_process(free_port(), a_db, print))
        b_url = await stack.enter_async_context(confer_process(free_port(), b_db, print))
        async with httpx.AsyncClient(base_url=b_url, timeout=30) as http:
            registered = await http.post(
                "/v1/auth/register", json={"username": "bob", "password": "bob-password-1"}
            )
            assert registered.status_code == 201, registered.text
            bob_did = registered.json()["user"]["did"]
        browser = await stack.enter_async_context(chromium())
        pages = []
        for _ in range(2):
            ctx = await browser.new_context(viewport={"width": 1280, "height": 800})
            page = await ctx.new_page()
            page.on("dialog", lambda dialog: dialog.accept())
            page.set_default_timeout(TIMEOUT)
            pages.append(page)
        alice, carol = pages
        await register(alice, a_url, "alice")
        await register(carol, a_url, "carol")

        # Read receipts, typing and presence between alice and carol.
        await open_chat(alice, "carol")
        await expect(alice.get_by_role("heading", level=2)).to_have_text("carol")
        chat_url = alice.url
        await open_chat(carol, "alice")
        await send(carol, "Hi from carol")
        await expect(message(alice, "Hi from carol")).to_have_count(1)
        await send(alice, "Did you read this?")
        await expect(message(carol, "Did you read this?")).to_have_count(1)
        await expect(message(alice, "Did you read this?").get_by_test_id("read")).to_be_visible()
        await carol.get_by_label("Message", exact=True).press_sequentially("typing")
        await expect(alice.get_by_text("carol is typing…")).to_be_visible()

        # Carol logs out (alice sees her go offline) and logs in again with her password.
        await carol.get_by_role("button", name="Log out carol").click()
        await expect(carol.get_by_role("button", name="Log in", exact=True)).to_be_visible()
        await expect(alice.get_by_test_id("presence")).to_have_text("offline")
        await carol.get_by_label("Username").fill("carol")
        await carol.get_by_label("Password").fill("carol-browser-password")
        await carol.get_by_role("button", name="Log in", exact=True).click()
        await expect(carol.get_by_test_id("conversation").filter(has_text="alice")).to_have_count(1)
        await expect(alice.get_by_test_id("presence")).to_have_text("online")
        await shot(alice, "chat-receipts-presence")

        # Older messages load page by page (50 at a time).
        conversation_id = chat_url.rsplit("/", 1)[-1]
        async with httpx.AsyncClient(base_url=a_url, timeout=30) as http:
            headers = {"Authorization": f"Bearer {await token_of(alice)}"}
            for n in range(60):
                posted = await http.post(
                    f"/v1/conversations/{conversation_id}/messages",
                    json={"content": f"filler {n:02d}"},
                    headers=headers,
                )
                assert posted.status_code == 201, posted.text
        await carol.goto(a_url + "/#/")
        await carol.reload()
        await carol.get_by_test_id("conversation").filter(has_text="alice").click()
        await expect(message(carol, "filler 59")).to_have_count(1)
        await expect(carol.get_by_test_id("message")).to_have_count(50)
        await carol.get_by_role("button", name="Load older messages").click()
        await expect(carol.get_by_test_id("message")).to_have_count(62)
        await expect(message(carol, "Hi from carol")).to_have_count(1)
        await expect(carol.get_by_role("button", name="Load older messages")).to_have_count(0)

        # A group: renamed, archived and reopened by alice (its admin); carol leaves it.
        await alice.get_by_role("button", name="New group").click()
        await alice.get_by_label("Name", exact=True).fill("team")
        await alice.get_by_label(re.compile("^Members")).fill("carol")
        await alice.get_by_role("button", name="Create group").click()
        await expect(alice.get_by_role("heading", level=2)).to_have_text("team")
        await send(alice, "Welcome to the team")
        await expect(carol.get_by_test_id("conversation").filter(has_text="team")).to_have_count(1)
        await alice.get_by_role("link", name="Members and settings").click()
        await alice.get_by_label("Group name").fill("core team")
        await alice.get_by_role("button", name="Rename").click()
        await expect(alice.get_by_role("heading", level=2)).to_have_text("Members of core team")
        await expect(
            carol.get_by_test_id("conversation").filter(has_text="core team")
        ).to_have_count(1)
        await alice.get_by_role("button", name="Archive").click()
        await expect(alice.get_by_role("button", name="Reopen")).to_be_visible()
        await shot(alice, "group-settings")
        await alice.get_by_role("link", name="Back to the conversation").click()
        await expect(alice.get_by_text("This conversation is archived.")).to_be_visible()
        await expect(alice.get_by_label("Message", exact=True)).to_have_count(0)
        await alice.get_by_role("link", name="Members and settings").click()
        await alice.get_by_role("button", name="Reopen").click()
        await expect(alice.get_by_role("button", name="Archive")).to_be_visible()
        await carol.get_by_test_id("conversation").filter(has_text="core team").click()
        await carol.get_by_role("link", name="Members and settings").click()
        await carol.get_by_role("button", name="Leave group").click()
        await expect(
            carol.get_by_test_id("conversation").filter(has_text="core team")
        ).to_have_count(0)
        await expect(alice.get_by_test_id("member")).to_have_count(1)  # alice alone

        # Contacts: bob of B by his DID, with an alias; then blocked.
        await alice.get_by_role("link", name="Contacts").click()
        # The members page just left has a DID field too ("Add a member (username or DID)"):
        # fill only once the contacts page is the one shown.
        await expect(alice.get_by_role("heading", name="Contacts")).to_be_visible()
        await alice.get_by_label("DID", exact=True).fill(bob_did)
        await alice.get_by_label("Alias").fill("Bobby")
        await alice.get_by_role("button", name="Add contact").click()
        contact = alice.get_by_test_id("contact").filter(has_text="Bobby")
        await expect(contact).to_have_attribute("data-trust", "unknown")
        await contact.get_by_role("button", name="Block").click()
        await expect(contact).to_have_attribute("data-trust", "blocked")
        await alice.reload()
        await expect(contact).to_have_attribute("data-trust", "blocked")
        await shot(alice, "contacts")

        # A provider key: stored, listed by provider only, never shown; then removed.
        secret = "sk-browser-test-0123456789"
        await alice.get_by_role("link", name="Agent").click()
        await alice.get_by_label("Key provider").select_option("openai")
        await alice.get_by_label("API key").fill(secret)
        await alice.get_by_role("button", name="Store key").click()
        await expect(alice.get_by_test_id("llm-key")).to_contain_text("openai")
        await expect(alice.get_by_label("API key")).to_have_value("")
        await alice.reload()
        await expect(alice.get_by_test_id("llm-key")).to_contain_text("openai")
        assert secret not in await alice.content()
        await shot(alice, "agent-settings-keys")
        await alice.get_by_role("button", name="Remove the openai key").click()
        await expect(alice.get_by_test_id("llm-key")).to_have_count(0)

        # Memories: add, list, search, delete.
        await alice.get_by_role("link", name="Memories").click()
        await alice.get_by_label("Memory", exact=True).fill(
            "The demo deploys every Friday at 16:00 UTC"
        )
        await alice.get_by_label("Memory type").select_option("decision")
        await alice.get_by_role("button", name="Add memory").click()
        await expect(alice.get_by_test_id("memory")).to_contain_text("deploys every Friday")
        await alice.get_by_label("Search memories").fill("deploys")
        await alice.get_by_role("button", name="Search").click()
        await expect(alice.get_by_test_id("hit")).to_contain_text("deploys every Friday")
        await shot(alice, "memories")
        await alice.get_by_role("button", name=re.compile("^Delete memory")).click()
        await expect(alice.get_by_test_id("memory")).to_have_count(0)
    print(f"browser test took {time.monotonic() - started:.1f} s")
