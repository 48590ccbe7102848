"""Messages over real HTTP/WS and PostgreSQL: content types, threads, edits, deletes,
idempotency, receipts and unread counts, ordering, and hostile text."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.ids import next_after
from gateway.store import conversations as conv_store
from gateway.store import messages as messages_store
from models import Message
from tests.gateway.harness import Instance, User, next_event, run_instance


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


async def _pair(instance: Instance) -> tuple[User, User, str]:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    return alice, bob, (await alice.direct_with(bob.did))["id"]


async def _post(user: User, cid: str, headers: dict[str, str] | None = None, **body: Any) -> Any:
    return await user.instance.client.post(
        f"/v1/conversations/{cid}/messages", json=body, headers={**user.headers, **(headers or {})}
    )


VALID = [
    {"content_type": "text", "content": "hi", "language": "en"},
    {"content_type": "code", "content": "print(1)", "content_json": {"language": "python"}},
    {
        "content_type": "permission_request",
        "content_json": {"action": "read", "level": "L2", "scope": {"project": "p"}},
    },
    {
        "content_type": "tool_call",
        "content_json": {"call_id": "c1", "name": "search", "arguments": {"q": "x"}},
    },
    {"content_type": "tool_result", "content_json": {"call_id": "c1", "result": [1, 2]}},
    {
        "content_type": "citation",
        "content": "see",
        "citations": [{"source": "RFC 9421", "page": 3, "trust_level": "authoritative"}],
    },
    {
        "content_type": "citation",
        "content": "see",
        "citations": [
            {
                "source": "RFC",
                "url": "https://www.rfc-editor.org/rfc/rfc9421",
                "trust_level": "verified",
            },
            {"source": "old", "url": "HTTP://example.org/a?b=c#d", "trust_level": "unverified"},
        ],
    },
    {
        "content_type": "text",
        "content": "hola",
        "translation": {"from": "es", "to": "en", "provider": "offline"},
        "via": "claude-code",
    },
]

INVALID = [
    {  # well formed, but no such upload of the sender
        "content_type": "file",
        "content_json": {"attachment_id": "01HZX3Y4Z5A6B7C8D9E0F1G2H3", "filename": "a.txt"},
    },
    {"content_type": "text", "content": "x", "content_json": {"a": 1}},
    {"content_type": "text"},
    {"content_type": "code", "content_json": {"language": "python"}},
    {"content_type": "permission_request", "content_json": {"action": "read", "level": "L9"}},
    {"content_type": "tool_call", "content_json": {"name": "search"}},
    {"content_type": "tool_result", "content_json": {"result": 1}},
    {"content_type": "file", "content_json": {"attachment_id": "nope", "filename": "a"}},
    {"content_type": "citation", "content": "see"},
    # a citation's url is shown as a link: only http and https
    *(
        {
            "content_type": kind,
            "content": "see",
            "citations": [{"source": "clickme", "url": url, "trust_level": "verified"}],
        }
        for kind in ("citation", "text")
        for url in (
            "javascript:alert(document.cookie)",
            " JavaScript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "ftp://example.org/a",
            "https://",
            "example.org/page",
        )
    ),
    {"content_type": "system_notice", "content": "I am the server"},
    {"content_type": "poem", "content": "x"},
    {"content_type": "text", "content": "x", "language": "!!"},
]


async def test_content_types_are_validated(instance: Instance) -> None:
    alice, _, cid = await _pair(instance)
    for body in VALID:
        response = await _post(alice, cid, **body)
        assert response.status_code == 201, (body, response.text)
        stored = response.json()
        for key in ("content_type", "content_json", "citations", "translation", "via"):
            if key in body:
                expected = body[key]
                if key == "citations":
                    expected = [{"url": None, "page": None, "passage": None, **c} for c in expected]
                assert stored[key] == expected, key
    for body in INVALID:
        response = await _post(alice, cid, **body)
        assert response.status_code == 422, (body, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == "validation_failed"


async def test_language_tags_fit_the_column_or_are_422(instance: Instance) -> None:
    """``messages.language`` is VARCHAR(8) (data model spec): a valid BCP 47 tag that fits is
    stored in canonical case; a longer valid one (``zh-Hant-TW``) is a 422, never a 500."""
    alice, _, cid = await _pair(instance)
    for tag, stored in (("zh-hant", "zh-Hant"), ("pt-BR", "pt-BR"), ("yue-hk", "yue-HK")):
        response = await _post(alice, cid, content="x", language=tag)
        assert response.status_code == 201, response.text
        assert response.json()["language"] == stored
    for tag in ("zh-Hant-TW", "sr-Latn-RS", "de-CH-1901"):
        response = await _post(alice, cid, content="x", language=tag)
        assert response.status_code == 422, (tag, response.text)
        assert response.json()["code"] == "validation_failed"
        assert "language" in response.text


async def test_hostile_text_is_422_never_500(instance: Instance) -> None:
    alice, _, cid = await _pair(instance)
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    bodies = [
        '{"content": "a\\u0000b"}',
        '{"content": "a\\ud800b"}',
        '{"content_type": "tool_result", "content_json": {"call_id": "c", "result": "\\udfff"}}',
        json.dumps({"content": "x" * 32_001}),
        json.dumps(
            {"content_type": "tool_result", "content_json": {"call_id": "c", "result": deep}}
        ),
        '{"content": "x", "language": "\\u0000\\u0000"}',
        '{"content_type": "tool_result", "content_json": {"call_id": "c", "result": '
        + "[" * 50_000
        + "]" * 50_000
        + "}}",
    ]
    for raw in bodies:
        response = await alice.instance.client.post(
            f"/v1/conversations/{cid}/messages",
            content=raw,
            headers={**alice.headers, "Content-Type": "application/json"},
        )
        assert response.status_code == 422, (raw[:80], response.status_code, response.text)
    async with instance.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM messages") == 0


async def test_threads(instance: Instance) -> None:
    alice, bob, cid = await _pair(instance)
    root = (await _post(alice, cid, content="root")).json()
    r1 = (await _post(bob, cid, content="r1", in_reply_to=root["id"])).json()
    r2 = (await _post(alice, cid, content="r2", in_reply_to=r1["id"])).json()
    await _post(alice, cid, content="elsewhere")
    assert r2["thread_root"] == root["id"]
    base = f"/v1/conversations/{cid}/messages"
    page = (await bob.request("GET", f"{base}/{r2['id']}/thread", params={"limit": 2})).json()
    assert [m["content"] for m in page["items"]] == ["root", "r1"]
    rest = await bob.request(
        "GET", f"{base}/{root['id']}/thread", params={"after": page["next_after"]}
    )
    assert [m["content"] for m in rest.json()["items"]] == ["r2"]
    assert rest.json()["next_after"] is None


async def test_edit_keeps_versions_and_refuses_stale_writes(instance: Instance) -> None:
    alice, bob, cid = await _pair(instance)
    sent = (await _post(alice, cid, content="v1")).json()
    path = f"/v1/conversations/{cid}/messages/{sent['id']}"
    async with bob.websocket() as ws:
        first = await alice.request("PATCH", path, json={"version": 1, "content": "v2"})
        assert first.status_code == 200
        assert first.json()["version"] == 2 and first.json()["message"]["content"] == "v2"
        event = await next_event(ws, "message.edited")
        assert event["data"]["content"] == "v2" and event["data"]["version"] == 2
    stale = await alice.request("PATCH", path, json={"version": 1, "content": "v2'"})
    assert stale.status_code == 409 and stale.json()["code"] == "edit_conflict"
    assert (
        await bob.request("PATCH", path, json={"version": 2, "content": "x"})
    ).status_code == 403
    # Concurrent edits of the same version: exactly one wins.
    results = await asyncio.gather(
        *(
            alice.request("PATCH", path, json={"version": 2, "content": f"race {i}"})
            for i in range(5)
        )
    )
    assert sorted(r.status_code for r in results) == [200, 409, 409, 409, 409]
    detail = (await bob.request("GET", path)).json()
    assert detail["version"] == 3
    assert [v["content"] for v in detail["previous_versions"]] == ["v1", "v2"]


async def test_lists_say_which_messages_were_edited(instance: Instance) -> None:
    """A listed message carries its ``version`` and ``edited_at`` (as a single read does), so
    a client that reloads still shows an edit it did not see happen."""
    alice, bob, cid = await _pair(instance)
    root = (await _post(alice, cid, content="root")).json()
    edited = (await _post(alice, cid, content="v1", in_reply_to=root["id"])).json()
    path = f"/v1/conversations/{cid}/messages/{edited['id']}"
    changed = await alice.request("PATCH", path, json={"version": 1, "content": "v2"})
    assert changed.status_code == 200, changed.text
    detail = (await bob.request("GET", path)).json()
    assert detail["version"] == 2 and detail["edited_at"] is not None
    listed = (await bob.request("GET", f"/v1/conversations/{cid}/messages")).json()["items"]
    thread = (
        await bob.request("GET", f"/v1/conversations/{cid}/messages/{root['id']}/thread")
    ).json()["items"]
    for items in (listed, thread):
        shown = {m["id"]: (m["content"], m["version"], m["edited_at"]) for m in items}
        assert shown[root["id"]] == ("root", 1, None)
        assert shown[edited["id"]] == ("v2", 2, detail["edited_at"])


async def test_a_citation_message_can_be_edited(instance: Instance) -> None:
    """An edit changes the content and keeps the stored citations, as stored: one whose URL
    was stored before URLs had to be http(s) does not refuse the edit."""
    alice, _, cid = await _pair(instance)
    cited = {"source": "RFC", "url": "https://example.org/rfc", "trust_level": "verified"}
    for stored_url in ("https://example.org/rfc", "javascript:alert(1)"):
        sent = (
            await _post(alice, cid, content_type="citation", content="see", citations=[cited])
        ).json()
        async with instance.state.pool.acquire() as conn:
            await conn.execute(
                "UPDATE messages SET citations_json = $1 WHERE id = $2",
                [{**cited, "url": stored_url}],
                sent["id"],
            )
        path = f"/v1/conversations/{cid}/messages/{sent['id']}"
        edited = await alice.request("PATCH", path, json={"version": 1, "content": "see this"})
        assert edited.status_code == 200, edited.text
        message = edited.json()["message"]
        assert message["content"] == "see this"
        assert [c["url"] for c in message["citations"]] == [stored_url]


async def test_delete_removes_content_from_every_read_path(instance: Instance) -> None:
    alice, bob, cid = await _pair(instance)
    root = (await _post(alice, cid, content="root")).json()
    secret = (await _post(alice, cid, content="secret", in_reply_to=root["id"])).json()
    await alice.request(
        "PATCH",
        f"/v1/conversations/{cid}/messages/{secret['id']}",
        json={"version": 1, "content": "secret2"},
    )
    epoch = (await instance.state.hub.head(bob.profile["id"])).epoch
    path = f"/v1/conversations/{cid}/messages/{secret['id']}"
    async with bob.websocket() as ws:
        assert (await alice.request("DELETE", path)).status_code == 204
        tomb = await next_event(ws, "message.deleted")
        assert tomb["data"]["id"] == secret["id"] and "content" not in tomb["data"]
    assert (await bob.request("GET", path)).status_code == 404
    history = (await bob.request("GET", f"/v1/conversations/{cid}/messages")).json()
    assert [m["id"] for m in history["items"]] == [root["id"]]
    thread = (
        await bob.request("GET", f"/v1/conversations/{cid}/messages/{root['id']}/thread")
    ).json()
    assert [m["id"] for m in thread["items"]] == [root["id"]]
    # Editing after the delete never revives it; deleting twice is a 404.
    revived = await alice.request("PATCH", path, json={"version": 2, "content": "back"})
    assert revived.status_code == 404
    assert (await alice.request("DELETE", path)).status_code == 404
    # A replay from the start shows no trace of the content.
    import websockets

    async with websockets.connect(
        f"{instance.ws_url}?epoch={epoch}&offset=0",
        subprotocols=["confer.v1", f"bearer.{bob.token}"],
    ) as ws:
        frames = []
        async with asyncio.timeout(5):
            while len(frames) < 4:
                frame = json.loads(await ws.recv())
                if "offset" in frame:
                    frames.append(frame)
    assert "secret" not in json.dumps(frames)
    async with instance.state.pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT content, deleted_at FROM messages WHERE id = $1", secret["id"]
        )
        assert row["content"] is None and row["deleted_at"] is not None
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM message_versions WHERE message_id = $1", secret["id"]
            )
            == 0
        )


async def test_edit_racing_delete_never_revives(instance: Instance) -> None:
    alice, _, cid = await _pair(instance)
    for i in range(5):
        sent = (await _post(alice, cid, content=f"m{i}")).json()
        path = f"/v1/conversations/{cid}/messages/{sent['id']}"
        edit, delete = await asyncio.gather(
            alice.request("PATCH", path, json={"version": 1, "content": "edited"}),
            alice.request("DELETE", path),
        )
        assert delete.status_code == 204 and edit.status_code in (200, 404)
        async with instance.state.pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT content, deleted_at FROM messages WHERE id = $1", sent["id"]
            )
        assert row["content"] is None and row["deleted_at"] is not None


async def test_idempotency_key(instance: Instance) -> None:
    alice, _, cid = await _pair(instance)
    key = {"Idempotency-Key": "send-1"}
    results = await asyncio.gather(*(_post(alice, cid, key, content="once") for _ in range(5)))
    assert {r.status_code for r in results} == {201}
    assert len({r.json()["id"] for r in results}) == 1
    other = await _post(alice, cid, key, content="different")
    assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
    async with instance.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM messages") == 1


async def test_read_receipts_and_exact_unread_counts(instance: Instance) -> None:
    alice, bob, cid = await _pair(instance)
    sent = await asyncio.gather(*(_post(alice, cid, content=f"m{i}") for i in range(20)))
    ids = sorted(r.json()["id"] for r in sent)
    view = (await bob.request("GET", f"/v1/conversations/{cid}")).json()
    assert view["membership"]["unread"] == 20
    assert (await alice.request("GET", f"/v1/conversations/{cid}")).json()["membership"][
        "unread"
    ] == 0
    async with alice.websocket() as ws:
        # Concurrent reads in any order: the position ends at the newest, never moves back.
        order = [ids[4], ids[11], ids[2], ids[9], ids[7]]
        results = await asyncio.gather(
            *(
                bob.request("POST", f"/v1/conversations/{cid}/read", json={"message_id": m})
                for m in order
            )
        )
        assert all(r.status_code == 200 and r.json()["unread"] >= 0 for r in results)
        receipt = await next_event(ws, "receipt")
        assert receipt["data"]["user_id"] == bob.profile["id"]
    final = (await bob.request("GET", f"/v1/conversations/{cid}")).json()["membership"]
    assert final["unread"] == 20 - 12 and final["last_read_at"] is not None
    back = await bob.request("POST", f"/v1/conversations/{cid}/read", json={"message_id": ids[0]})
    assert back.json()["unread"] == 8
    detail = (await alice.request("GET", f"/v1/conversations/{cid}/messages/{ids[11]}")).json()
    assert [r["user_id"] for r in detail["read_by"]] == [bob.profile["id"]]
    await alice.request("DELETE", f"/v1/conversations/{cid}/messages/{ids[19]}")
    assert (await bob.request("GET", f"/v1/conversations/{cid}")).json()["membership"][
        "unread"
    ] == 7


def _shifted(message_id: str, seconds: float) -> str:
    """A new id whose time is ``seconds`` from ``message_id``'s: another process's clock."""
    from ulid import ULID

    return str(ULID.from_timestamp(ULID.from_str(message_id).timestamp + seconds))


async def _write_elsewhere(user: User, cid: str, candidate: str, content: str) -> Message:
    """``user``'s message stored under the candidate id ``candidate``, as another process
    writes one (:func:`gateway.store.messages.insert_message`)."""
    async with user.instance.state.pool.acquire() as conn, conn.transaction():
        return await messages_store.insert_message(
            conn,
            id=candidate,
            conversation_id=cid,
            sender_type="user",
            sender_id=user.profile["id"],
            sender_did=user.did,
            content=content,
        )


async def test_server_order_survives_a_clock_step_back(instance: Instance) -> None:
    alice, _, cid = await _pair(instance)
    first = (await _post(alice, cid, content="first")).json()
    # Another process whose clock is an hour behind writes next: its candidate id is older.
    late = await _write_elsewhere(alice, cid, _shifted(first["id"], -3600), "second")
    assert late.id > first["id"]
    third = (await _post(alice, cid, content="third")).json()
    assert third["id"] > late.id
    seen: list[str] = []
    before = None
    while True:
        params: dict[str, Any] = {"limit": 1}
        if before:
            params["before"] = before
        page = (
            await alice.request("GET", f"/v1/conversations/{cid}/messages", params=params)
        ).json()
        seen += [m["content"] for m in page["items"]]
        before = page["next_before"]
        if before is None:
            break
    assert seen == ["third", "second", "first"]


async def test_a_post_behind_a_newer_head_takes_the_id_right_after_it(
    instance: Instance,
) -> None:
    """A post whose candidate id is not above the conversation's head (a message written by a
    process whose clock runs ahead) gets the id right after the head's."""
    alice, _, cid = await _pair(instance)
    first = (await _post(alice, cid, content="first")).json()
    late = await _write_elsewhere(alice, cid, _shifted(first["id"], 3600), "from a clock ahead")
    response = await _post(alice, cid, content="now")
    assert response.status_code == 201, response.text
    assert response.json()["id"] == next_after(late.id)


async def test_a_post_reaches_a_participant_added_while_it_waited_for_the_lock(
    instance: Instance,
) -> None:
    """Who receives a post is read once the post holds the conversation's lock: a member that
    a membership change added while the post waited for that lock gets the message too."""
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    carol = await instance.register("carol")
    group = {"type": "group", "name": "g", "participant_dids": [bob.did]}
    response = await alice.request("POST", "/v1/conversations", json=group)
    assert response.status_code == 201, response.text
    cid = response.json()["id"]
    async with carol.websocket() as carol_ws, instance.state.pool.acquire() as conn:
        change = conn.transaction()
        await change.start()
        try:  # a membership change, as gateway.services.participants makes one
            await conv_store.lock_conversation(conn, conversation_id=cid)
            await conv_store.insert_participant(
                conn, conversation_id=cid, who=("user", carol.profile["id"])
            )
            post = asyncio.create_task(_post(alice, cid, content="for everyone"))
            await _waiting_for_a_lock(conn, holder=conn.get_server_pid())
        finally:
            await change.commit()
        response = await post
        assert response.status_code == 201, response.text
        event = await next_event(carol_ws, "message.created")
    assert event["data"]["id"] == response.json()["id"]


async def _waiting_for_a_lock(conn: Any, *, holder: int) -> None:
    """Return once another backend waits for a lock that backend ``holder`` holds."""
    async with asyncio.timeout(30):
        while not await conn.fetchval(  # noqa: ASYNC110 (polls the database)
            # pg_locks, unlike pg_stat_activity, is not read once per transaction
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE $1 = ANY (pg_blocking_pids(pid)))",
            holder,
        ):
            await asyncio.sleep(0.01)


async def test_delivered_at_is_set_when_a_recipient_device_received_it(instance: Instance) -> None:
    alice, bob, cid = await _pair(instance)
    async with alice.websocket() as alice_ws:  # the sender's own device does not count
        offline = (await _post(alice, cid, content="nobody home")).json()
        await next_event(alice_ws, "message.created")
        await asyncio.sleep(0.3)
    path = f"/v1/conversations/{cid}/messages/"
    assert (await alice.request("GET", path + offline["id"])).json()["delivered_at"] is None
    async with bob.websocket() as ws:
        online = (await _post(alice, cid, content="hello")).json()
        await next_event(ws, "message.created")
        for _ in range(100):
            detail = (await alice.request("GET", path + online["id"])).json()
            if detail["delivered_at"] is not None:
                break
            await asyncio.sleep(0.05)
        assert detail["delivered_at"] is not None


async def test_event_timestamps_are_utc_with_z_and_post_returns_the_version(
    instance: Instance,
) -> None:
    alice, bob, cid = await _pair(instance)
    sent = (await _post(alice, cid, content="draft")).json()
    assert sent["version"] == 1 and sent["created_at"].endswith("Z")
    path = f"/v1/conversations/{cid}/messages/{sent['id']}"
    edited = await alice.request(
        "PATCH", path, json={"version": sent["version"], "content": "final"}
    )
    assert (edited.status_code, edited.json()["version"]) == (200, 2)
    async with alice.websocket() as ws:
        read = {"message_id": sent["id"]}
        assert (await bob.request("POST", f"/v1/conversations/{cid}/read", json=read)).is_success
        receipt = await next_event(ws, "receipt")
        assert receipt["data"]["last_read_at"].endswith("Z")
        assert (await alice.request("DELETE", path)).status_code == 204
        tomb = await next_event(ws, "message.deleted")
        assert tomb["data"]["deleted_at"].endswith("Z"), tomb
