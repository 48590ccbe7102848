"""``confer serve`` as a real subprocess for tests: its output captured, healthy on return."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from tests.gateway.harness import RUN_RATE_LIMIT_PREFIX


@dataclass
class Served:
    """A running ``confer serve``: its base URL and what it wrote to stdout and stderr."""

    base_url: str
    process: asyncio.subprocess.Process
    log: IO[bytes]

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    async def wait_for_output(self, needle: str, within: float = 30.0) -> str:
        """The output once it contains ``needle`` (records are written by another thread)."""
        deadline = time.monotonic() + within
        while needle not in (text := self.output()):
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} never logged; output: {text[-3000:]}")
            await asyncio.sleep(0.1)
        return text


def serve_env(port: int, database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a loopback ``confer serve`` on ``port`` over ``database_url``."""
    return {
        **os.environ,
        "CONFER_PUBLIC_URL": f"http://localhost:{port}",
        "CONFER_PORT": str(port),
        "CONFER_HOST": "127.0.0.1",
        "CONFER_DATABASE_URL": database_url,
        "CONFER_ALLOW_HTTP_DIDS": "true",
        "CONFER_ALLOW_PRIVATE_NETWORKS": "true",
        "CONFER_RATE_LIMIT_PREFIX": RUN_RATE_LIMIT_PREFIX,
        "CONFER_MESSAGE_REQUESTS_DEFAULT": "false",  # as the harness: see loopback_settings
        **extra,
    }


ROOT = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def confer_serve(
    env: dict[str, str],
    *args: str,
    cwd: Path | None = None,
    port: int | None = None,
) -> AsyncIterator[Served]:
    """``python -m gateway serve ARGS`` with ``env`` (in ``cwd``), once ``/healthz`` answers
    on ``port`` (default ``CONFER_PORT``); terminated (then killed) at exit."""
    base_url = f"http://localhost:{port or env['CONFER_PORT']}"
    log = tempfile.TemporaryFile()
    # this checkout's gateway, whatever the working directory
    env = {**env, "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "serve", *args, env=env, stdout=log, stderr=log, cwd=cwd
    )
    served = Served(base_url, process, log)
    try:
        deadline = time.monotonic() + 90  # a loaded machine starts Python slowly
        async with httpx.AsyncClient(timeout=2) as client:
            while True:
                if process.returncode is not None or time.monotonic() > deadline:
                    raise AssertionError(f"{base_url} not healthy: {served.output()[-3000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{base_url}/healthz")).status_code == 200:
                        break
                await asyncio.sleep(0.2)
        yield served
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 20)
            except TimeoutError:
                process.kill()
                await process.wait()
        log.close()


def refused_once(output: str, naming: str) -> None:
    """Assert that ``output`` (a ``confer serve`` that ended) refused to start in exactly one
    line, naming ``naming`` (``CONFER_NATS_URL=nats://…``), and printed no traceback."""
    refusals = [line for line in output.splitlines() if "refusing to start" in line]
    assert len(refusals) == 1, output[-3000:]
    assert naming in refusals[0], refusals[0]
    assert "Traceback" not in output, output[-3000:]
