"""Synapse and Confer side by side: the same client model against each, run alternately.

Run: ``make bench-synapse`` or ``python bench/synapse_side_by_side.py [--rounds 2 ...]``. It
first installs Synapse (the Matrix reference homeserver), pinned, into its own venv
``.bench/synapse-venv`` through ``scripts/synapse-venv.sh`` (a large download the first time,
so it is not part of ``make bench``). Then, for each round, Synapse and then Confer (never both
at once) each get a fresh throw-away PostgreSQL cluster of the same kind and settings (the
pgserver binaries, ``initdb`` defaults, a database with UTF-8 and the C locale), are started
on loopback, and are measured with the same client (httpx + asyncio in this process):

1. Sends: one sender, ``--inflight`` requests in flight, into one room/conversation whose one
   other member is connected (a ``/sync`` long-poll loop on Synapse, a WebSocket on Confer):
   sends per second, p50/p99 latency of a send, and CPU per send of the server process and of
   the PostgreSQL processes (``/proc/<pid>/stat`` before and after).
2. Fan-out: ``--receivers`` members connected (each Synapse receiver long-polls ``/sync`` with
   its ``since`` token; each Confer receiver holds a WebSocket), ``--messages`` posts one after
   the other: deliveries per second (receivers / time from the POST to the last receiver's
   receipt, median over posts) and p99 of that time.

Set-up is alike on both sides and not measured: users registered through each server's API
(Synapse: the shared-secret admin API; Confer: ``/v1/auth/register``) with cheap password
hashing (bcrypt rounds 4; argon2 time cost 1), rate limits raised through each server's own
configuration, receivers joined explicitly (so Confer's message requests are off, as a joined
Matrix room has none), federation off on Synapse and unused on Confer, 20 warm-up sends first.
Both servers are one process of their stock configuration otherwise. The machine may be shared:
the absolute numbers are noisy, the alternation is what keeps the per-round ratio fair.
Exit status 1 with one sentence when Synapse cannot be installed or started. ``--json FILE``
also writes every run's figures to ``FILE`` (``bench/table.py --synapse`` reads them).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import functools
import hashlib
import hmac
import itertools
import json
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fanout import (  # bench/ is on the path
    SERVER,
    free_port,
    open_sockets,
    percentile,
    process,
    raise_fd_limit,
    wait_http,
)

from tests.agents.vector_cluster import vector_cluster

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / ".bench"
VENV = Path(os.environ.get("CONFER_SYNAPSE_VENV", SCRATCH / "synapse-venv"))
PASSWORD = "correct horse battery"
START_DEADLINE = 300.0  # a fresh Synapse creates its schema at start; the machine may be loaded
WAIT_DEADLINE = 120.0
MARKER = re.compile(r"sbs-[0-9a-f]{32}")
WARMUP_SENDS = 20


def new_marker() -> str:
    return f"sbs-{uuid.uuid4().hex}"


def cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and its reaped children, in seconds (``/proc/<pid>/stat``
    fields 14-17, proc(5)); 0.0 when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class CpuMeter:
    """CPU used by the server process and by every PostgreSQL process of its cluster between
    :meth:`start` and :meth:`stop` (the database's processes are listed from
    ``pg_stat_activity``, which shows backends and background processes alike)."""

    server_pid: int
    admin_dsn: str
    server: float = 0.0
    database: float = 0.0
    client: float = 0.0
    _db_before: dict[int, float] = field(default_factory=dict)
    _server_before: float = 0.0
    _client_before: float = 0.0

    async def _db_pids(self) -> list[int]:
        conn = await asyncpg.connect(self.admin_dsn)
        try:
            return [r["pid"] for r in await conn.fetch("SELECT pid FROM pg_stat_activity")]
        finally:
            await conn.close()

    async def start(self) -> None:
        self._db_before = {pid: cpu_seconds(pid) for pid in await self._db_pids()}
        self._server_before = cpu_seconds(self.server_pid)
        self._client_before = time.process_time()

    async def stop(self) -> None:
        self.server = cpu_seconds(self.server_pid) - self._server_before
        self.client = time.process_time() - self._client_before
        after = {pid: cpu_seconds(pid) for pid in await self._db_pids()}
        self.database = sum(t - self._db_before.get(pid, 0.0) for pid, t in after.items())


class Arrivals:
    """When each receiver first saw each marker; :meth:`expect` resolves with the time at
    which the last of ``receivers`` saw it (``time.perf_counter`` seconds)."""

    def __init__(self, receivers: int) -> None:
        self.receivers = receivers
        self._seen: dict[str, set[int]] = {}
        self._waiting: dict[str, asyncio.Future[float]] = {}

    def expect(self, marker: str) -> asyncio.Future[float]:
        future = asyncio.get_running_loop().create_future()
        self._waiting[marker] = future
        self._seen[marker] = set()
        return future

    def fail(self, error: BaseException) -> None:
        """A receiver stopped: every post still awaited fails with ``error``."""
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(RuntimeError(f"a receiver stopped: {error!r}"))

    def saw(self, receiver: int, text: str, at: float) -> None:
        for marker in MARKER.findall(text):
            seen = self._seen.get(marker)
            if seen is None or receiver in seen:
                continue
            seen.add(receiver)
            if len(seen) == self.receivers:
                future = self._waiting.pop(marker)
                if not future.done():
                    future.set_result(at)


@dataclass
class User:
    name: str
    token: str
    address: str  # Matrix user ID or Confer DID


class System:
    """One server under test, as the client sees it."""

    label = ""
    base = ""
    pid = 0

    async def register(self, names: list[str]) -> list[User]:
        raise NotImplementedError

    async def room(self, owner: User, members: list[User]) -> str:
        raise NotImplementedError

    async def send(self, client: httpx.AsyncClient, sender: User, room: str, text: str) -> None:
        raise NotImplementedError

    def listen(
        self, users: list[User], arrivals: Arrivals
    ) -> contextlib.AbstractAsyncContextManager[None]:
        raise NotImplementedError


async def bounded(count: int, calls: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    semaphore = asyncio.Semaphore(count)

    async def one(call: Callable[[], Awaitable[Any]]) -> Any:
        async with semaphore:
            return await call()

    return list(await asyncio.gather(*(one(c) for c in calls)))


# --- Synapse -----------------------------------------------------------------------------

SYNC_FILTER = (
    '{"presence":{"not_types":["*"]},"account_data":{"not_types":["*"]},'
    '"room":{"timeline":{"limit":20},"state":{"lazy_load_members":true},'
    '"ephemeral":{"not_types":["*"]},"account_data":{"not_types":["*"]}}}'
)
RATE_LIMITS = [
    "rc_message",
    "rc_registration",
    "rc_login.address",
    "rc_login.account",
    "rc_login.failed_attempts",
    "rc_joins.local",
    "rc_joins_per_room",
    "rc_invites.per_room",
    "rc_invites.per_user",
    "rc_invites.per_issuer",
    "rc_room_creation",
    "rc_presence.per_user",
]


def synapse_config(directory: Path, port: int, dsn: str, secret: str) -> str:
    """homeserver.yaml for one loopback Synapse on ``dsn``'s cluster (JSON is valid YAML)."""
    import json

    parts = dsn.split("@", 1)[1].split("/")
    host, db_port = parts[0].split(":")
    limits: dict[str, Any] = {}
    for key in RATE_LIMITS:
        node = limits
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = {"per_second": 1_000_000, "burst_count": 1_000_000}
    (directory / "log.yaml").write_text(
        json.dumps(
            {
                "version": 1,
                "formatters": {
                    "plain": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}
                },
                "handlers": {
                    "file": {
                        "class": "logging.FileHandler",
                        "filename": str(directory / "homeserver.log"),
                        "formatter": "plain",
                    }
                },
                "root": {"level": "WARNING", "handlers": ["file"]},
                "disable_existing_loggers": False,
            }
        )
    )
    seed = base64.b64encode(secrets.token_bytes(32)).decode().rstrip("=")
    (directory / "signing.key").write_text(f"ed25519 a_bench {seed}\n")
    config = {
        "server_name": "localhost",
        "public_baseurl": f"http://127.0.0.1:{port}/",
        "pid_file": str(directory / "homeserver.pid"),
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": {
            "name": "psycopg2",
            "args": {
                "user": "postgres",
                "host": host,
                "port": int(db_port),
                "dbname": parts[1],
                "cp_min": 5,
                "cp_max": 10,
            },
        },
        "log_config": str(directory / "log.yaml"),
        "media_store_path": str(directory / "media"),
        "signing_key_path": str(directory / "signing.key"),
        "registration_shared_secret": secret,
        "macaroon_secret_key": secrets.token_hex(16),
        "form_secret": secrets.token_hex(16),
        "bcrypt_rounds": 4,
        "report_stats": False,
        "enable_metrics": False,
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],
        **limits,
    }
    path = directory / "homeserver.yaml"
    path.write_text(json.dumps(config, indent=1))
    return str(path)


class Synapse(System):
    label = "Synapse"

    def __init__(self, base: str, pid: int, secret: str) -> None:
        self.base, self.pid, self.secret = base, pid, secret

    async def register(self, names: list[str]) -> list[User]:
        async with httpx.AsyncClient(base_url=self.base, timeout=60) as client:

            async def one(name: str) -> User:
                url = "/_synapse/admin/v1/register"
                nonce = (await client.get(url)).raise_for_status().json()["nonce"]
                mac = hmac.new(self.secret.encode(), digestmod=hashlib.sha1)
                mac.update(b"\x00".join([nonce.encode(), name.encode(), PASSWORD.encode()]))
                mac.update(b"\x00notadmin")
                body = {"nonce": nonce, "username": name, "password": PASSWORD}
                r = await client.post(url, json={**body, "mac": mac.hexdigest()})
                answer = r.raise_for_status().json()
                return User(name, answer["access_token"], answer["user_id"])

            return await bounded(8, [functools.partial(one, n) for n in names])

    async def room(self, owner: User, members: list[User]) -> str:
        async with httpx.AsyncClient(base_url=self.base, timeout=60) as client:
            r = await client.post(
                "/_matrix/client/v3/createRoom",
                json={"preset": "public_chat", "name": "bench"},
                headers=_bearer(owner),
            )
            room_id: str = r.raise_for_status().json()["room_id"]
            path = f"/_matrix/client/v3/join/{quote(room_id)}"

            async def join(user: User) -> None:
                (await client.post(path, json={}, headers=_bearer(user))).raise_for_status()

            await bounded(8, [functools.partial(join, u) for u in members])
        return room_id

    async def send(self, client: httpx.AsyncClient, sender: User, room: str, text: str) -> None:
        path = f"/_matrix/client/v3/rooms/{quote(room)}/send/m.room.message/{uuid.uuid4().hex}"
        r = await client.put(
            path, json={"msgtype": "m.text", "body": text}, headers=_bearer(sender)
        )
        r.raise_for_status()

    @contextlib.asynccontextmanager
    async def listen(self, users: list[User], arrivals: Arrivals) -> AsyncIterator[None]:
        clients = [httpx.AsyncClient(base_url=self.base, timeout=90) for _ in users]

        async def loop(index: int, user: User, client: httpx.AsyncClient) -> None:
            params = {"filter": SYNC_FILTER, "timeout": "0"}
            try:
                while True:
                    r = await client.get(
                        "/_matrix/client/v3/sync", params=params, headers=_bearer(user)
                    )
                    at = time.perf_counter()
                    r.raise_for_status()
                    arrivals.saw(index, r.text, at)
                    params = {**params, "since": r.json()["next_batch"], "timeout": "30000"}
            except Exception as exc:
                arrivals.fail(exc)
                raise

        tasks = [
            asyncio.create_task(loop(i, u, c))
            for i, (u, c) in enumerate(zip(users, clients, strict=True))
        ]
        try:
            yield
        finally:
            await _cancel(tasks)
            for client in clients:
                await client.aclose()


def _bearer(user: User) -> dict[str, str]:
    return {"Authorization": f"Bearer {user.token}"}


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise RuntimeError(f"a receiver failed: {task.exception()!r}")
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def synapse_server(dsn: str, round_no: int) -> AsyncIterator[Synapse]:
    directory = Path(tempfile.mkdtemp(prefix="confer-bench-synapse-"))
    port, secret = free_port(), secrets.token_hex(16)
    config = synapse_config(directory, port, dsn, secret)
    proc = await asyncio.create_subprocess_exec(
        str(VENV / "bin" / "python"),
        "-m",
        "synapse.app.homeserver",
        "-c",
        config,
        cwd=directory,
        stdout=subprocess.DEVNULL,
        stderr=(directory / "stderr.log").open("wb"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        await _wait_up(base + "/_matrix/client/versions", proc, directory)
        yield Synapse(base, proc.pid, secret)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 60)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        logs = SCRATCH / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for name in ("homeserver.log", "stderr.log"):
            with contextlib.suppress(OSError):
                shutil.copy(directory / name, logs / f"synapse-round{round_no}-{name}")
        shutil.rmtree(directory, ignore_errors=True)


async def _wait_up(url: str, proc: asyncio.subprocess.Process, directory: Path) -> None:
    deadline = time.monotonic() + START_DEADLINE
    async with httpx.AsyncClient(timeout=5) as client:
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                raise RuntimeError(
                    f"Synapse exited with status {proc.returncode} while starting "
                    f"(its logs are copied to {SCRATCH / 'logs'})."
                )
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return
            await asyncio.sleep(0.2)
    raise RuntimeError(f"Synapse did not answer {url} within {START_DEADLINE:.0f} s.")


# --- Confer ------------------------------------------------------------------------------


class Confer(System):
    label = "Confer"

    def __init__(self, base: str, pid: int) -> None:
        self.base, self.pid = base, pid

    async def register(self, names: list[str]) -> list[User]:
        async with httpx.AsyncClient(base_url=self.base, timeout=60) as client:

            async def one(name: str) -> User:
                r = await client.post(
                    "/v1/auth/register", json={"username": name, "password": PASSWORD}
                )
                answer = r.raise_for_status().json()
                return User(name, answer["access_token"], answer["user"]["did"])

            return await bounded(8, [functools.partial(one, n) for n in names])

    async def room(self, owner: User, members: list[User]) -> str:
        body: dict[str, Any] = {
            "type": "group",
            "name": "bench",
            "participant_dids": [m.address for m in members],
        }
        async with httpx.AsyncClient(base_url=self.base, timeout=60) as client:
            r = await client.post("/v1/conversations", json=body, headers=_bearer(owner))
            return str(r.raise_for_status().json()["id"])

    async def send(self, client: httpx.AsyncClient, sender: User, room: str, text: str) -> None:
        r = await client.post(
            f"/v1/conversations/{room}/messages", json={"content": text}, headers=_bearer(sender)
        )
        r.raise_for_status()

    @contextlib.asynccontextmanager
    async def listen(self, users: list[User], arrivals: Arrivals) -> AsyncIterator[None]:
        url = self.base.replace("http", "ws", 1) + "/v1/ws"
        sockets = await open_sockets(url, [u.token for u in users])

        async def loop(index: int, ws: Any) -> None:
            try:
                async for frame in ws:
                    text = frame if isinstance(frame, str) else frame.decode()
                    arrivals.saw(index, text, time.perf_counter())
            except Exception as exc:
                arrivals.fail(exc)
                raise
            arrivals.fail(RuntimeError(f"WebSocket closed: {ws.close_code} {ws.close_reason}"))

        tasks = [asyncio.create_task(loop(i, ws)) for i, ws in enumerate(sockets)]
        try:
            yield
        finally:
            await _cancel(tasks)
            for ws in sockets:
                await ws.close()


@contextlib.asynccontextmanager
async def confer_server(dsn: str) -> AsyncIterator[Confer]:
    directory = Path(tempfile.mkdtemp(prefix="confer-bench-confer-"))
    port = free_port()
    env = {
        "CONFER_DATABASE_URL": dsn,
        "CONFER_PORT": str(port),
        "CONFER_PUBLIC_URL": f"http://localhost:{port}",
        "CONFER_DATA_DIR": str(directory),
        "CONFER_RATE_LIMIT_REGISTER_IP": "1000000/hour",
        "CONFER_ARGON2_TIME_COST": "1",
        "CONFER_ARGON2_MEMORY_KIB": "1024",
        "CONFER_ARGON2_PARALLELISM": "1",
        "CONFER_MESSAGE_REQUESTS_DEFAULT": "false",
        "CONFER_LOG_LEVEL": "warning",
    }
    try:
        async with process(SERVER, env=env) as pid:
            base = f"http://127.0.0.1:{port}"
            await wait_http(base + "/healthz")
            yield Confer(base, pid)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# --- the measurements --------------------------------------------------------------------


async def fresh_database(admin_dsn: str) -> str:
    """A database ``bench`` on the cluster, UTF-8 with the C locale (what Synapse requires;
    Confer gets the same), and its DSN."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(
            "CREATE DATABASE bench TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"
        )
    finally:
        await conn.close()
    return admin_dsn.rsplit("/", 1)[0] + "/bench"


async def warm_up(system: System, sender: User, room: str, arrivals: Arrivals) -> None:
    """Post until every receiver has seen a post (their loops are live), then some more."""
    async with httpx.AsyncClient(base_url=system.base, timeout=60) as client:
        marker = new_marker()
        seen = arrivals.expect(marker)
        await system.send(client, sender, room, marker)
        await asyncio.wait_for(seen, WAIT_DEADLINE)
        for i in range(WARMUP_SENDS):
            await system.send(client, sender, room, f"warm-up {i}")


async def measure_sends(
    system: System, admin_dsn: str, users: list[User], total: int, inflight: int
) -> dict[str, float]:
    sender, recipient = users
    room = await system.room(sender, [recipient])
    arrivals = Arrivals(1)
    async with system.listen([recipient], arrivals):
        await warm_up(system, sender, room, arrivals)
        counter = itertools.count()
        latencies: list[float] = []
        limits = httpx.Limits(max_connections=inflight, max_keepalive_connections=inflight)
        async with httpx.AsyncClient(base_url=system.base, timeout=60, limits=limits) as client:

            async def worker() -> None:
                while next(counter) < total:
                    started = time.perf_counter()
                    await system.send(client, sender, room, "hello")
                    latencies.append((time.perf_counter() - started) * 1000)

            meter = CpuMeter(system.pid, admin_dsn)
            await meter.start()
            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(inflight)))
            elapsed = time.perf_counter() - started
            await meter.stop()
    return {
        "sends_per_s": total / elapsed,
        "p50_ms": statistics.median(latencies),
        "p99_ms": percentile(latencies, 0.99),
        "server_cpu_ms": meter.server * 1000 / total,
        "db_cpu_ms": meter.database * 1000 / total,
    }


async def measure_fanout(
    system: System, admin_dsn: str, users: list[User], messages: int
) -> dict[str, float]:
    sender, receivers = users[0], users[1:]
    room = await system.room(sender, receivers)
    arrivals = Arrivals(len(receivers))
    async with system.listen(receivers, arrivals):
        await warm_up(system, sender, room, arrivals)
        latencies, rates = [], []
        meter = CpuMeter(system.pid, admin_dsn)
        await meter.start()
        async with httpx.AsyncClient(base_url=system.base, timeout=60) as client:
            for _ in range(messages):
                marker = new_marker()
                seen = arrivals.expect(marker)
                started = time.perf_counter()
                await system.send(client, sender, room, marker)
                last = await asyncio.wait_for(seen, WAIT_DEADLINE) - started
                latencies.append(last * 1000)
                rates.append(len(receivers) / last)
        await meter.stop()
    return {
        "deliveries_per_s": statistics.median(rates),
        "p50_ms": statistics.median(latencies),
        "p99_ms": percentile(latencies, 0.99),
        "server_cpu_ms": meter.server * 1000 / messages,
        "client_cpu_ms": meter.client * 1000 / messages,
    }


async def run_one(kind: str, round_no: int, args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    async with vector_cluster() as admin_dsn:
        dsn = await fresh_database(admin_dsn)
        server: contextlib.AbstractAsyncContextManager[System] = (
            synapse_server(dsn, round_no) if kind == "Synapse" else confer_server(dsn)
        )
        async with server as system:
            up = time.perf_counter() - started
            names = [f"bench{i:04d}" for i in range(args.receivers + 3)]
            users = await system.register(names)
            setup = time.perf_counter() - started
            sends = await measure_sends(system, admin_dsn, users[:2], args.sends, args.inflight)
            fanout = await measure_fanout(system, admin_dsn, users[2:], args.messages)
    print(
        f"round {round_no} {kind}: up in {up:.1f} s, set up in {setup:.1f} s; "
        f"{sends['sends_per_s']:.0f} sends/s, {fanout['deliveries_per_s']:.0f} deliveries/s",
        flush=True,
    )
    return {"kind": kind, "round": round_no, "up_s": up, "sends": sends, "fanout": fanout}


def install() -> tuple[float, str]:
    """Run scripts/synapse-venv.sh; how long it took (seconds) and the Synapse version.
    Exits (status 1, one sentence) when Synapse cannot be installed."""
    log = SCRATCH / "synapse-install.log"
    SCRATCH.mkdir(exist_ok=True)
    started = time.perf_counter()
    with log.open("wb") as out:
        result = subprocess.run(
            ["bash", str(ROOT / "scripts" / "synapse-venv.sh")],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "CONFER_SYNAPSE_VENV": str(VENV)},
        )
    if result.returncode != 0:
        sys.exit(
            f"Synapse could not be installed into {VENV} (scripts/synapse-venv.sh exited "
            f"{result.returncode}; its output is in {log}), so nothing was compared."
        )
    version = subprocess.run(
        [
            str(VENV / "bin" / "python"),
            "-I",
            "-c",
            "import importlib.metadata as m; print(m.version('matrix-synapse'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return time.perf_counter() - started, version


def table(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    rows = [
        f"| round | server | sends/s | send p50 ms | send p99 ms | server CPU ms/send "
        f"| PostgreSQL CPU ms/send | fan-out to {args.receivers}: deliveries/s | fan-out p99 ms "
        "| server CPU ms/fan-out post | bench client CPU ms/fan-out post |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        s, f = r["sends"], r["fanout"]
        rows.append(
            f"| {r['round']} | {r['kind']} | {s['sends_per_s']:,.0f} | {s['p50_ms']:.1f} "
            f"| {s['p99_ms']:.1f} | {s['server_cpu_ms']:.2f} | {s['db_cpu_ms']:.2f} "
            f"| {f['deliveries_per_s']:,.0f} | {f['p99_ms']:.1f} | {f['server_cpu_ms']:.1f} "
            f"| {f['client_cpu_ms']:.1f} |"
        )
    pairs = [
        (a, b)
        for a, b in itertools.product(results, results)
        if a["round"] == b["round"] and a["kind"] == "Synapse" and b["kind"] == "Confer"
    ]
    ratios = {
        "sends/s, Confer ÷ Synapse": [
            c["sends"]["sends_per_s"] / s["sends"]["sends_per_s"] for s, c in pairs
        ],
        "server CPU per send, Synapse ÷ Confer": [
            s["sends"]["server_cpu_ms"] / c["sends"]["server_cpu_ms"] for s, c in pairs
        ],
        "fan-out deliveries/s, Confer ÷ Synapse": [
            c["fanout"]["deliveries_per_s"] / s["fanout"]["deliveries_per_s"] for s, c in pairs
        ],
        "fan-out p99, Synapse ÷ Confer": [
            s["fanout"]["p99_ms"] / c["fanout"]["p99_ms"] for s, c in pairs
        ],
    }
    rows += ["", "| ratio | per round | median |", "|---|---|---:|"]
    for label, values in ratios.items():
        per_round = ", ".join(f"{v:.2f}x" for v in values)
        rows.append(f"| {label} | {per_round} | {statistics.median(values):.2f}x |")
    return "\n".join(rows)


async def compare(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each round: Synapse, then Confer, each on a cluster of its own (never both at once)."""
    results = []
    for round_no in range(1, args.rounds + 1):
        for kind in ("Synapse", "Confer"):
            results.append(await run_one(kind, round_no, args))
    return results


def main(args: argparse.Namespace) -> None:
    raise_fd_limit(4 * args.receivers + 1000)
    took, version = install()
    print(f"Synapse {version} ready in {VENV} (setup took {took:.1f} s); cpus: {os.cpu_count()}")
    print(
        f"{args.rounds} rounds, Synapse then Confer; sends: {args.sends} with {args.inflight} "
        f"in flight; fan-out: {args.messages} posts to {args.receivers} receivers",
        flush=True,
    )
    started = time.perf_counter()
    results = asyncio.run(compare(args))
    print(f"\n{len(results)} runs in {time.perf_counter() - started:.0f} s\n")
    print(table(results, args))
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": results}, indent=2) + "\n")


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=positive, default=2, help="rounds of Synapse then Confer")
    parser.add_argument("--sends", type=positive, default=400, help="sends measured per round")
    parser.add_argument("--inflight", type=positive, default=16, help="sends in flight at once")
    parser.add_argument("--receivers", type=positive, default=50, help="fan-out receivers")
    parser.add_argument("--messages", type=positive, default=20, help="fan-out posts per round")
    parser.add_argument("--json", help="also write every run's figures to this file")
    try:
        main(parser.parse_args())
    except RuntimeError as exc:
        sys.exit(str(exc))
