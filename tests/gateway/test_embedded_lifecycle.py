"""``confer serve`` on the embedded PostgreSQL stops it when it exits (SIGINT or SIGTERM, a
start-up refused or interrupted) unless another Confer process still uses it; ``confer stop``
stops it on request. Real processes, a real pgserver data directory."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from pgserver.utils import PostmasterInfo

from tests.gateway.harness import NATS_URL, RUN_RATE_LIMIT_PREFIX, free_port, reachable
from tests.gateway.serving import ROOT, Served, confer_serve, refused_once


def _env(data_dir: Path, port: int, public_port: int | None = None, **extra: str) -> dict[str, str]:
    """A ``confer serve`` on the embedded PostgreSQL of ``data_dir`` (no database URL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONFER_")}
    return {
        **env,
        "CONFER_DATA_DIR": str(data_dir),
        "CONFER_PORT": str(port),
        "CONFER_PUBLIC_URL": f"http://localhost:{public_port or port}",
        "CONFER_RATE_LIMIT_PREFIX": RUN_RATE_LIMIT_PREFIX,
        **extra,
    }


def _postgres_processes(pgdata: Path) -> list[psutil.Process]:
    """Processes whose command line names ``pgdata`` (the postmaster is started with -D)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if str(pgdata) in cmdline and "postgres" in cmdline:
            found.append(process)
    return found


def _running(pgdata: Path) -> bool:
    info = PostmasterInfo.read_from_pgdata(pgdata)
    return info is not None and info.is_running()


async def _stop(served: Served, sig: signal.Signals) -> int:
    served.process.send_signal(sig)
    return await asyncio.wait_for(served.process.wait(), 60)


def _confer(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONFER_")}
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        env={**env, "CONFER_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """A data directory whose embedded server is stopped at the end whatever happened."""
    path = tmp_path / "data"
    yield path
    if _running(path / "pg"):
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path;"
                " from gateway.embedded import stop_embedded_postgres as s; s(Path(sys.argv[1]))",
                str(path / "pg"),
            ],
            cwd=ROOT,
            timeout=120,
        )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_serve_stops_its_embedded_postgres_on_exit(
    data_dir: Path, sig: signal.Signals
) -> None:
    pgdata = (data_dir / "pg").resolve()
    async with confer_serve(_env(data_dir, free_port())) as served:
        assert _running(pgdata)
        assert _postgres_processes(pgdata)
        assert await _stop(served, sig) == 0, served.output()[-3000:]
        assert "stopped the embedded PostgreSQL" in served.output()
    assert not _running(pgdata)
    for _ in range(50):  # the postmaster's children may take a moment to go
        if not _postgres_processes(pgdata):
            break
        await asyncio.sleep(0.2)
    assert _postgres_processes(pgdata) == []


@pytest.mark.skipif(
    not reachable(NATS_URL), reason="needs the local NATS on 4222 (.ci/run starts it)"
)
async def test_the_embedded_postgres_stays_while_another_process_uses_it(data_dir: Path) -> None:
    pgdata = (data_dir / "pg").resolve()
    first, second = free_port(), free_port()
    bus = {
        "CONFER_NATS_URL": NATS_URL,
        "CONFER_AGENT_QUEUE_STREAM": f"EMB_{first}",
        "CONFER_AGENT_QUEUE_SUBJECT_PREFIX": f"emb{first}.",
    }
    async with confer_serve(_env(data_dir, first, **bus)) as a:
        async with confer_serve(_env(data_dir, second, public_port=first, **bus)) as b:
            assert await _stop(a, signal.SIGTERM) == 0
            assert "keeps running: another Confer process uses it" in a.output()
            assert _running(pgdata)
            refused = await asyncio.to_thread(_confer, "stop", data_dir=data_dir)
            assert refused.returncode == 1
            assert "1 Confer process(es) still use the embedded PostgreSQL" in refused.stderr
            assert await _stop(b, signal.SIGTERM) == 0
            assert "stopped the embedded PostgreSQL" in b.output()
    assert not _running(pgdata)


async def test_confer_stop_stops_an_idle_embedded_postgres(data_dir: Path) -> None:
    pgdata = (data_dir / "pg").resolve()
    migrated = await asyncio.to_thread(_confer, "migrate", data_dir=data_dir)  # starts it
    assert migrated.returncode == 0, migrated.stderr
    assert _running(pgdata)  # CLI commands leave it running
    stopped = await asyncio.to_thread(_confer, "stop", data_dir=data_dir)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.strip() == f"stopped the embedded PostgreSQL in {pgdata}"
    assert not _running(pgdata)
    again = await asyncio.to_thread(_confer, "stop", data_dir=data_dir)
    assert again.stdout.strip() == f"the embedded PostgreSQL in {pgdata} is not running"


NOBODY = "nats://127.0.0.1:1"  # nothing listens on port 1


async def test_an_unreachable_nats_refuses_to_start_and_stops_the_embedded_postgres(
    data_dir: Path,
) -> None:
    env = _env(
        data_dir, free_port(), CONFER_NATS_URL=NOBODY, CONFER_BACKEND_CONNECT_TIMEOUT_SECONDS="3"
    )
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "gateway", "serve"],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,  # a loaded machine starts the embedded PostgreSQL slowly
    )
    output = result.stdout + result.stderr
    assert result.returncode == 3, output[-3000:]
    refused_once(output, f"CONFER_NATS_URL={NOBODY}")
    assert "stopped the embedded PostgreSQL" in output
    assert not _running(data_dir / "pg")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_a_signal_during_start_up_ends_it_and_stops_the_embedded_postgres(
    data_dir: Path, sig: signal.Signals
) -> None:
    # NATS is tried for far longer than the test waits: only the signal can end start-up
    env = _env(
        data_dir, free_port(), CONFER_NATS_URL=NOBODY, CONFER_BACKEND_CONNECT_TIMEOUT_SECONDS="3600"
    )
    with tempfile.TemporaryFile() as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway",
            "serve",
            env={**env, "PYTHONPATH": str(ROOT)},
            stdout=log,
            stderr=log,
        )
        served = Served("", process, log)
        try:
            await served.wait_for_output("Waiting for application startup", within=240)
            returncode = await _stop(served, sig)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        output = served.output()
    assert returncode == 0, output[-3000:]
    assert "stopped by a signal while starting" in output
    assert "Traceback" not in output, output[-3000:]
    assert "stopped the embedded PostgreSQL" in output
    assert not _running(data_dir / "pg")
