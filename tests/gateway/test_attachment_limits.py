"""What bounds uploads and keeps file messages honest, over real HTTP and PostgreSQL:

- downloads are ``Cache-Control: no-store``;
- an attachments folder that cannot be written: refused at start-up, 503 at request time.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import httpx
import pytest

from gateway.app import create_app
from gateway.errors import StorageUnavailableError
from tests.gateway.harness import Instance, User, free_port, loopback_settings, run_instance
from tests.gateway.serving import ROOT, serve_env


async def _upload(
    user: User, name: str, data: bytes, media: str = "application/octet-stream"
) -> httpx.Response:
    return await user.request("POST", "/v1/attachments", files={"file": (name, data, media)})


async def _rows(instance: Instance) -> set[str]:
    async with instance.state.pool.acquire() as conn:
        return {r["id"] for r in await conn.fetch("SELECT id FROM attachments")}


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
