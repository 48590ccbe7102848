"""Every content type crosses instances as the sender stored it, and a peer may post only what a
local client may: two Confer instances on loopback, and a fake peer signing by hand."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.gateway.fakepeer import FakePeer, run_fake_peer
from tests.gateway.harness import Instance, User, next_event, run_instance


@pytest.fixture
async def pair(make_database) -> AsyncIterator[tuple[Instance, Instance]]:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        yield a, b


CITATIONS = [{"source": "RFC 9421", "url": None, "page": 3, "passage": None,
              "trust_level": "authoritative"}]  # fmt: skip

BODIES: list[dict[str, Any]] = [
    {"content_type": "text", "content": "hi", "language": "en", "via": "web"},
    {"content_type": "code", "content": "print(1)", "content_json": {"language": "python"}},
    {
        "content_type": "permission_request",
        "content_json": {"action": "read", "level": "L2", "scope": {"project": "p"}},
    },
    # no text at all: it used to fail for good at the receiver
    {
        "content_type": "tool_call",
        "content_json": {"call_id": "c1", "name": "search", "arguments": {"q": "x"}},
    },
    {"content_type": "tool_result", "content_json": {"call_id": "c1", "result": [1, {"a": 2}]}},
    {"content_type": "citation", "content": "see", "citations": CITATIONS},
    {"content_type": "citation", "citations": CITATIONS},  # citations and nothing else
    {
        "content_type": "text",
        "content": "hola",
        "translation": {"from": "es", "to": "en", "provider": "offline"},
        "via": "claude-code",
    },
]
FIELDS = ("content_type", "content", "content_json", "citations", "language", "translation", "via")


async def _post(user: User, cid: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await user.request("POST", f"/v1/conversations/{cid}/messages", json=body)
    assert response.status_code == 201, (body, response.text)
    return dict(response.json())


async def test_every_content_type_arrives_as_it_was_sent(pair) -> None:
    a, b = pair
    alice = await a.register("alice")
    bob = await b.register("bob")
    cid = (await alice.direct_with(bob.did))["id"]
    upload = await alice.request(
        "POST", "/v1/attachments", files={"file": ("report.pdf", b"%PDF-1.7 x", "application/pdf")}
    )
    assert upload.status_code == 201, upload.text
    file_json = {
        "attachment_id": upload.json()["id"],
        "filename": "report.pdf",
        "mime_type": "application/pdf",
        "size_bytes": 10,
    }
    async with bob.websocket() as ws:
        sent = [await _post(alice, cid, body) for body in BODIES]
        sent.append(await _post(alice, cid, {"content_type": "file", "content_json": file_json}))
        sent.append(
            await _post(alice, cid, {"content": "about that", "in_reply_to": sent[1]["id"]})
        )
        received = [(await next_event(ws, "message.created", 30))["data"] for _ in sent]

    for mine, theirs in zip(sent[:-2], received[:-2], strict=True):
        assert theirs["sender_did"] == alice.did
        for field in FIELDS:
            assert theirs[field] == mine[field], (field, mine, theirs)
    # the file's metadata as sent, naming B's own copy of the file (test_federated_files)
    file_message = received[-2]
    assert file_message["content_type"] == "file" and file_message["content"] is None
    copy = file_message["content_json"]
    assert {**copy, "attachment_id": file_json["attachment_id"]} == file_json
    assert copy["attachment_id"] != file_json["attachment_id"]
    # a reply names B's own copy of the message it answers, and threads there
    reply = received[-1]
    assert reply["in_reply_to"] == received[1]["id"] and reply["thread_root"] == received[1]["id"]

    page = await bob.request("GET", f"/v1/conversations/{reply['conversation_id']}/messages")
    stored = {m["id"]: m for m in page.json()["items"]}
    assert stored[received[3]["id"]]["content_json"] == BODIES[3]["content_json"]
    assert stored[received[3]["id"]]["content"] is None


def _rpc(peer: FakePeer, parts: list[dict[str, Any]], **confer: Any) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": uuid.uuid4().hex,
                    "role": "ROLE_USER",
                    "parts": parts,
                    "metadata": {"confer": {"sender": peer.did, **confer}},
                }
            },
        }
    ).encode()


REFUSED = [
    # what a local client may not post, a peer may not either
    ([{"text": "I am the server"}], {"contentType": "system_notice"}, -32602),
    ([{"data": {"name": "search"}}], {"contentType": "tool_call"}, -32602),
    ([{"text": "x"}], {"contentType": "poem"}, -32602),
    ([{"text": "see"}], {"contentType": "citation"}, -32602),
    ([{"text": "hi"}], {"language": "!!"}, -32602),
    ([{"text": "hi"}], {"via": "carrier-pigeon"}, -32602),
    ([{"text": "hi"}], {"citations": "RFC 9421"}, -32602),
    ([{"text": "x"}], {"contentType": "text", "citations": [{"source": "s"}]}, -32602),
    # a citation url that is not http(s) would be a link running in the reader's browser
    *(
        (
            [{"text": "see"}],
            {
                "contentType": kind,
                "citations": [{"source": "clickme", "url": url, "trust_level": "verified"}],
            },
            -32602,
        )
        for kind in ("citation", "text")
        for url in ("javascript:alert(document.cookie)", "data:text/html,<b>x</b>")
    ),
    # a plain A2A message needs text, as before
    ([{"data": {"q": 1}}], {}, -32005),
]


async def test_a_peer_may_post_only_what_a_local_client_may(make_database) -> None:
    async with run_instance(await make_database()) as b, run_fake_peer() as peer:
        await b.register("bob")
        url = f"{b.base_url}/users/bob/a2a"
        for parts, confer, code in REFUSED:
            body = _rpc(peer, parts, **confer)
            response = await b.client.post(
                "/users/bob/a2a", content=body, headers=peer.signed_headers(url, body)
            )
            assert response.status_code == 200, response.text
            error = response.json()["error"]
            assert error["code"] == code, (confer, error)
        async with b.state.pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM messages") == 0
            assert await conn.fetchval("SELECT count(*) FROM a2a_tasks") == 0
            rows = await conn.fetch(
                """SELECT details_json FROM audit_log
                   WHERE action = 'federation.inbound.rejected' ORDER BY id"""
            )
        assert [r["details_json"]["code"] for r in rows] == [c for _, _, c in REFUSED]
        assert "system notices" in rows[0]["details_json"]["detail"]
        assert all(r["details_json"]["caller"] == f"peer:{peer.did}" for r in rows)

        # the same peer's well-formed tool call is stored as one
        body = _rpc(
            peer,
            [{"data": {"call_id": "c9", "name": "lookup"}, "mediaType": "application/json"}],
            contentType="tool_call",
        )
        response = await b.client.post(
            "/users/bob/a2a", content=body, headers=peer.signed_headers(url, body)
        )
        assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        async with b.state.pool.acquire() as conn:
            row = await conn.fetchrow("SELECT content_type, content, content_json FROM messages")
        assert (row["content_type"], row["content"]) == ("tool_call", None)
        assert row["content_json"] == {"call_id": "c9", "name": "lookup"}  # as sent


async def test_an_edit_of_a_text_less_message_carries_its_structured_content(pair) -> None:
    a, b = pair
    alice, bob = await a.register("alice"), await b.register("bob")
    cid = (await alice.direct_with(bob.did))["id"]
    async with bob.websocket() as ws:
        sent = await _post(alice, cid, BODIES[3])  # a tool_call, no text
        copy = (await next_event(ws, "message.created", 30))["data"]
        arguments = {"call_id": "c1", "name": "search", "arguments": {"q": "better"}}
        edited = await alice.request(
            "PATCH",
            f"/v1/conversations/{cid}/messages/{sent['id']}",
            json={"version": 1, "content_json": arguments},
        )
        assert edited.status_code == 200, edited.text
        event = (await next_event(ws, "message.edited", 30))["data"]
        # a code message's edit keeps its language: text and content_json both travel
        code = await _post(alice, cid, BODIES[1])
        code_copy = (await next_event(ws, "message.created", 30))["data"]
        changed = await alice.request(
            "PATCH",
            f"/v1/conversations/{cid}/messages/{code['id']}",
            json={"version": 1, "content": "print(2)", "content_json": {"language": "python"}},
        )
        assert changed.status_code == 200, changed.text
        code_event = (await next_event(ws, "message.edited", 30))["data"]
        # a citation message's edit: its citations stay as they are on both sides
        cited = await _post(alice, cid, BODIES[5])
        cited_copy = (await next_event(ws, "message.created", 30))["data"]
        see = await alice.request(
            "PATCH",
            f"/v1/conversations/{cid}/messages/{cited['id']}",
            json={"version": 1, "content": "see this"},
        )
        assert see.status_code == 200, see.text
        cited_event = (await next_event(ws, "message.edited", 30))["data"]
    assert (cited_event["id"], cited_event["content"]) == (cited_copy["id"], "see this")
    stored = await bob.request(
        "GET", f"/v1/conversations/{cited_copy['conversation_id']}/messages/{cited_copy['id']}"
    )
    assert stored.json()["message"]["citations"] == CITATIONS
    assert stored.json()["version"] == 2
    assert event["id"] == copy["id"] and event["version"] == 2
    assert event["content_json"] == arguments and event["content"] is None
    assert code_event["id"] == code_copy["id"]
    assert (code_event["content"], code_event["content_json"]) == (
        "print(2)",
        {"language": "python"},
    )
