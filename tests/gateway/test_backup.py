"""``confer backup`` and ``confer restore`` run for real: an instance with users, messages and
a file is backed up while it serves, restored into a fresh database and data folder (an
external PostgreSQL, then the embedded one), served again by ``confer serve`` and read over
HTTP; a restore refuses a database that is not empty and an archive that is damaged."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.gateway.harness import free_port, run_instance
from tests.gateway.s3server import S3Server
from tests.gateway.serving import confer_serve, serve_env

PASSWORD = "correct horse battery"
TEXTS = ["first", "second, with ünïcode", "third"]
FILE = os.urandom(700_000)


@dataclass
class Backup:
    """A backup taken of a running instance, and what it should bring back."""

    archive: Path
    port: int
    conversation_id: str
    attachment_id: str
    source: dict[str, str]
    """The environment of the backed-up instance's database and files."""


async def confer(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m gateway ARGS`` with only ``env`` (and PATH), as an operator runs it."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "gateway", *args],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
async def backup(database_url: str, tmp_path: Path) -> AsyncIterator[Backup]:
    """Users, messages and a file on an instance, backed up while it runs."""
    port, files = free_port(), tmp_path / "source-files"
    async with run_instance(database_url, port=port, attachments_dir=files) as instance:
        alice = await instance.register("alice", PASSWORD)
        bob = await instance.register("bob", PASSWORD)
        cid = (await alice.direct_with(bob.did))["id"]
        for text in TEXTS:
            await alice.send(cid, text)
        upload = await alice.request("POST", "/v1/attachments", files={"file": ("a.bin", FILE)})
        attachment_id = upload.json()["id"]
        body = {
            "content_type": "file",
            "content_json": {"attachment_id": attachment_id, "filename": "a.bin"},
        }
        sent = await alice.request("POST", f"/v1/conversations/{cid}/messages", json=body)
        assert sent.status_code == 201, sent.text
        archive = tmp_path / "confer.backup.tar"
        env = {"CONFER_DATABASE_URL": database_url, "CONFER_ATTACHMENTS_DIR": str(files)}
        made = await confer("backup", str(archive), env=env)
    assert made.returncode == 0, made.stderr
    assert "and 1 attachment(s), 700000 bytes" in made.stdout
    # it holds the instance's signing keys and password hashes: its owner's eyes only
    assert archive.stat().st_mode & 0o777 == 0o600
    yield Backup(archive, port, cid, attachment_id, env)


async def _check_served(env: dict[str, str], backup: Backup) -> None:
    """``confer serve`` on the restored data: the messages read back, the file downloads
    byte-identical, and a stranger still may not have it."""
    async with (
        confer_serve(env) as served,
        httpx.AsyncClient(base_url=served.base_url, timeout=30) as client,
    ):
        tokens = {}
        for name in ("alice", "bob"):
            login = await client.post(
                "/v1/auth/login", json={"username": name, "password": PASSWORD, "device_id": "r"}
            )
            assert login.status_code == 200, login.text
            tokens[name] = {"Authorization": f"Bearer {login.json()['access_token']}"}
        page = await client.get(
            f"/v1/conversations/{backup.conversation_id}/messages", headers=tokens["bob"]
        )
        assert page.status_code == 200, page.text
        texts = {m["content"] for m in page.json()["items"] if m["content_type"] == "text"}
        assert texts == set(TEXTS)
        got = await client.get(f"/v1/attachments/{backup.attachment_id}", headers=tokens["bob"])
        assert got.status_code == 200, got.text
        assert got.content == FILE
        assert got.headers["digest-sha256"] == hashlib.sha256(FILE).hexdigest()
        register = await client.post(
            "/v1/auth/register", json={"username": "eve", "password": PASSWORD}
        )
        eve = {"Authorization": f"Bearer {register.json()['access_token']}"}
        stranger = await client.get(f"/v1/attachments/{backup.attachment_id}", headers=eve)
        assert stranger.status_code == 404


async def _tables(database_url: str) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        return int(
            await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        )
    finally:
        await conn.close()


async def test_restore_into_a_fresh_external_database(
    backup: Backup, empty_database: str, tmp_path: Path
) -> None:
    files = tmp_path / "restored-files"
    env = {"CONFER_DATABASE_URL": empty_database, "CONFER_ATTACHMENTS_DIR": str(files)}
    restored = await confer("restore", str(backup.archive), env=env)
    assert restored.returncode == 0, restored.stderr
    assert "and 1 attachment(s)" in restored.stdout
    assert [p.name for p in files.iterdir()] == [backup.attachment_id]

    again = await confer("restore", str(backup.archive), env=env)
    assert again.returncode == 1
    assert "the database is not empty" in again.stderr and "--force" in again.stderr
    forced = await confer("restore", "--force", str(backup.archive), env=env)
    assert forced.returncode == 0, forced.stderr

    await _check_served(
        serve_env(backup.port, empty_database, CONFER_ATTACHMENTS_DIR=str(files)), backup
    )


async def test_a_damaged_archive_is_refused_and_nothing_is_written(
    backup: Backup, empty_database: str, tmp_path: Path
) -> None:
    data = backup.archive.read_bytes()
    with tarfile.open(backup.archive) as tar:
        dump_at = tar.getmember("database.pgdump").offset_data
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
    assert manifest["format"] == "confer-backup" and manifest["missing"] == []
    flipped = bytearray(data)
    flipped[dump_at + 200] ^= 0xFF
    newer = tmp_path / "newer.tar"
    with tarfile.open(backup.archive) as tar, tarfile.open(newer, "w") as out:
        for member in tar.getmembers():
            content = tar.extractfile(member).read()  # type: ignore[union-attr]
            if member.name == "manifest.json":
                content = json.dumps({**manifest, "alembic_revision": "9999"}).encode()
                member.size = len(content)
            out.addfile(member, io.BytesIO(content))
    cases = {
        "newer.tar": (newer.read_bytes(), "schema revision 9999, which this version"),
        "flipped.tar": (bytes(flipped), "database.pgdump does not match its checksum"),
        "truncated.tar": (data[: len(data) // 2], "damaged"),
        "garbage.tar": (b"not a backup at all" * 100, "is not a Confer backup archive"),
    }
    files = tmp_path / "never-files"
    env = {"CONFER_DATABASE_URL": empty_database, "CONFER_ATTACHMENTS_DIR": str(files)}
    for name, (content, message) in cases.items():
        broken = tmp_path / name
        broken.write_bytes(content)
        refused = await confer("restore", str(broken), env=env)
        assert refused.returncode == 1, (name, refused.stdout)
        assert message in refused.stderr, (name, refused.stderr)
        assert "Traceback" not in refused.stderr, refused.stderr
    assert await _tables(empty_database) == 0
    assert not files.exists()


async def test_restore_into_the_embedded_database_and_back_it_up(
    backup: Backup, tmp_path: Path
) -> None:
    data_dir = tmp_path / "embedded"
    env = {"CONFER_DATA_DIR": str(data_dir)}
    try:
        restored = await confer("restore", str(backup.archive), env=env)
        assert restored.returncode == 0, restored.stderr
        served_env = serve_env(backup.port, "", CONFER_DATA_DIR=str(data_dir))
        del served_env["CONFER_DATABASE_URL"]
        await _check_served(served_env, backup)

        archive = tmp_path / "embedded.tar"
        made = await confer("backup", str(archive), env=env)
        assert made.returncode == 0, made.stderr
        with tarfile.open(archive) as tar:
            manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
            names = tar.getnames()
        assert manifest["server_major"] == manifest["pg_dump_major"] == 16  # pgserver's own
        assert f"attachments/{backup.attachment_id}" in names
    finally:
        await asyncio.to_thread(_stop_embedded, data_dir / "pg")


def _stop_embedded(pgdata: Path) -> None:
    """Stop the embedded server the commands left running (it outlives them by design):
    SIGINT to the postmaster (first line of ``postmaster.pid``) is PostgreSQL's fast
    shutdown, which removes that file."""
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(pid_file.read_text().split()[0]), signal.SIGINT)
    deadline = time.monotonic() + 60
    while pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)


async def test_restore_moves_local_files_into_s3_and_backs_them_up_from_there(
    backup: Backup, empty_database: str, tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    env = {"CONFER_DATABASE_URL": empty_database, **s3_server.env(s3_bucket)}
    restored = await confer("restore", str(backup.archive), env=env)
    assert restored.returncode == 0, restored.stderr
    assert await asyncio.to_thread(s3_server.keys, s3_bucket) == [backup.attachment_id]
    conn = await asyncpg.connect(empty_database)
    try:
        url = await conn.fetchval(
            "SELECT storage_url FROM attachments WHERE id = $1", backup.attachment_id
        )
    finally:
        await conn.close()
    assert url == f"s3:{backup.attachment_id}"  # re-pointed from local:
    await _check_served(serve_env(backup.port, empty_database, **s3_server.env(s3_bucket)), backup)

    archive = tmp_path / "from-s3.tar"
    made = await confer("backup", str(archive), env=env)
    assert made.returncode == 0, made.stderr
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        member = tar.extractfile(f"attachments/{backup.attachment_id}")
        assert member is not None and member.read() == FILE
    assert [a["storage_url"] for a in manifest["attachments"]] == [url]


async def test_a_file_gone_from_storage_is_listed_as_missing(
    backup: Backup, tmp_path: Path
) -> None:
    (Path(backup.source["CONFER_ATTACHMENTS_DIR"]) / backup.attachment_id).unlink()
    archive = tmp_path / "without-file.tar"
    made = await confer("backup", str(archive), env=backup.source)
    assert made.returncode == 0, made.stderr
    assert f"warning: local:{backup.attachment_id} was deleted" in made.stderr
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
    assert manifest["missing"] == [f"local:{backup.attachment_id}"]
    assert manifest["attachments"] == []


async def test_a_target_that_cannot_be_written_is_one_sentence(
    backup: Backup, tmp_path: Path
) -> None:
    """A missing folder or a directory as the target: ``error: …`` before any dump, no
    traceback."""
    for target, says in (
        (tmp_path / "no-such-folder" / "x.tar", "does not exist"),
        (tmp_path, "is a directory"),
    ):
        made = await confer("backup", str(target), env=backup.source)
        assert made.returncode == 1, made.stdout
        assert made.stderr.startswith("error: ") and says in made.stderr, made.stderr
        assert "Traceback" not in made.stderr
