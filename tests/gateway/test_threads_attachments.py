"""The threads archive and attachments over real HTTP and PostgreSQL; the attachment tests run
over both storages, a local folder and an S3-compatible bucket (moto's server on loopback)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.gateway.harness import Instance, User, free_port, run_instance
from tests.gateway.s3server import STORAGES, S3Server, storage_settings, stored_blobs


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


@pytest.fixture(params=STORAGES)
async def files_instance(
    request: pytest.FixtureRequest, database_url: str, tmp_path: Path
) -> AsyncIterator[Instance]:
    storage = await storage_settings(request, tmp_path / "files")
    async with run_instance(
        database_url, attachment_max_bytes=3 * 1024 * 1024, **storage
    ) as running:
        yield running


async def _pair(instance: Instance) -> tuple[User, User, str]:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    return alice, bob, (await alice.direct_with(bob.did))["id"]


async def test_threads_archive(instance: Instance) -> None:
    alice, bob, cid = await _pair(instance)
    root = await alice.send(cid, "Should we use NATS?")
    reply = await bob.request(
        "POST",
        f"/v1/conversations/{cid}/messages",
        json={"content": "Yes", "in_reply_to": root["id"]},
    )
    base = f"/v1/conversations/{cid}/threads"
    made = await bob.request(
        "POST",
        base,
        json={
            "root_message_id": reply.json()["id"],
            "title": "Bus",
            "summary": "NATS",
            "tags": ["adr"],
        },
    )
    assert made.status_code == 201, made.text
    thread = made.json()
    assert thread["root_message_id"] == root["id"] and thread["tags"] == ["adr"]
    assert thread["participants_json"] == [alice.did, bob.did]
    again = await alice.request("POST", base, json={"root_message_id": root["id"]})
    assert again.status_code == 409 and again.json()["code"] == "thread_exists"
    closed = await alice.request(
        "PATCH", f"{base}/{thread['id']}", json={"closed": True, "title": "Bus (done)"}
    )
    assert closed.json()["closed_at"] is not None and closed.json()["title"] == "Bus (done)"
    assert [t["id"] for t in (await bob.request("GET", base)).json()] == [thread["id"]]
    assert (await bob.request("GET", base, params={"open_only": True})).json() == []
    bad = await alice.request("PATCH", f"{base}/{thread['id']}", json={"summary": "a\u0000b"})
    assert bad.status_code == 422
    eve = await instance.register("eve")
    assert (await eve.request("GET", base)).status_code == 404
    assert (
        await eve.request("POST", base, json={"root_message_id": root["id"]})
    ).status_code == 404


async def test_attachments_upload_send_download(files_instance: Instance) -> None:
    instance = files_instance
    alice, bob, cid = await _pair(instance)
    eve = await instance.register("eve")
    data = os.urandom(1_500_000)
    upload = await alice.request(
        "POST", "/v1/attachments", files={"file": ("../../etc/report.bin", data, "application/pdf")}
    )
    assert upload.status_code == 201, upload.text
    meta = upload.json()
    assert meta["sha256"] == hashlib.sha256(data).hexdigest()
    assert meta["size_bytes"] == len(data) and meta["filename"] == "report.bin"
    path = f"/v1/attachments/{meta['id']}"
    assert (await bob.request("GET", path)).status_code == 404  # not attached yet
    mine = await alice.request("GET", path)
    assert mine.status_code == 200 and mine.content == data

    body = {
        "content_type": "file",
        "content_json": {"attachment_id": meta["id"], "filename": "report.bin"},
    }
    sent = await alice.request("POST", f"/v1/conversations/{cid}/messages", json=body)
    assert sent.status_code == 201, sent.text
    got = await bob.request("GET", path)
    assert got.status_code == 200 and got.content == data
    assert got.headers["content-type"] == "application/pdf"
    assert (await eve.request("GET", path)).status_code == 404
    reuse = await alice.request("POST", f"/v1/conversations/{cid}/messages", json=body)
    assert reuse.status_code == 422
    stolen = await eve.request("POST", "/v1/conversations", json={"participant_did": alice.did})
    body_eve = {
        "content_type": "file",
        "content_json": {"attachment_id": meta["id"], "filename": "x"},
    }
    r = await eve.request(
        "POST", f"/v1/conversations/{stolen.json()['id']}/messages", json=body_eve
    )
    assert r.status_code == 422
    assert await stored_blobs(instance.settings) == [meta["id"]]
    # Deleting the message takes the file out of reach, and its bytes out of storage.
    await alice.request("DELETE", f"/v1/conversations/{cid}/messages/{sent.json()['id']}")
    assert (await bob.request("GET", path)).status_code == 404
    for _ in range(50):  # the bytes go once the delete has committed
        if not await stored_blobs(instance.settings):
            break
        await asyncio.sleep(0.1)
    assert await stored_blobs(instance.settings) == []


async def _declared_upload(instance: Instance, user: User, length: int) -> tuple[int, Any]:
    """An upload that declares ``length`` bytes and sends none, over a raw connection (the
    server answers from the header and closes; a client still sending would see a reset)."""
    url = urlsplit(instance.base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        writer.write(
            (
                f"POST /v1/attachments HTTP/1.1\r\nHost: {url.netloc}\r\n"
                f"Authorization: Bearer {user.token}\r\n"
                "Content-Type: multipart/form-data; boundary=b\r\n"
                f"Content-Length: {length}\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        response = await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


async def test_attachment_size_cap(files_instance: Instance) -> None:
    instance = files_instance
    alice, _, _ = await _pair(instance)
    # just over the file cap (refused while stored), and over the whole upload's cap (refused
    # by its Content-Length, below): both say the file limit, not the multipart envelope's
    big = await alice.request(
        "POST", "/v1/attachments", files={"file": ("big.bin", b"x" * (3 * 1024 * 1024 + 1))}
    )
    assert big.status_code == 413 and big.json()["code"] == "payload_too_large"
    assert big.json()["detail"] == "files are limited to 3 MiB"
    status, problem = await _declared_upload(instance, alice, 4 * 1024 * 1024)
    assert (status, problem["code"]) == (413, "payload_too_large")
    assert problem["detail"] == "files are limited to 3 MiB"
    assert await stored_blobs(instance.settings) == []
    async with instance.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM attachments") == 0
    empty_name = await alice.request("POST", "/v1/attachments", files={"file": ("", b"abc")})
    assert empty_name.status_code == 422


async def test_a_file_missing_from_storage_answers_409(files_instance: Instance) -> None:
    alice, _, _ = await _pair(files_instance)
    upload = await alice.request("POST", "/v1/attachments", files={"file": ("a.txt", b"abc")})
    assert upload.status_code == 201, upload.text
    settings = files_instance.state.settings
    await files_instance.state.storage.delete(
        f"{settings.attachment_storage}:{upload.json()['id']}"
    )
    got = await alice.request("GET", f"/v1/attachments/{upload.json()['id']}")
    assert got.status_code == 409, got.text
    assert got.json()["code"] == "attachment_unavailable"


async def test_an_unreachable_bucket_answers_503(database_url: str) -> None:
    nobody = S3Server(f"http://127.0.0.1:{free_port()}").settings("confer-nowhere")
    async with run_instance(database_url, **nobody) as instance:
        alice = await instance.register("alice")
        upload = await alice.request("POST", "/v1/attachments", files={"file": ("a.txt", b"abc")})
        assert upload.status_code == 503, upload.text
        assert upload.json()["code"] == "storage_unavailable"
        async with instance.state.pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM attachments") == 0
