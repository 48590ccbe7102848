"""More of the web client in real headless Chromium: per-destination delivery status, a file
across instances, threads, translations on request, contact tags and trust levels and project
memory versions (two ``confer serve`` instances); profile and preferences, group roles,
knowledge and the context inspector (one instance). Same set-up and skips as
``test_client.py``; screenshots go to ``.data/screenshots/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.demo import confer_process
from tests.agents.llmserver import FakeLLM
from tests.gateway.harness import free_port, serve
from tests.web.test_client import (
    BROWSER_MARKS,
    TIMEOUT,
    chromium,
    expect,
    message,
    open_chat,
    open_conversation,
    register,
    restarted,
    send,
    shot,
    token_of,
)

pytestmark = BROWSER_MARKS

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


async def new_page(browser: Any, viewport: dict[str, int]) -> Any:
    context = await browser.new_context(viewport=viewport, accept_downloads=True)
    page = await context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    page.set_default_timeout(TIMEOUT)
    return page


def delivery(page: Any, text: str) -> Any:
    return message(page, text).get_by_test_id("delivery")


async def test_delivery_status_file_threads_translation_contacts_projects_across_instances(
    make_database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice on A, bob on B. Delivery status on alice's messages: delivered, failed once bob
    blocks her (his trust level), retrying while B is down and delivered after it is back. A
    file crosses byte-identical; a thread grows on both sides; bob translates a message with
    his agent's translation model (the loopback LLM); bob tags alice; alice keeps versioned
    project memory with bob, with a stale save refused and an old version restored."""
    started = time.monotonic()
    fake = FakeLLM()
    llm_port = free_port()
    a_db, b_db = await make_database(), await make_database()
    a_port, b_port = free_port(), free_port()
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(serve(fake.app(), llm_port))
        loop = {"loop": {"base_url": f"http://127.0.0.1:{llm_port}/v1", "wire": "openai"}}
        monkeypatch.setenv("CONFER_LLM_PROVIDERS", json.dumps(loop))
        a_url = await stack.enter_async_context(confer_process(a_port, a_db, print))
        b_stack = contextlib.AsyncExitStack()
        b_url = await b_stack.enter_async_context(confer_process(b_port, b_db, print))
        stack.push_async_callback(b_stack.aclose)
        browser = await stack.enter_async_context(chromium())
        alice, bob = await new_page(browser, DESKTOP), await new_page(browser, PHONE)
        alice_did = await register(alice, a_url, "alice")
        bob_did = await register(bob, b_url, "bob")
        b_host = f"localhost:{b_port}"

        # Delivered: alice's first message reaches B, and her client says so per destination.
        await alice.get_by_label("Username or DID").fill(bob_did)
        await alice.get_by_role("button", name="Open").click()
        await expect(alice.get_by_role("heading", level=2)).to_have_text("bob")
        chat_with_bob = alice.url
        first = "Hello Bob, how is the launch going?"
        await send(alice, first)
        await expect(delivery(alice, first)).to_have_attribute("data-state", "delivered")
        await expect(delivery(alice, first)).to_contain_text(f"{b_host}: delivered")

        # Bob's agent translates with the loopback model into his preferred language.
        await bob.goto(b_url + "/#/agent")
        await bob.get_by_label("Translation provider").select_option("loop")
        await bob.get_by_label("Translation model").fill("loop-translate")
        await bob.get_by_role("button", name="Save", exact=True).click()
        await expect(bob.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
        await bob.goto(b_url + "/#/settings")
        await bob.get_by_label(re.compile("^Language")).fill("de")
        await bob.get_by_role("button", name="Save").click()
        await expect(bob.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
        await open_conversation(bob, b_url, "alice")
        await message(bob, first).get_by_role("button", name="Translate into de").click()
        translation = message(bob, first).get_by_test_id("translation")
        await expect(translation).to_contain_text(f"echo: {first}")
        await expect(translation).to_contain_text("Translated into de by loop/loop-translate")
        [call] = [r for r in fake.requests if r["_path"] == "/v1/chat/completions"]
        assert "'de'" in call["messages"][0]["content"]
        assert call["messages"][-1] == {"role": "user", "content": first}
        await shot(bob, "chat-translation-phone")

        # Automatic translation: from now on alice's new messages arrive translated for bob.
        auto = bob.get_by_label("Translate new messages into de")
        await auto.check()
        await expect(auto).to_be_checked()
        venue = "The venue is booked for Friday"
        await send(alice, venue)
        await expect(message(bob, venue).get_by_test_id("translation")).to_contain_text(
            f"echo: {venue}"
        )
        await auto.uncheck()
        await bob.reload()
        await expect(bob.get_by_label("Translate new messages into de")).not_to_be_checked()

        # A thread: bob answers in it on B, alice sees the count on A and answers too.
        await message(bob, first).get_by_role("link", name="Open thread").click()
        await expect(bob.get_by_role("heading", name="Thread")).to_be_visible()
        await expect(bob.get_by_test_id("thread-replies")).to_have_text("0 replies")
        await bob.get_by_label("Reply in thread").fill("Going well, answered in the thread")
        await bob.get_by_label("Reply in thread").press("Enter")
        await expect(bob.get_by_test_id("thread-replies")).to_have_text("1 reply")
        count = message(alice, first).get_by_test_id("thread-count")
        await expect(count).to_have_text("1 reply")
        await count.click()
        await expect(alice.get_by_test_id("thread-message")).to_have_count(2)
        await expect(alice.get_by_test_id("thread-message").nth(1)).to_contain_text(
            "Going well, answered in the thread"
        )
        await alice.get_by_label("Reply in thread").fill("Great, ship it")
        await alice.get_by_label("Reply in thread").press("Enter")
        await expect(bob.get_by_test_id("thread-message")).to_have_count(3)
        await expect(bob.get_by_test_id("thread-replies")).to_have_text("2 replies")
        await expect(bob.get_by_test_id("thread-message").nth(2)).to_contain_text("Great, ship it")
        await shot(bob, "thread-phone")
        await bob.get_by_role("link", name="Back to the conversation").click()
        await expect(message(bob, first).get_by_test_id("thread-count")).to_have_text("2 replies")
        await alice.get_by_role("link", name="Back to the conversation").click()

        # A file from alice on A, downloaded on B: the same bytes.
        payload = os.urandom(48 * 1024)
        await alice.get_by_label("Attach a file").set_input_files(
            {"name": "launch-notes.bin", "mimeType": "application/octet-stream", "buffer": payload}
        )
        sent = alice.get_by_test_id("message").filter(has_text="Download launch-notes.bin")
        await expect(sent.get_by_test_id("delivery")).to_have_attribute("data-state", "delivered")
        button = bob.get_by_role("button", name=re.compile("Download launch-notes.bin"))
        await expect(button).to_have_count(1)
        async with bob.expect_download(timeout=2 * TIMEOUT) as download_info:
            await button.click()
        download = await download_info.value
        assert download.suggested_filename == "launch-notes.bin"
        assert await asyncio.to_thread(Path(await download.path()).read_bytes) == payload

        # Bob tags alice and then blocks her (trust level): her next message fails, for good.
        await bob.goto(b_url + "/#/contacts")
        contact = bob.get_by_test_id("contact").filter(has_text="alice")
        await expect(contact).to_have_count(1)
        await contact.get_by_label(re.compile("^Tags of")).fill("launch, work")
        await contact.get_by_role("button", name=re.compile("^Save tags")).click()
        await expect(contact.get_by_test_id("tag")).to_have_text(["launch", "work"])
        await contact.get_by_label(re.compile("^Trust level of")).select_option("blocked")
        await expect(contact).to_have_attribute("data-trust", "blocked")
        blocked = "Are you there, Bob?"
        await send(alice, blocked)
        await expect(delivery(alice, blocked)).to_have_attribute("data-state", "failed")
        await expect(delivery(alice, blocked)).to_contain_text("HTTP 403")
        await shot(alice, "chat-delivery-failed-desktop")
        await contact.get_by_label(re.compile("^Trust level of")).select_option("known")
        await expect(contact).to_have_attribute("data-trust", "known")
        await bob.reload()
        await expect(contact).to_have_attribute("data-trust", "known")
        await expect(contact.get_by_test_id("tag")).to_have_text(["launch", "work"])
        await bob.get_by_label("Filter by tag").select_option("work")
        await expect(bob.get_by_test_id("contact")).to_have_count(1)
        await shot(bob, "contacts-tags-phone")

        # Bob's policy and trust decide whether his agent asks him about alice's requests: a
        # rule allowing her (answered at once), no rule (he is asked), trusted (answered).
        await bob.goto(b_url + "/#/agent")
        agent_did = await bob.get_by_test_id("agent-did").inner_text()
        await bob.get_by_role("button", name="Add rule").click()
        await bob.get_by_label("Peer of rule 1").fill(alice_did)
        await bob.get_by_label("Action of rule 1").select_option("ask")
        await bob.get_by_label("Effect of rule 1").select_option("allow")
        await bob.get_by_role("button", name="Save policy").click()
        await expect(bob.get_by_role("status").filter(has_text="Policy saved.")).to_be_visible()
        await bob.reload()
        await expect(bob.get_by_label("Peer of rule 1")).to_have_value(alice_did)
        await bob.get_by_role("form", name="Policy").scroll_into_view_if_needed()
        await shot(bob, "agent-policy-phone")
        await open_chat(alice, agent_did)
        answers = alice.get_by_test_id("message").filter(has_text="offline provider")
        await send(alice, "When is the launch?")
        await expect(answers).to_have_count(1)
        await bob.get_by_role("button", name="Remove rule 1").click()
        await bob.get_by_role("button", name="Save policy").click()
        await expect(bob.get_by_test_id("policy-rule")).to_have_count(0)
        await expect(bob.get_by_role("status").filter(has_text="Policy saved.")).to_be_visible()
        await send(alice, "Who decided the date?")
        await bob.goto(b_url + "/#/")
        request = bob.get_by_test_id("conversation").filter(has_text="Permission request")
        await expect(request).to_have_count(1)
        await bob.goto(b_url + "/#/contacts")
        await contact.get_by_label(re.compile("^Trust level of")).select_option("trusted")
        await expect(contact).to_have_attribute("data-trust", "trusted")
        await send(alice, "Is the budget approved?")
        await expect(answers).to_have_count(2)
        mine = alice.get_by_test_id("message").filter(has=alice.locator(".who", has_text="You"))
        await expect(mine.filter(has_text="Is the budget approved?")).to_have_count(1)
        await alice.goto(chat_with_bob)

        # B is down: alice's message is retried, and delivered once B is back.
        await b_stack.aclose()
        down = "Sent while B is down"
        await send(alice, down)
        await expect(delivery(alice, down)).to_have_attribute("data-state", "retrying")
        # under load several attempts may have failed by the time the page is read
        await expect(delivery(alice, down)).to_contain_text(
            re.compile(r"retrying \(\d+ attempts?, ConnectError")
        )
        await shot(alice, "chat-delivery-retrying-desktop")
        b_stack = contextlib.AsyncExitStack()
        await b_stack.enter_async_context(restarted(b_port, b_db))
        stack.push_async_callback(b_stack.aclose)
        await expect(delivery(alice, down)).to_have_attribute(
            "data-state", "delivered", timeout=2 * TIMEOUT
        )
        await expect(delivery(alice, first)).to_have_attribute("data-state", "delivered")
        await expect(delivery(alice, blocked)).to_have_attribute("data-state", "failed")

        # Project memory with bob: versions, a stale save refused, an old version restored.
        await alice.get_by_role("link", name="Projects").click()
        await alice.get_by_label("Peer").select_option(bob_did)
        await alice.get_by_label("Project", exact=True).fill("launch")
        await alice.get_by_role("button", name="Open").click()
        version = alice.get_by_test_id("pm-version")
        await expect(version).to_contain_text("No document yet")
        await alice.get_by_label("Facts (Markdown)").fill("- ships on Friday")
        await alice.get_by_role("button", name="Save", exact=True).click()
        await expect(version).to_have_text("Version 1")
        await alice.get_by_label("Facts (Markdown)").fill("- ships on Monday")
        await alice.get_by_role("button", name="Save", exact=True).click()
        await expect(version).to_have_text("Version 2")
        async with httpx.AsyncClient(base_url=a_url, timeout=30) as http:
            elsewhere = await http.put(
                "/v1/project-memory/launch",
                params={"peer": bob_did},
                json={"facts_md": "- ships on Tuesday (written elsewhere)"},
                headers={"Authorization": f"Bearer {await token_of(alice)}", "If-Match": '"2"'},
            )
            assert elsewhere.status_code == 200, elsewhere.text
        await alice.get_by_label("Decisions (Markdown)").fill("- no Friday deploys")
        await alice.get_by_role("button", name="Save", exact=True).click()
        await expect(alice.get_by_role("alert")).to_contain_text("version")
        await expect(version).to_have_text("Version 2")
        await alice.get_by_role("button", name="Reload").click()
        await expect(version).to_have_text("Version 3")
        await expect(alice.get_by_label("Facts (Markdown)")).to_have_value(
            "- ships on Tuesday (written elsewhere)"
        )
        await expect(alice.get_by_test_id("pm-history")).to_have_count(3)
        await alice.get_by_role("button", name="View version 1").click()
        await expect(alice.get_by_test_id("pm-viewing")).to_contain_text("ships on Friday")
        await shot(alice, "project-memory-desktop")
        await alice.get_by_role("button", name="Restore version 1").click()
        await expect(version).to_have_text("Version 4")
        await expect(alice.get_by_label("Facts (Markdown)")).to_have_value("- ships on Friday")
        await expect(alice.get_by_test_id("pm-history")).to_have_count(4)
    print(f"browser test took {time.monotonic() - started:.1f} s")


async def test_profile_roles_knowledge_and_context_inspector_in_chromium(make_database) -> None:
    """Profile and preferences (a bad time zone refused, nothing saved); group roles with the
    server's rules shown (a group keeps an admin; observers read only; removal); knowledge
    list/add/duplicate/search/delete; the context inspector with its parts and token counts."""
    started = time.monotonic()
    db = await make_database()
    async with contextlib.AsyncExitStack() as stack:
        url = await stack.enter_async_context(confer_process(free_port(), db, print))
        browser = await stack.enter_async_context(chromium())
        alice = await new_page(browser, DESKTOP)
        carol = await new_page(browser, PHONE)
        dave = await new_page(browser, DESKTOP)
        for page, name in ((alice, "alice"), (carol, "carol"), (dave, "dave")):
            await register(page, url, name)

        # Profile and preferences, kept across a reload; a bad value is refused as a whole.
        await alice.get_by_role("link", name="Settings", exact=True).click()
        await alice.get_by_label("Display name").fill("Alice Martín")
        await alice.get_by_label("Avatar URL").fill("https://example.org/alice.png")
        await alice.get_by_label(re.compile("^Language")).fill("es")
        await alice.get_by_label("Time zone").fill("Europe/Madrid")
        await alice.get_by_label("Push notifications").check()
        await alice.get_by_label("My agent may answer for me while I am offline").uncheck()
        await alice.get_by_label("Show who wrote and what in notifications").uncheck()
        await alice.get_by_role("button", name="Save").click()
        await expect(alice.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
        await expect(alice.get_by_test_id("profile-name")).to_have_text("Alice Martín")
        await alice.get_by_label("Time zone").fill("Mars/Olympus_Mons")
        await alice.get_by_label("Display name").fill("Not saved")
        await alice.get_by_role("button", name="Save").click()
        await expect(alice.get_by_role("alert")).to_contain_text("timezone")
        await alice.reload()
        await expect(alice.get_by_label("Display name")).to_have_value("Alice Martín")
        await expect(alice.get_by_label("Avatar URL")).to_have_value(
            "https://example.org/alice.png"
        )
        await expect(alice.get_by_label(re.compile("^Language"))).to_have_value("es")
        await expect(alice.get_by_label("Time zone")).to_have_value("Europe/Madrid")
        await expect(alice.get_by_label("Push notifications")).to_be_checked()
        await expect(
            alice.get_by_label("My agent may answer for me while I am offline")
        ).not_to_be_checked()
        await expect(
            alice.get_by_label("Show who wrote and what in notifications")
        ).not_to_be_checked()
        await shot(alice, "settings-desktop")
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            me = await http.get(
                "/v1/me", headers={"Authorization": f"Bearer {await token_of(alice)}"}
            )
            assert me.json()["preferences"]["privacy"] == {
                "allow_offline_response": False,
                "notification_preview": False,
                "message_requests": None,  # untouched: the instance's default still applies
            }
            assert me.json()["preferences"]["notification"]["push"] is True

        # The password: a wrong current one is refused; the new one is the one that logs in.
        await alice.get_by_label("Current password").fill("not-alice-password")
        await alice.get_by_label("New password").fill("alice-new-password-2")
        await alice.get_by_role("button", name="Change password").click()
        await expect(alice.get_by_role("alert")).to_have_text("the current password is wrong")
        await alice.get_by_label("Current password").fill("alice-browser-password")
        await alice.get_by_role("button", name="Change password").click()
        await expect(alice.get_by_role("status").filter(has_text="Password changed")).to_have_text(
            "Password changed; 0 other sessions were signed out."
        )
        await alice.get_by_role("button", name="Log out alice").click()
        await alice.get_by_label("Username").fill("alice")
        await alice.get_by_label("Password").fill("alice-browser-password")
        await alice.get_by_role("button", name="Log in", exact=True).click()
        await expect(alice.get_by_role("alert")).to_be_visible()
        await alice.get_by_label("Password").fill("alice-new-password-2")
        await alice.get_by_role("button", name="Log in", exact=True).click()
        await expect(alice.get_by_role("button", name="New group")).to_be_visible()

        # Group roles: alice makes carol an admin and steps down; carol, the only admin, cannot
        # step down too; dave as an observer reads but cannot post; then carol removes him.
        await alice.get_by_role("button", name="New group").click()
        await alice.get_by_label("Name", exact=True).fill("roles")
        await alice.get_by_label(re.compile("^Members")).fill("carol dave")
        await alice.get_by_role("button", name="Create group").click()
        await send(alice, "Welcome, both of you")
        await alice.get_by_role("link", name="Members and settings").click()
        await alice.get_by_label("Role of carol").select_option("admin")
        await expect(alice.get_by_test_id("member").filter(has_text="carol")).to_have_attribute(
            "data-role", "admin"
        )
        await alice.get_by_label("Role of You").select_option("member")
        await expect(alice.get_by_text("Only the group's admins can")).to_be_visible()
        await expect(alice.get_by_label("Role of carol")).to_have_count(0)
        await open_conversation(carol, url, "roles")
        await carol.get_by_role("link", name="Members and settings").click()
        await carol.get_by_label("Role of You").select_option("member")
        await expect(carol.get_by_role("alert")).to_contain_text(
            "only admin: make someone else an admin first"
        )
        await expect(carol.get_by_label("Role of You")).to_have_value("admin")
        await shot(carol, "group-last-admin-phone")
        await carol.get_by_label("Role of dave").select_option("observer")
        await expect(carol.get_by_test_id("member").filter(has_text="dave")).to_have_attribute(
            "data-role", "observer"
        )
        await shot(carol, "group-roles-phone")
        await open_conversation(dave, url, "roles")
        await expect(dave.get_by_role("note")).to_have_text(
            "You are an observer here: you can read, not post."
        )
        await expect(dave.get_by_label("Message", exact=True)).to_have_count(0)
        await expect(message(dave, "Welcome, both of you")).to_have_count(1)
        await carol.get_by_role("button", name="Remove dave").click()
        await expect(carol.get_by_test_id("member")).to_have_count(2)
        await expect(dave.get_by_test_id("conversation").filter(has_text="roles")).to_have_count(0)
        members = alice.get_by_test_id("member")
        await expect(members.filter(has_text="carol")).to_have_attribute("data-role", "admin")

        # Knowledge: add, the same content again (stored once), search, delete.
        await alice.get_by_role("link", name="Knowledge").click()
        release = "Releases leave every second Tuesday from the main branch"
        for _ in range(2):
            await alice.get_by_label("Title").fill("Release train")
            await alice.get_by_label("Content").fill(release)
            await alice.get_by_label("Tags").fill("ops, release")
            await alice.get_by_label("Priority").fill("5")
            await alice.get_by_role("button", name="Add knowledge").click()
            await expect(alice.get_by_test_id("knowledge")).to_have_count(1)
        already = alice.get_by_role("status").filter(has_text="Already in your knowledge.")
        await expect(already).to_be_visible()
        await expect(alice.get_by_test_id("knowledge")).to_have_count(1)
        await alice.get_by_label("Content").fill("The coffee machine is on floor 3")
        await alice.get_by_role("button", name="Add knowledge").click()
        await expect(alice.get_by_test_id("knowledge")).to_have_count(2)
        await alice.get_by_label("Search knowledge").fill("Tuesday")
        await alice.get_by_role("button", name="Search").click()
        await expect(alice.get_by_test_id("hit")).to_have_count(1)
        await expect(alice.get_by_test_id("hit")).to_contain_text("Release train")
        await shot(alice, "knowledge-desktop")
        await alice.get_by_role("button", name=re.compile("^Delete knowledge: The coffee")).click()
        await expect(alice.get_by_test_id("knowledge")).to_have_count(1)
        await alice.get_by_label("Search knowledge").fill("coffee")
        await alice.get_by_role("button", name="Search").click()
        await expect(alice.get_by_test_id("no-hits")).to_be_visible()

        # A memory, then the context inspector of alice's conversation with her agent.
        await alice.get_by_role("link", name="Memories").click()
        await alice.get_by_label("Memory", exact=True).fill("Alice prefers short answers")
        await alice.get_by_role("button", name="Add memory").click()
        await expect(alice.get_by_test_id("memory")).to_have_count(1)
        await alice.get_by_role("button", name="New chat").click()
        await alice.get_by_role("button", name="Chat with my agent").click()
        await send(alice, "When do releases leave?")
        await expect(message(alice, "This is Confer's offline provider")).to_have_count(1)
        await alice.get_by_role("link", name="Inspect context").click()
        parts = alice.get_by_test_id("context-part")
        await expect(parts.first).to_be_visible()
        names = await parts.evaluate_all("rows => rows.map(r => r.dataset.part)")
        assert {"system_prompt", "memories", "knowledge", "history"} <= set(names), names
        tokens = {
            n: int(t)
            for n, t in zip(
                names, await alice.get_by_test_id("part-tokens").all_inner_texts(), strict=True
            )
        }
        assert all(tokens[n] > 0 for n in ("system_prompt", "memories", "knowledge", "history"))
        total = await alice.get_by_test_id("context-total").inner_text()
        assert total.startswith(f"{sum(tokens.values())} of "), (total, tokens)
        knowledge = alice.get_by_test_id("part-content").filter(has_text="Knowledge (")
        await knowledge.locator("summary").click()
        await expect(knowledge).to_contain_text(release)
        await shot(alice, "context-inspector-desktop")
        await alice.get_by_label("Audience").select_option("others")
        await expect(alice.locator("[data-part=memories] [data-testid=part-tokens]")).to_have_text(
            "0"
        )
        await expect(alice.get_by_test_id("context-system")).not_to_contain_text(
            "Alice prefers short answers"
        )
        await carol.get_by_role("link", name="Settings", exact=True).click()
        await expect(carol.get_by_role("heading", name="Profile and preferences")).to_be_visible()
        await shot(carol, "settings-phone")
    print(f"browser test took {time.monotonic() - started:.1f} s")
