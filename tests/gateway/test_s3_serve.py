"""``confer serve`` with its attachments in an S3-compatible bucket (moto's server on
loopback): a file large enough for a multipart upload goes up, comes down byte-identical with
its SHA-256 to a participant only, and leaves the bucket when its message is deleted."""

from __future__ import annotations

import asyncio
import hashlib
import os

import httpx

from tests.gateway.harness import free_port
from tests.gateway.s3server import S3Server
from tests.gateway.serving import confer_serve, serve_env

DATA = os.urandom(10 * 1024 * 1024 + 5)  # over one 8 MiB part: a multipart upload


async def _register(client: httpx.AsyncClient, username: str) -> tuple[dict[str, str], str]:
    response = await client.post(
        "/v1/auth/register", json={"username": username, "password": "correct horse battery"}
    )
    assert response.status_code == 201, response.text
    body = response.json()
    return {"Authorization": f"Bearer {body['access_token']}"}, body["user"]["did"]


async def test_serve_keeps_attachments_in_s3(
    database_url: str, s3_server: S3Server, s3_bucket: str
) -> None:
    port = free_port()
    env = serve_env(port, database_url, **s3_server.env(s3_bucket))
    async with (
        confer_serve(env) as served,
        httpx.AsyncClient(base_url=served.base_url, timeout=60) as client,
    ):
        assert "attachments s3" in await served.wait_for_output("Confer is up")
        alice, _ = await _register(client, "alice")
        bob, bob_did = await _register(client, "bob")
        eve, _ = await _register(client, "eve")
        made = await client.post(
            "/v1/conversations", json={"participant_did": bob_did}, headers=alice
        )
        cid = made.json()["id"]

        upload = await client.post(
            "/v1/attachments", files={"file": ("big.bin", DATA)}, headers=alice
        )
        assert upload.status_code == 201, upload.text
        meta = upload.json()
        assert meta["sha256"] == hashlib.sha256(DATA).hexdigest()
        assert await asyncio.to_thread(s3_server.keys, s3_bucket) == [meta["id"]]
        head = await asyncio.to_thread(
            s3_server.client().head_object, Bucket=s3_bucket, Key=meta["id"]
        )
        assert head["ETag"].strip('"').endswith("-2")  # sent as a two-part multipart upload

        body = {
            "content_type": "file",
            "content_json": {"attachment_id": meta["id"], "filename": "big.bin"},
        }
        sent = await client.post(f"/v1/conversations/{cid}/messages", json=body, headers=alice)
        assert sent.status_code == 201, sent.text
        path = f"/v1/attachments/{meta['id']}"
        got = await client.get(path, headers=bob)
        assert got.status_code == 200, got.text
        assert got.content == DATA
        assert hashlib.sha256(got.content).hexdigest() == got.headers["digest-sha256"]
        assert got.headers["digest-sha256"] == meta["sha256"]
        refused = await client.get(path, headers=eve)
        assert refused.status_code == 404 and refused.json()["code"] == "attachment_not_found"

        deleted = await client.delete(
            f"/v1/conversations/{cid}/messages/{sent.json()['id']}", headers=alice
        )
        assert deleted.status_code == 204, deleted.text
        for _ in range(100):  # the object goes once the delete has committed
            if not await asyncio.to_thread(s3_server.keys, s3_bucket):
                break
            await asyncio.sleep(0.1)
        assert await asyncio.to_thread(s3_server.keys, s3_bucket) == []
        assert (await client.get(path, headers=bob)).status_code == 404
