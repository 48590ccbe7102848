"""A file crosses instances: B fetches it from A with a signed GET, checks its SHA-256, stores it
and serves it to its own participants; nobody else may fetch it from A, and a delete on A
removes it on B. Two Confer instances on loopback, and a fake third peer."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from a2a.confer import file_part
from a2a.signatures import FETCH_COMPONENTS, sign_request
from gateway.ids import new_id
from gateway.storage import storage_key
from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import Instance, User, next_event, run_instance
from tests.gateway.s3server import STORAGES, storage_settings, stored_blobs

PAYLOAD = bytes(range(256)) * 300  # 76,800 bytes, every byte value


@pytest.fixture(params=STORAGES)
async def pair(request, make_database, tmp_path) -> AsyncIterator[tuple[Instance, Instance]]:
    """A, and B whose storage (where fetched files land) is a folder or an S3 bucket."""
    storage = await storage_settings(request, tmp_path / "b-files")
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database(), **storage) as b,
    ):
        yield a, b


async def _upload(user: User, data: bytes = PAYLOAD) -> dict[str, Any]:
    response = await user.request(
        "POST", "/v1/attachments", files={"file": ("scan.bin", data, "application/x-scan")}
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


async def _send_file(user: User, cid: str, upload: dict[str, Any]) -> dict[str, Any]:
    body = {
        "content_type": "file",
        "content_json": {
            "attachment_id": upload["id"],
            "filename": "scan.bin",
            "mime_type": "application/x-scan",
            "size_bytes": upload["size_bytes"],
        },
    }
    response = await user.request("POST", f"/v1/conversations/{cid}/messages", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def _download_when_settled(user: User, attachment_id: str) -> httpx.Response:
    """The download once the file is no longer pending (generous deadline: a loaded machine)."""
    deadline = time.monotonic() + 60
    while True:
        response = await user.request("GET", f"/v1/attachments/{attachment_id}")
        pending = response.status_code == 409 and response.json()["code"] == "attachment_pending"
        if not pending or time.monotonic() > deadline:
            return response
        await asyncio.sleep(0.2)


async def test_a_file_arrives_intact_only_for_the_receiving_instance(pair) -> None:
    a, b = pair
    alice = await a.register("alice")
    bob = await b.register("bob")
    carol = await b.register("carol")
    cid = (await alice.direct_with(bob.did))["id"]
    upload = await _upload(alice)
    async with bob.websocket() as ws:
        await _send_file(alice, cid, upload)
        received = (await next_event(ws, "message.created", 30))["data"]

    assert received["content_type"] == "file" and received["content"] is None
    copy_id = received["content_json"]["attachment_id"]
    assert copy_id != upload["id"]  # B's own attachment, not a pointer to A's
    response = await _download_when_settled(bob, copy_id)
    assert response.status_code == 200, response.text
    assert response.content == PAYLOAD
    assert response.headers["digest-sha256"] == upload["sha256"]
    # served to B's participants only
    assert (await carol.request("GET", f"/v1/attachments/{copy_id}")).status_code == 404

    url = f"{a.base_url}/federation/attachments/{upload['id']}"
    async with httpx.AsyncClient() as client:
        unsigned = await client.get(url)
        assert unsigned.status_code == 401, unsigned.text
        async with run_fake_peer() as mallory:  # a third instance, correctly signed
            created = int(time.time())
            headers = sign_request(
                method="GET",
                url=url,
                headers={},
                body=b"",
                private_key=mallory.key,
                keyid=mallory.keyid,
                created=created,
                expires=created + 60,
                nonce=uuid.uuid4().hex,
                components=FETCH_COMPONENTS,
            )
            stranger = await client.get(url, headers=headers)
        assert stranger.status_code == 403, stranger.text
        assert stranger.json()["code"] == "attachment_forbidden"

    async with b.state.pool.acquire() as conn:
        stored = await conn.fetchval("SELECT storage_url FROM attachments WHERE id = $1", copy_id)
    assert await stored_blobs(b.settings) == [storage_key(stored)]

    sent = await alice.request("GET", f"/v1/conversations/{cid}/messages")
    message_id = next(m["id"] for m in sent.json()["items"] if m["content_type"] == "file")
    async with bob.websocket() as ws:
        deleted = await alice.request("DELETE", f"/v1/conversations/{cid}/messages/{message_id}")
        assert deleted.status_code == 204, deleted.text
        await next_event(ws, "message.deleted", 30)
    assert (await bob.request("GET", f"/v1/attachments/{copy_id}")).status_code == 404
    for _ in range(50):  # the bytes go once the delete has committed
        if not await stored_blobs(b.settings):
            break
        await asyncio.sleep(0.1)
    assert await stored_blobs(b.settings) == []
    assert (await alice.request("GET", f"/v1/attachments/{upload['id']}")).status_code == 404


async def test_a_file_whose_hash_does_not_match_is_refused(pair) -> None:
    a, b = pair
    alice = await a.register("alice")
    bob = await b.register("bob")
    cid = (await alice.direct_with(bob.did))["id"]
    upload = await _upload(alice)
    async with a.state.pool.acquire() as conn:  # A declares a hash the bytes do not have
        await conn.execute(
            "UPDATE attachments SET sha256 = $2 WHERE id = $1", upload["id"], "0" * 64
        )
    async with bob.websocket() as ws:
        await _send_file(alice, cid, upload)
        received = (await next_event(ws, "message.created", 30))["data"]

    copy_id = received["content_json"]["attachment_id"]
    response = await _download_when_settled(bob, copy_id)
    assert response.status_code == 409, response.text
    assert response.json()["code"] == "attachment_unavailable"
    assert "SHA-256" in response.json()["detail"]
    async with b.state.pool.acquire() as conn:
        row = await conn.fetchrow(
            """SELECT a.storage_url, f.state FROM attachments a
               JOIN attachment_fetches f ON f.attachment_id = a.id WHERE a.id = $1""",
            copy_id,
        )
    assert row["state"] == "failed" and row["storage_url"] == ""  # no bytes kept
    assert await stored_blobs(b.settings) == []
    # the message itself is kept
    page = await bob.request("GET", f"/v1/conversations/{received['conversation_id']}/messages")
    assert any(m["id"] == received["id"] for m in page.json()["items"])


async def test_a_file_held_for_consent_is_fetched_once_approved(pair) -> None:
    a, b = pair
    alice, bob = await a.register("alice"), await b.register("bob")
    cid = (await alice.direct_with(bob.profile["agent_did"]))["id"]  # bob's agent: ask
    upload = await _upload(alice)
    async with bob.websocket() as ws:
        await _send_file(alice, cid, upload)
        requested = (await next_event(ws, "permission.requested", 30))["data"]
        async with b.state.pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM attachment_fetches") == 0
        decided = await bob.request(
            "POST", f"/v1/permissions/{requested['id']}/decision", json={"decision": "allow_once"}
        )
        assert decided.status_code == 200, decided.text
        for _ in range(600):
            event = await next_event(ws, "message.created", 30)
            if event["data"]["content_type"] == "file":
                break
    copy_id = event["data"]["content_json"]["attachment_id"]
    assert copy_id != upload["id"]
    response = await _download_when_settled(bob, copy_id)
    assert response.status_code == 200, response.text
    assert response.content == PAYLOAD


def _file_rpc(peer: Any, size: int) -> bytes:
    """A peer's ``file`` message whose file part declares ``size`` bytes."""
    content_json = {"attachment_id": new_id(), "filename": "big.bin", "size_bytes": size}
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [
            {"data": content_json, "mediaType": "application/json"},
            file_part(f"{peer.base_url}/files/big.bin", "application/octet-stream", "big.bin"),
        ],
        "metadata": {
            "confer": {
                "sender": peer.did,
                "contentType": "file",
                "file": {"sizeBytes": size, "sha256": "0" * 64},
            }
        },
    }
    call = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return json.dumps(call).encode()


async def test_a_peer_file_over_the_size_cap_is_refused_on_arrival(make_database) -> None:
    """A file part declaring more than CONFER_ATTACHMENT_MAX_BYTES is refused when the message
    arrives, with the problem a local upload over the cap gets (413 ``payload_too_large``),
    and nothing is stored; one at the cap is taken (and fetched later)."""
    cap = 1000
    async with (
        run_instance(await make_database(), attachment_max_bytes=cap) as b,
        run_fake_peer() as peer,
    ):
        bob = await b.register("bob")
        upload = await bob.request(
            "POST", "/v1/attachments", files={"file": ("big.bin", b"x" * (cap + 1))}
        )
        assert upload.status_code == 413 and upload.json()["code"] == "payload_too_large"

        url = f"{b.base_url}/users/bob/a2a"
        body = _file_rpc(peer, cap + 1)
        refused = await b.client.post(url, content=body, headers=peer.signed_headers(url, body))
        assert refused.status_code == 413, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert refused.json()["code"] == "payload_too_large"
        assert f"at most {cap} bytes" in refused.json()["detail"]
        async with b.state.pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM messages") == 0
            assert await conn.fetchval("SELECT count(*) FROM attachments") == 0
            audit = await conn.fetchval(
                "SELECT details_json FROM audit_log WHERE action = 'federation.inbound.rejected'"
            )
        assert audit["code"] == "payload_too_large" and audit["caller"] == f"peer:{peer.did}"

        body = _file_rpc(peer, cap)
        taken = await b.client.post(url, content=body, headers=peer.signed_headers(url, body))
        assert taken.status_code == 200 and "result" in taken.json(), taken.text
        async with b.state.pool.acquire() as conn:
            sizes = await conn.fetch("SELECT size_bytes FROM attachments")
        assert [r["size_bytes"] for r in sizes] == [cap]
