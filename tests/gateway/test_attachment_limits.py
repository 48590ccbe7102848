"""What bounds uploads and keeps file messages honest, over real HTTP and PostgreSQL (both
storages where bytes are involved: a local folder and an S3-compatible bucket on moto):

- a per-user quota (413 ``attachment_quota_exceeded``) and a rate limit (429) on uploads;
- the reaper of uploads never sent, which must not take one a post is attaching;
- account deletion taking the user's unsent uploads with it;
- a ``file`` message describes the stored upload (name, type, size), locally and to peers;
- downloads are ``Cache-Control: no-store``;
- an attachments folder that cannot be written: refused at start-up, 503 at request time.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import create_app
from gateway.errors import StorageUnavailableError
from gateway.services import attachments as attachments_service
from tests.gateway.harness import (
    Instance,
    User,
    free_port,
    loopback_settings,
    next_event,
    run_instance,
)
from tests.gateway.s3server import STORAGES, storage_settings, stored_blobs
from tests.gateway.serving import ROOT, serve_env

KIB = 1024
PASSWORD = "correct horse battery"


@pytest.fixture(params=STORAGES)
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    return await storage_settings(request, tmp_path / "files")


async def _upload(
    user: User, name: str, data: bytes, media: str = "application/octet-stream"
) -> httpx.Response:
    return await user.request("POST", "/v1/attachments", files={"file": (name, data, media)})


async def _send_file(user: User, cid: str, content_json: dict[str, Any]) -> httpx.Response:
    return await user.request(
        "POST",
        f"/v1/conversations/{cid}/messages",
        json={"content_type": "file", "content_json": content_json},
    )


async def _rows(instance: Instance) -> set[str]:
    async with instance.state.pool.acquire() as conn:
        return {r["id"] for r in await conn.fetch("SELECT id FROM attachments")}


async def _backdate(instance: Instance, *ids: str) -> None:
    """Make uploads two days old (older than the default 24 h an unsent one is kept)."""
    async with instance.state.pool.acquire() as conn:
        await conn.execute(
            "UPDATE attachments SET created_at = created_at - interval '2 days'"
            " WHERE id = ANY($1::text[])",
            list(ids),
        )


async def _until(check: Any, within: float = 60.0) -> None:
    """Poll ``check()`` (async, truthy when done) with a generous deadline."""
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, "not reached in time"
        await asyncio.sleep(0.1)


async def test_the_quota_counts_a_users_stored_uploads(
    database_url: str, storage: dict[str, Any]
) -> None:
    async with run_instance(database_url, attachment_quota_bytes=100 * KIB, **storage) as inst:
        alice = await inst.register("alice")
        bob = await inst.register("bob")
        first = await _upload(alice, "a.bin", b"a" * 60 * KIB)
        assert first.status_code == 201, first.text
        over = await _upload(alice, "b.bin", b"b" * 60 * KIB)
        assert over.status_code == 413, over.text
        problem = over.json()
        assert problem["code"] == "attachment_quota_exceeded"
        assert problem["quota_bytes"] == 100 * KIB and problem["used_bytes"] == 60 * KIB
        assert over.headers["content-type"] == "application/problem+json"
        assert await stored_blobs(inst.settings) == [first.json()["id"]]  # nothing kept
        assert await _rows(inst) == {first.json()["id"]}
        fits = await _upload(alice, "c.bin", b"c" * 40 * KIB)
        assert fits.status_code == 201, fits.text
        full = await _upload(alice, "d.bin", b"d")
        assert full.status_code == 413 and full.json()["code"] == "attachment_quota_exceeded"
        # another user's quota is their own
        assert (await _upload(bob, "e.bin", b"e" * 60 * KIB)).status_code == 201


async def test_concurrent_uploads_cannot_overshoot_the_quota(
    database_url: str, tmp_path: Path
) -> None:
    async with run_instance(
        database_url, attachment_quota_bytes=100 * KIB, attachments_dir=tmp_path
    ) as instance:
        alice = await instance.register("alice")
        answers = await asyncio.gather(
            *(_upload(alice, f"{n}.bin", bytes([n]) * 60 * KIB) for n in range(3))
        )
        assert sorted(a.status_code for a in answers) == [201, 413, 413]
        [kept] = [a.json()["id"] for a in answers if a.status_code == 201]
        assert await _rows(instance) == {kept}
        assert await stored_blobs(instance.settings) == [kept]


async def test_sending_and_deleting_a_file_frees_its_quota(database_url: str) -> None:
    async with run_instance(database_url, attachment_quota_bytes=100 * KIB) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        cid = (await alice.direct_with(bob.did))["id"]
        upload = (await _upload(alice, "a.bin", b"a" * 60 * KIB)).json()
        sent = await _send_file(alice, cid, {"attachment_id": upload["id"], "filename": "a.bin"})
        assert sent.status_code == 201, sent.text
        # sent files still count: they are still stored
        assert (await _upload(alice, "b.bin", b"b" * 60 * KIB)).status_code == 413
        path = f"/v1/conversations/{cid}/messages/{sent.json()['id']}"
        assert (await alice.request("DELETE", path)).status_code in (200, 204)
        assert (await _upload(alice, "b.bin", b"b" * 60 * KIB)).status_code == 201


async def test_upload_bursts_are_rate_limited(database_url: str) -> None:
    async with run_instance(database_url, rate_limit_uploads="3/minute") as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        for n in range(3):
            assert (await _upload(alice, f"{n}.txt", b"x")).status_code == 201
        limited = await _upload(alice, "3.txt", b"x")
        assert limited.status_code == 429, limited.text
        assert limited.json()["code"] == "rate_limited"
        assert int(limited.headers["retry-after"]) >= 1
        assert len(await _rows(instance)) == 3
        assert (await _upload(bob, "b.txt", b"x")).status_code == 201  # per user


async def test_the_reaper_deletes_old_unsent_uploads_only(
    database_url: str, storage: dict[str, Any]
) -> None:
    async with run_instance(
        database_url, attachment_reap_interval_seconds=0.2, **storage
    ) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        cid = (await alice.direct_with(bob.did))["id"]
        old = (await _upload(alice, "old.txt", b"old")).json()["id"]
        fresh = (await _upload(alice, "fresh.txt", b"fresh")).json()["id"]
        sent = (await _upload(alice, "sent.txt", b"sent")).json()["id"]
        posted = await _send_file(alice, cid, {"attachment_id": sent, "filename": "sent.txt"})
        assert posted.status_code == 201, posted.text
        await _backdate(instance, old, sent)

        async def old_gone() -> bool:
            return old not in await _rows(instance)

        await _until(old_gone)
        assert await _rows(instance) == {fresh, sent}
        await _until(lambda: _blobs_are(instance, {fresh, sent}))
        got = await bob.request("GET", f"/v1/attachments/{sent}")
        assert got.status_code == 200 and got.content == b"sent"
        assert (await alice.request("GET", f"/v1/attachments/{fresh}")).content == b"fresh"


async def _blobs_are(instance: Instance, keys: set[str]) -> bool:
    return set(await stored_blobs(instance.settings)) == keys


async def test_the_reaper_skips_an_upload_a_post_is_attaching(
    database_url: str, tmp_path: Path
) -> None:
    # the instance's own reaper keeps away (30 days); this test reaps by hand, at any age
    async with run_instance(
        database_url, attachment_orphan_seconds=30 * 86400.0, attachments_dir=tmp_path
    ) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        cid = (await alice.direct_with(bob.did))["id"]
        upload = (await _upload(alice, "race.txt", b"race")).json()["id"]
        text = await alice.send(cid, "here it comes")
        pool, storage = instance.state.pool, instance.state.storage
        async with pool.acquire() as conn:
            posting = conn.transaction()
            await posting.start()
            # what a post does: lock the upload, then attach it to its message
            locked = await conn.fetchval(
                "SELECT id FROM attachments WHERE id = $1 AND message_id IS NULL FOR UPDATE",
                upload,
            )
            assert locked == upload
            reaped = await attachments_service.delete_unsent(pool, storage, before=None)
            assert reaped == 0  # the row a post holds is skipped, not waited for or taken
            await conn.execute(
                "UPDATE attachments SET message_id = $2 WHERE id = $1", upload, text["id"]
            )
            await posting.commit()
        assert await attachments_service.delete_unsent(pool, storage, before=None) == 0
        assert await _rows(instance) == {upload}
        assert await stored_blobs(instance.settings) == [upload]


async def test_deleting_an_account_deletes_its_unsent_uploads(
    database_url: str, storage: dict[str, Any]
) -> None:
    async with run_instance(database_url, **storage) as instance:
        alice = await instance.register("alice", PASSWORD)
        bob = await instance.register("bob")
        cid = (await alice.direct_with(bob.did))["id"]
        unsent = (await _upload(alice, "draft.txt", b"draft")).json()["id"]
        sent = (await _upload(alice, "sent.txt", b"sent")).json()["id"]
        kept = (await _upload(bob, "bobs.txt", b"bob")).json()["id"]
        posted = await _send_file(alice, cid, {"attachment_id": sent, "filename": "sent.txt"})
        assert posted.status_code == 201, posted.text
        deleted = await alice.request("DELETE", "/v1/me", json={"password": PASSWORD})
        assert deleted.status_code == 204, deleted.text
        assert unsent not in await _rows(instance)
        assert await _rows(instance) == {sent, kept}
        assert sorted(await stored_blobs(instance.settings)) == sorted([sent, kept])
        got = await bob.request("GET", f"/v1/attachments/{sent}")  # messages remain
        assert got.status_code == 200 and got.content == b"sent"


LIES = {"filename": "evil.exe", "mime_type": "application/x-msdownload", "size_bytes": 999999999999}
TRUTH = {"filename": "t.txt", "mime_type": "text/plain", "size_bytes": 6}


async def _send_lies(
    alice: User, bob: User
) -> tuple[str, dict[str, Any], httpx.Response, dict[str, Any]]:
    """Alice uploads a 6-byte t.txt and sends it to Bob as a file message whose description
    lies; returns the conversation id, the upload, the post's response and the message as
    Bob's socket got it."""
    cid = (await alice.direct_with(bob.did))["id"]
    upload = (await _upload(alice, "t.txt", b"hello\n", "text/plain")).json()
    async with bob.websocket() as ws:
        sent = await _send_file(alice, cid, {"attachment_id": upload["id"], **LIES})
        assert sent.status_code == 201, sent.text
        pushed = (await next_event(ws, "message.created", 60))["data"]
    return cid, upload, sent, pushed


async def test_a_file_message_describes_the_stored_upload(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        cid, upload, sent, pushed = await _send_lies(alice, bob)
        expected = {"attachment_id": upload["id"], **TRUTH}
        assert sent.json()["content_json"] == expected
        assert pushed["content_json"] == expected
        listed = (await bob.request("GET", f"/v1/conversations/{cid}/messages")).json()
        messages = listed["items"] if isinstance(listed, dict) else listed
        assert [m["content_json"] for m in messages if m["id"] == sent.json()["id"]] == [expected]
        # an edit cannot rename it either, nor swap in another attachment
        path = f"/v1/conversations/{cid}/messages/{sent.json()['id']}"
        edited = await alice.request(
            "PATCH",
            path,
            json={"version": 1, "content_json": {"attachment_id": upload["id"], **LIES}},
        )
        assert edited.status_code == 200, edited.text
        assert edited.json()["message"]["content_json"] == expected
        other = (await _upload(alice, "x.txt", b"x")).json()["id"]
        swapped = await alice.request(
            "PATCH", path, json={"version": 2, "content_json": {"attachment_id": other, **TRUTH}}
        )
        assert swapped.status_code == 422, swapped.text


async def test_a_peer_receives_the_stored_description(make_database: Any) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        _, _, _, received = await _send_lies(await a.register("alice"), await b.register("bob"))
        copy = received["content_json"]
        assert {k: copy.get(k) for k in TRUTH} == TRUTH
        async with b.state.pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT filename, content_type, size_bytes FROM attachments WHERE id = $1",
                copy["attachment_id"],
            )
        assert dict(row) == {"filename": "t.txt", "content_type": "text/plain", "size_bytes": 6}


async def test_a_download_is_not_cached(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        upload = (await _upload(alice, "t.txt", b"hello\n", "text/plain")).json()
        got = await alice.request("GET", f"/v1/attachments/{upload['id']}")
        assert got.status_code == 200 and got.headers["cache-control"] == "no-store"


async def test_an_unwritable_folder_answers_503_not_500(database_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "files"
    async with run_instance(database_url, attachments_dir=folder) as instance:
        alice = await instance.register("alice")
        stored = (await _upload(alice, "t.txt", b"hello\n")).json()["id"]
        shutil.rmtree(folder)
        folder.write_text("a file where the folder was")
        upload = await _upload(alice, "u.txt", b"more")
        assert upload.status_code == 503, upload.text
        assert upload.json()["code"] == "storage_unavailable"
        assert await _rows(instance) == {stored}
        got = await alice.request("GET", f"/v1/attachments/{stored}")
        assert got.status_code == 503, got.text
        assert got.json()["code"] == "storage_unavailable"


async def test_start_up_refuses_a_folder_that_is_a_file(database_url: str, tmp_path: Path) -> None:
    not_a_folder = tmp_path / "attachments"
    not_a_folder.write_text("oops")
    settings = loopback_settings(database_url, free_port(), attachments_dir=not_a_folder)
    app = create_app(settings)
    with pytest.raises(StorageUnavailableError, match="CONFER_ATTACHMENTS_DIR"):
        async with app.router.lifespan_context(app):
            pass
    # and `confer serve` says so in one line, without a traceback
    env = serve_env(free_port(), database_url, CONFER_ATTACHMENTS_DIR=str(not_a_folder))
    done = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "serve",
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(done.communicate(), 120)
    text = output.decode()
    assert done.returncode != 0, text
    assert f"refusing to start: CONFER_ATTACHMENTS_DIR={not_a_folder}" in text
    assert "Traceback" not in text
