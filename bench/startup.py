"""Start-up time of ``confer serve``: from the process spawn to the first 200 from ``/healthz``.

Run: ``python bench/startup.py [--runs 7] [--baseline /path/to/other/checkout]``. PostgreSQL as
:func:`bench.databases.admin_dsn` picks it (CONFER_BENCH_DATABASE_URL, the local server, or the
embedded one, already running after its first start). Each checkout gets a scratch database of
its own, migrated once by that checkout's ``confer migrate`` and dropped at the end, so every
measured start finds its own current schema and runs its own migration check (the common case:
a restart; ``CONFER_MIGRATE_ON_START`` is left at its default). One unmeasured start per
checkout first creates the instance identity and writes the bytecode.

Each run spawns ``python -m gateway serve`` from a checkout (``PYTHONPATH`` and working
directory), polls ``/healthz`` every 10 ms and stops the server once it answers. With
``--baseline`` the two checkouts alternate run by run, so both see the same machine load, and
both are timed exactly as a run without ``--baseline`` times its one checkout (``bench/table.py``
runs it so); the table shows p50/min/max wall seconds, the server's CPU seconds (user + system,
from ``/proc/<pid>/stat`` at the first answer: steadier than wall time on a shared machine, where
the wall time of a start that needs about 0.7 s of CPU doubles when other jobs hold the cores)
and how many modules ``import gateway.app`` and ``import gateway.cli`` (what ``confer serve``
loads) leave in ``sys.modules``. Bytecode is written under a scratch ``PYTHONPYCACHEPREFIX`` (as
a deployment has its ``.pyc`` files) even where ``PYTHONDONTWRITEBYTECODE`` is set, and the
checkouts themselves are not written to. ``--json FILE`` also writes the figures to ``FILE``;
``CONFER_BENCH_CHECKOUT=DIR`` makes ``DIR`` "this checkout" (``bench/checkout.py``). Loopback
only; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from checkout import CHECKOUT, write_json
from databases import admin_dsn, held_connection
from fanout import free_port

COUNT_MODULES = "import sys, {module}; print(len(sys.modules))"
PYCACHE = Path(tempfile.gettempdir()) / "confer-bench-startup-pycache"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def child_env(checkout: Path, **extra: str) -> dict[str, str]:
    """This environment for a Python process running ``checkout``, writing bytecode aside."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(checkout), "PYTHONPYCACHEPREFIX": str(PYCACHE), **extra}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used (proc(5): fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def module_count(checkout: Path, module: str) -> int:
    """How many modules ``import module`` leaves loaded, in a fresh interpreter of ``checkout``."""
    out = subprocess.run(
        [sys.executable, "-c", COUNT_MODULES.format(module=module)],
        env=child_env(checkout),
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return int(out.stdout.strip())


async def start_once(checkout: Path, database_url: str) -> tuple[float, float]:
    """(wall seconds, server CPU seconds) from spawning ``confer serve`` (in ``checkout``) to
    its first healthy answer."""
    port = free_port()
    env = child_env(
        checkout,
        CONFER_DATABASE_URL=database_url,
        CONFER_HOST="127.0.0.1",
        CONFER_PORT=str(port),
        CONFER_PUBLIC_URL="http://localhost:8765",  # one identity for every run
        CONFER_LOG_LEVEL="warning",
    )
    url = f"http://127.0.0.1:{port}/healthz"
    started = time.perf_counter()
    log = tempfile.TemporaryFile()  # the server's output: the table stays readable
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "serve", env=env, cwd=checkout, stdout=log, stderr=log
    )
    try:
        async with httpx.AsyncClient(timeout=2) as client:
            deadline = started + 120
            while time.perf_counter() < deadline:
                if proc.returncode is not None:
                    log.seek(0)
                    tail = log.read()[-2000:].decode(errors="replace")
                    raise RuntimeError(
                        f"confer serve in {checkout} exited {proc.returncode}: {tail}"
                    )
                try:
                    if (await client.get(url)).status_code == 200:
                        return time.perf_counter() - started, cpu_seconds(proc.pid)
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.01)
        raise RuntimeError(f"confer serve in {checkout} not healthy within 120 s")
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        log.close()


@contextlib.asynccontextmanager
async def checkout_database(admin: str, checkout: Path) -> AsyncIterator[str]:
    """A scratch database on ``admin``'s server migrated by ``checkout``'s own ``confer
    migrate`` (so an older checkout is at its own newest revision); dropped at exit."""
    from gateway.embedded import with_database

    name = f"confer_bench_{uuid.uuid4().hex[:8]}"
    async with held_connection(admin) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"')
        url = with_database(admin, name)
        try:
            migrate = await asyncio.create_subprocess_exec(
                sys.executable,
                *("-m", "gateway", "migrate"),
                env=child_env(checkout, CONFER_DATABASE_URL=url),
                cwd=checkout,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            output, _ = await asyncio.wait_for(migrate.communicate(), 300)
            if migrate.returncode != 0:
                tail = output[-2000:].decode(errors="replace")
                raise RuntimeError(f"confer migrate in {checkout} failed: {tail}")
            yield url
        finally:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def main(runs: int, checkouts: dict[str, Path], json_path: str | None = None) -> None:
    wall: dict[str, list[float]] = {label: [] for label in checkouts}
    cpu: dict[str, list[float]] = {label: [] for label in checkouts}
    admin = await asyncio.to_thread(admin_dsn)
    async with contextlib.AsyncExitStack() as stack:
        urls = {
            label: await stack.enter_async_context(checkout_database(admin, checkout))
            for label, checkout in checkouts.items()
        }
        for label, checkout in checkouts.items():
            await start_once(checkout, urls[label])  # identity, bytecode: unmeasured
        for i in range(runs):
            for label, checkout in checkouts.items():
                seconds, used = await start_once(checkout, urls[label])
                wall[label].append(seconds)
                cpu[label].append(used)
                print(f"run {i + 1}/{runs} {label}: {seconds:.2f} s, {used:.2f} s CPU", flush=True)
    print()
    print(
        f"| confer serve → first /healthz 200 ({runs} runs) | p50 s | min s | max s "
        "| CPU p50 s | modules: gateway.app | modules: gateway.cli |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    results: dict[str, object] = {}
    for label, checkout in checkouts.items():
        values = wall[label]
        app_modules = module_count(checkout, "gateway.app")
        cli_modules = module_count(checkout, "gateway.cli")
        print(
            f"| {label} ({checkout}) | {statistics.median(values):.2f} | {min(values):.2f} "
            f"| {max(values):.2f} | {statistics.median(cpu[label]):.2f} | {app_modules:,} "
            f"| {cli_modules:,} |"
        )
        results[label] = {
            "checkout": str(checkout),
            "wall_p50_s": statistics.median(values),
            "wall_min_s": min(values),
            "wall_max_s": max(values),
            "cpu_p50_s": statistics.median(cpu[label]),
            "modules_app": app_modules,
            "modules_cli": cli_modules,
        }
    write_json(json_path, results)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", help="another checkout to measure alongside (e.g. main)")
    parser.add_argument("--json", help="also write the figures per checkout to this file")
    args = parser.parse_args()
    checkouts = {"this checkout": CHECKOUT}
    if args.baseline:
        checkouts = {"baseline": Path(args.baseline).resolve(), **checkouts}
    asyncio.run(main(args.runs, checkouts, args.json))
