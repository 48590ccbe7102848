"""A throw-away PostgreSQL cluster with pgvector, for the semantic-search tests.

The system PostgreSQL of the test machine (and CI) has no pgvector, but the ``pgserver`` package
bundles PostgreSQL with the ``vector`` extension. :func:`vector_cluster` runs those binaries
directly: ``initdb`` into a fresh temporary directory, ``postgres`` on a free loopback TCP port,
readiness polled by connecting (with a generous deadline: the machine may be loaded), and the
server stopped and its directory removed at the end. As root, PostgreSQL refuses to run, so the
cluster runs as pgserver's unprivileged ``pgserver`` user (created when missing).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg

from gateway.embedded import ensure_runtime_dir
from tests.gateway.harness import free_port

START_DEADLINE = 180.0
STOP_DEADLINE = 60.0


def _binaries() -> Path:
    ensure_runtime_dir()
    from pgserver._commands import POSTGRES_BIN_PATH  # lazily: only these tests need pgserver

    return Path(POSTGRES_BIN_PATH)


def _system_user() -> str | None:
    """The user the server runs as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    ensure_runtime_dir()
    from pgserver.utils import ensure_user_exists

    ensure_user_exists("pgserver")
    return "pgserver"


def _start(root: Path, port: int) -> subprocess.Popen[bytes]:
    """``initdb`` a data directory under ``root`` and start ``postgres`` on ``port``."""
    user, binaries = _system_user(), _binaries()
    root.chmod(0o755)  # the server user must reach its data directory
    data_dir, log = root / "data", root / "server.log"
    data_dir.mkdir()
    log.touch()
    if user is not None:
        for path in (data_dir, log):
            shutil.chown(path, user)
    subprocess.run(
        [
            str(binaries / "initdb"),
            "-D",
            str(data_dir),
            "--auth=trust",
            "--encoding=utf8",
            "-U",
            "postgres",
        ],
        check=True,
        capture_output=True,
        timeout=START_DEADLINE,
        user=user,
    )
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                str(binaries / "postgres"),
                "-D",
                str(data_dir),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-k",
                str(data_dir),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            user=user,
        )


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.send_signal(signal.SIGINT)  # PostgreSQL's "fast" shutdown
        try:
            server.wait(STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(STOP_DEADLINE)


def _log(root: Path) -> str:
    return (root / "server.log").read_text(errors="replace")


async def _wait_ready(dsn: str, server: subprocess.Popen[bytes], root: Path) -> None:
    deadline = time.monotonic() + START_DEADLINE
    while True:
        if server.poll() is not None:
            log = await asyncio.to_thread(_log, root)
            raise RuntimeError(f"PostgreSQL exited ({server.returncode}): {log}")
        try:
            conn = await asyncpg.connect(dsn, timeout=5)
        except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
            if time.monotonic() > deadline:
                log = await asyncio.to_thread(_log, root)
                raise RuntimeError(f"PostgreSQL not ready in {START_DEADLINE}s: {log}") from exc
            await asyncio.sleep(0.2)
            continue
        await conn.close()
        return


@contextlib.asynccontextmanager
async def vector_cluster() -> AsyncIterator[str]:
    """Run a fresh pgvector-capable cluster; yields its admin DSN
    (``postgresql://postgres@127.0.0.1:<port>/postgres``, trust authentication)."""
    root = Path(tempfile.mkdtemp(prefix="confer-pgvector-"))
    server: subprocess.Popen[bytes] | None = None
    try:
        port = free_port()
        server = await asyncio.to_thread(_start, root, port)
        dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        await _wait_ready(dsn, server, root)
        yield dsn
    finally:
        if server is not None:
            await asyncio.to_thread(_stop, server)
        await asyncio.to_thread(shutil.rmtree, root, True)
