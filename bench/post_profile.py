"""Where one post's time goes in PostgreSQL: each statement of a fan-out post, timed by the server.

Run: ``python bench/post_profile.py`` (PostgreSQL as ``bench/databases.py`` picks it; a scratch
database is created and dropped). A gateway serves a group of ``--members`` users (1,000 by
default), each with a WebSocket open as in ``bench/fanout.py``; ``--rounds`` posts go to it one
after another. The scratch database logs every statement's duration
(``log_min_duration_statement = 0``, set on that database only), and the bench reads them back
from the server's log: per post, the post's function, the stream append (with the
notification rows), ``COMMIT`` and the rest, beside POST → last receipt from the client.

The server's log must be readable here: ``--log FILE`` names it (the embedded PostgreSQL's is
``log`` in its data folder, which is the default when ``CONFER_BENCH_DATABASE_URL`` addresses
it by socket folder). ``CONFER_BENCH_CHECKOUT=DIR`` measures another checkout's code. Loops are
bounded; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import httpx
from checkout import CHECKOUT, write_json
from fanout import (
    ACCESS_TOKEN_TTL,
    SERVER,
    close_all,
    free_port,
    open_sockets,
    process,
    receive_until,
    register,
    scratch_database,
    wait_http,
)

DURATION = re.compile(
    r"duration: ([0-9.]+) ms\s+(statement|parse|bind|execute)[^:]*:(.*)", re.DOTALL
)
ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d", re.MULTILINE)


def default_log() -> Path | None:
    url = os.environ.get("CONFER_BENCH_DATABASE_URL", "")
    host = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get("host")
    return Path(host[0]) / "log" if host else None


def kind(statement: str) -> str:
    if "confer_post_message(" in statement:
        return "post function"
    if "INSERT INTO user_events" in statement or "INSERT INTO user_streams" in statement:
        return "stream append"
    if statement.strip().rstrip(";").upper() == "COMMIT":
        return "COMMIT"
    if statement.strip().rstrip(";").upper() == "BEGIN":
        return "BEGIN"
    return "other"


def on_cpu_ns(pid: int) -> int:
    """Nanoseconds process ``pid`` has run on a CPU (``/proc/PID/schedstat``; 0 once gone):
    unlike wall time, not inflated by waiting for a CPU on a busy machine."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def postgres_pids(data_dir: Path) -> list[int]:
    """The embedded PostgreSQL's postmaster and every process it started."""
    try:
        postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return []
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == postmaster:
                pids.append(int(entry.name))
    return pids


def cpu_snapshot(server: int, data_dir: Path) -> dict[str, dict[int, int]]:
    return {
        "gateway": {server: on_cpu_ns(server)},
        "postgres": {pid: on_cpu_ns(pid) for pid in postgres_pids(data_dir)},
    }


def cpu_spent(
    before: dict[str, dict[int, int]], after: dict[str, dict[int, int]]
) -> dict[str, float]:
    """CPU ms per process group between two snapshots (processes started between them count
    from 0)."""
    return {
        group: sum(ns - before[group].get(pid, 0) for pid, ns in after[group].items()) / 1e6
        for group in after
    }


def participants_query() -> str:
    """The post function's read of the participants (migration 0030), as a query of its own."""
    source = (CHECKOUT / "alembic" / "versions" / "0030_post_function.py").read_text()
    body = source.split("participants := ARRAY(", 1)[1].split(");\n    END", 1)[0]
    return body.replace("_conversation_id", "$1")


async def explain(url: str, cid: str) -> None:
    """Print the plan and timing of the post function's participants read."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        query = participants_query()
        for _ in range(3):  # warm
            await conn.fetch(query, cid)
        plan = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + query, cid)
        print("\n".join(r[0] for r in plan))
        for _ in range(2):
            start = time.perf_counter()
            rows = await conn.fetch(query, cid)
            took = (time.perf_counter() - start) * 1000
            print(f"participants read: {len(rows)} rows in {took:.1f} ms")
    finally:
        await conn.close()


async def main(args: argparse.Namespace) -> None:
    log = Path(args.log) if args.log else default_log()
    if log is None or not log.exists():
        raise SystemExit("name the PostgreSQL server's log with --log")
    async with scratch_database() as url:
        import asyncpg

        name = url.rpartition("/")[2].partition("?")[0]
        conn = await asyncpg.connect(url)
        await conn.execute(f'ALTER DATABASE "{name}" SET log_min_duration_statement = 0')
        await conn.close()
        port = free_port()
        env = {
            "CONFER_DATABASE_URL": url,
            "CONFER_PORT": str(port),
            "CONFER_PUBLIC_URL": f"http://localhost:{port}",
            "CONFER_MIGRATE_ON_START": "false",
            "CONFER_DB_POOL_MAX": "20",
            "CONFER_WS_QUEUE_SIZE": "1024",
            "CONFER_MAX_GROUP_MEMBERS": str(args.members),
            "CONFER_ACCESS_TOKEN_TTL_SECONDS": str(ACCESS_TOKEN_TTL),
        }
        async with process(SERVER, env=env) as server_pid:
            base = f"http://127.0.0.1:{port}"
            await wait_http(base + "/healthz")
            users = await register(
                url, env["CONFER_PUBLIC_URL"], [f"u{i:05d}" for i in range(args.members)]
            )
            owner, members = users[0], users[1:]
            headers = {"Authorization": f"Bearer {owner['access_token']}"}
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:
                group = await client.post(
                    "/v1/conversations",
                    json={
                        "type": "group",
                        "name": "bench",
                        "participant_dids": [u["user"]["did"] for u in members],
                    },
                    headers=headers,
                )
                group.raise_for_status()
                cid = group.json()["id"]
                sockets = await open_sockets(
                    base.replace("http", "ws") + "/v1/ws", [u["access_token"] for u in users]
                )
                await asyncio.sleep(1.0)
                for i in range(args.warmup):  # fill the per-process caches, plans
                    text = f"warm-{i}-{uuid.uuid4().hex}"
                    waiting = asyncio.ensure_future(receive_until(sockets, text))
                    r = await client.post(
                        f"/v1/conversations/{cid}/messages", json={"content": text}, headers=headers
                    )
                    r.raise_for_status()
                    await waiting
                await asyncio.sleep(0.5)
                offset = log.stat().st_size
                cpu_before = cpu_snapshot(server_pid, log.parent)
                latencies = []
                for i in range(args.rounds):
                    text = f"fanout-{i}-{uuid.uuid4().hex}"
                    waiting = asyncio.ensure_future(receive_until(sockets, text))
                    start = time.perf_counter()
                    r = await client.post(
                        f"/v1/conversations/{cid}/messages", json={"content": text}, headers=headers
                    )
                    r.raise_for_status()
                    times = await waiting
                    latencies.append((max(times) - start) * 1000)
                    await asyncio.sleep(0.2)  # let the bench's own reads settle between posts
                cpu = cpu_spent(cpu_before, cpu_snapshot(server_pid, log.parent))
                await close_all(sockets)
            if args.explain:
                await explain(url, cid)
        await asyncio.sleep(0.5)
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
    per_kind: dict[str, list[float]] = {}
    others: dict[str, int] = {}
    # one post's statement is one entry per protocol phase (parse, bind, execute), each of
    # them possibly several lines long: a statement's time is the sum of its phases
    for entry in ENTRY.split(text):
        match = DURATION.search(entry)
        if match is None:
            continue
        phase, statement = match.group(2), match.group(3)
        per_kind.setdefault(f"{kind(statement)}:{phase}", []).append(float(match.group(1)))
        if args.others and kind(statement) == "other":
            key = " ".join(statement.split())[:100]
            others[key] = others.get(key, 0) + 1
    appends = per_kind.get("stream append:execute", [])
    if len(appends) != args.rounds:
        print(f"note: {len(appends)} stream appends logged for {args.rounds} posts")
    rows = [
        f"| {args.members} members, {args.rounds} posts | median ms | p90 ms | statements |",
        "|---|---:|---:|---:|",
    ]
    result: dict[str, Any] = {"members": args.members, "rounds": args.rounds}
    for name in sorted(per_kind):
        values = per_kind.get(name, [])
        if not values:
            continue
        med = statistics.median(values)
        p90 = sorted(values)[int(0.9 * (len(values) - 1))]
        rows.append(f"| {name} (server) | {med:.2f} | {p90:.2f} | {len(values)} |")
        result[name] = {"median_ms": med, "p90_ms": p90, "count": len(values)}
    med = statistics.median(latencies)
    rows.append(
        f"| POST → last receipt (client) | {med:.1f} | "
        f"{sorted(latencies)[int(0.9 * (len(latencies) - 1))]:.1f} | |"
    )
    result["post_to_last_ms"] = med
    for group, ms in cpu.items():
        per_post = ms / args.rounds
        rows.append(
            f"| {group} CPU per post (on CPU, incl. the 0.2 s pauses) | {per_post:.1f} | | |"
        )
        result[f"{group}_cpu_ms_per_post"] = per_post
    print("\n".join(rows))
    for key, count in sorted(others.items(), key=lambda kv: -kv[1])[:15]:
        print(f"{count:6d}  {key}")
    write_json(args.json, result)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--log", help="the PostgreSQL server's log file")
    parser.add_argument("--explain", action="store_true", help="also explain the participants read")
    parser.add_argument("--others", action="store_true", help="list the other statements")
    parser.add_argument("--json", help="also write the figures to this file")
    asyncio.run(main(parser.parse_args()))
