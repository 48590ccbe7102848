"""Scaling curves of Confer: how latency grows with members, stored rows, sockets and peers.

Run: ``python bench/curves.py [--quick] [--only members,stored,...] [--members 2,10,100]``.
PostgreSQL as :func:`bench.databases.admin_dsn` picks it (CONFER_BENCH_DATABASE_URL, the
local server, or the embedded one; scratch databases are created and dropped), NATS at
CONFER_BENCH_NATS_URL (default the local one; the NATS curve is skipped when it does not
answer). Every server is a real ``confer serve`` process on loopback.
Each curve is printed as a Markdown table and drawn into ``bench/out/<curve>.png``:

- ``members``: send (POST → 201) p50/p99 against members per group conversation;
- ``stored``: send p50/p99 against messages already stored in the conversation (rows seeded
  with one ``INSERT … SELECT generate_series``, not through the API);
- ``conversations``: send p50/p99 and the conversation list (``GET /v1/conversations``)
  against conversations per user (seeded the same way);
- ``sockets``: fan-out, POST → the last of N WebSocket clients' receipt, against N (the
  sockets are spread over up to 1,000 members of one group; the clients share this process);
- ``peers``: federation fan-out, POST on instance A → every member on N peer instances has it
  on their WebSocket (one ``confer serve`` and database per instance);
- ``nats``: POST → the recipient's socket on the same process vs on a second process of the
  same database, the two joined over NATS; the added p99 is the bus's cost.

``--quick`` uses short step lists and fewer rounds (what ``make bench`` runs); the defaults
go up to 1,000,000 stored messages, 10,000 conversations and sockets and 20 peers. A step
this machine cannot reach (open-file limit, PostgreSQL connection slots) is reported as
such, and the curve keeps what was reached. Loops are bounded; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.databases import admin_dsn, held_connection, scratch_database  # noqa: E402
from bench.fanout import (  # noqa: E402
    SERVER,
    free_port,
    open_sockets,
    percentile,
    raise_fd_limit,
    receive_until,
    register,
)
from bench.plots import draw, table  # noqa: E402

NATS_URL = os.environ.get("CONFER_BENCH_NATS_URL", "nats://127.0.0.1:4222")

FULL = {
    "members": [2, 10, 100, 1000],
    "stored": [0, 1_000, 10_000, 100_000, 1_000_000],
    "conversations": [1, 10, 100, 1_000, 10_000],
    "sockets": [100, 1_000, 10_000],
    "peers": [1, 2, 5, 10, 20],
}
QUICK = {
    "members": [2, 10, 100],
    "stored": [0, 1_000, 10_000, 100_000],
    "conversations": [1, 10, 100, 1_000],
    "sockets": [100, 1_000],
    "peers": [1, 2, 4],
}
CURVES = ("members", "stored", "conversations", "sockets", "peers", "nats")

SERVER_ENV = {
    "CONFER_HOST": "127.0.0.1",
    "CONFER_MIGRATE_ON_START": "false",
    "CONFER_LOG_LEVEL": "warning",
    "CONFER_DB_POOL_MIN": "1",
    "CONFER_DB_POOL_MAX": "8",
    "CONFER_MAX_GROUP_MEMBERS": "1001",  # participant_dids takes up to 1,000 besides the creator
    "CONFER_WS_MAX_CONNECTIONS_PER_USER": "100000",
    "CONFER_WS_QUEUE_SIZE": "1024",
    # Opening thousands of sockets from one client process outlasts a heartbeat: the first
    # ones, silent meanwhile, would be closed (4009) before the round that needs them.
    "CONFER_WS_PING_INTERVAL_SECONDS": "600",
    "CONFER_MESSAGE_REQUESTS_DEFAULT": "false",
    "CONFER_ALLOW_HTTP_DIDS": "true",
    "CONFER_ALLOW_PRIVATE_NETWORKS": "true",
    "CONFER_PEER_RATE_LIMIT_DOMAIN": "1000000/minute",
    "CONFER_PEER_RATE_LIMIT_AGENT": "1000000/minute",
}


def server_env(
    database_url: str, port: int, public_port: int | None = None, **extra: str
) -> dict[str, str]:
    """The environment of a bench ``confer serve`` on ``port`` over ``database_url``."""
    return {
        **SERVER_ENV,
        "CONFER_DATABASE_URL": database_url,
        "CONFER_PORT": str(port),
        "CONFER_PUBLIC_URL": f"http://localhost:{public_port or port}",
        **extra,
    }


@contextlib.asynccontextmanager
async def process(code: str, env: dict[str, str]) -> AsyncIterator[int]:
    """``python -c CODE`` (a server) with ``env`` on top of this environment, its output in a
    temporary file (the tables stay readable; the last lines are printed if it dies early);
    yields its pid, terminated (then killed) at exit."""
    log = tempfile.TemporaryFile()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, env={**os.environ, **env}, cwd=ROOT, stdout=log, stderr=log
    )
    try:
        yield proc.pid
    finally:
        if proc.returncode is not None:
            log.seek(0)
            print(log.read()[-2000:].decode(errors="replace"))
        else:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        log.close()


async def healthy(base: str, within: float = 180.0) -> None:
    """Wait until ``base/healthz`` answers 200 (a loaded machine starts Python slowly)."""
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(timeout=5) as client:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(base + "/healthz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{base} did not become healthy within {within:.0f} s")


def p50_p99(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), percentile(values, 0.99)


async def timed_ms(call: Callable[[], Awaitable[httpx.Response]]) -> float:
    start = time.perf_counter()
    response = await call()
    response.raise_for_status()
    return (time.perf_counter() - start) * 1000


def bearer(user: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {user['access_token']}"}


async def send_latencies(
    client: httpx.AsyncClient, user: dict[str, Any], cid: str, rounds: int
) -> list[float]:
    """``rounds`` sequential sends by ``user`` into ``cid``, each POST → 201 in ms, after one
    unmeasured send (the first into a conversation warms caches and statement plans)."""
    path = f"/v1/conversations/{cid}/messages"
    latencies = []
    for i in range(-1, rounds):
        body = {"content": f"c{i}"}
        post = functools.partial(client.post, path, json=body, headers=bearer(user))
        latencies.append(await timed_ms(post))
    return latencies[1:]


async def new_group(client: httpx.AsyncClient, owner: dict[str, Any], dids: list[str]) -> str:
    r = await client.post(
        "/v1/conversations",
        json={"type": "group", "name": "bench", "participant_dids": dids},
        headers=bearer(owner),
    )
    r.raise_for_status()
    return str(r.json()["id"])


async def new_direct(client: httpx.AsyncClient, owner: dict[str, Any], did: str) -> str:
    r = await client.post("/v1/conversations", json={"participant_did": did}, headers=bearer(owner))
    r.raise_for_status()
    return str(r.json()["id"])


# ---- seeding: bulk SQL, the schema's own columns, ids that sort before real ULIDs -------------

SEED_MESSAGES = """
INSERT INTO messages (id, conversation_id, sender_type, sender_id, sender_did, content_type,
                      content, created_at, updated_at)
SELECT '00' || lpad(($2::bigint + g)::text, 24, '0'), m.conversation_id, m.sender_type,
       m.sender_id, m.sender_did, m.content_type, 'seeded ' || g,
       m.created_at - make_interval(secs => ($3::bigint - g) / 1000.0), m.created_at
FROM generate_series(1, $3::bigint) AS g,
     (SELECT * FROM messages WHERE conversation_id = $1 ORDER BY id DESC LIMIT 1) AS m
"""

SEED_CONVERSATIONS = """
WITH made AS (
    INSERT INTO conversations (id, type, name, created_by, created_at, updated_at)
    SELECT '0Z' || lpad(($2::bigint + g)::text, 24, '0'), c.type, c.name, c.created_by,
           c.created_at, c.updated_at
    FROM generate_series(1, $3::bigint) AS g, conversations AS c WHERE c.id = $1
    RETURNING id
)
INSERT INTO conversation_participants (id, conversation_id, participant_type, user_id, agent_id,
                                       peer_id, role, joined_at, notification)
SELECT '0Y' || lpad(((SELECT count(*) FROM conversation_participants)
                     + row_number() OVER ())::text, 24, '0'),
       made.id, p.participant_type, p.user_id, p.agent_id, p.peer_id, p.role, p.joined_at,
       p.notification
FROM made, conversation_participants AS p WHERE p.conversation_id = $1
"""


async def seed(conn: asyncpg.Connection, sql: str, *args: Any) -> float:
    """Run one seeding statement with triggers off (search indexing); seconds it took."""
    start = time.perf_counter()
    async with conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute(sql, *args)
    await conn.execute("ANALYZE messages, conversations, conversation_participants")
    return time.perf_counter() - start


# ---- the curves ---------------------------------------------------------------------------


async def curve_members(
    base: str, users: list[dict[str, Any]], steps: list[int], rounds: int
) -> list[list[Any]]:
    rows = []
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        for n in steps:
            cid = await new_group(client, users[0], [u["user"]["did"] for u in users[1:n]])
            p50, p99 = p50_p99(await send_latencies(client, users[0], cid, rounds))
            rows.append([n, p50, p99])
            print(f"  members {n}: send p50 {p50:.1f} ms, p99 {p99:.1f} ms", flush=True)
    return rows


async def curve_stored(
    base: str, database_url: str, users: list[dict[str, Any]], steps: list[int], rounds: int
) -> list[list[Any]]:
    rows = []
    async with (
        held_connection(database_url) as conn,
        httpx.AsyncClient(base_url=base, timeout=60) as client,
    ):
        cid = await new_direct(client, users[0], users[1]["user"]["did"])
        await send_latencies(client, users[0], cid, 1)  # the row seeding copies
        stored = 0
        for n in steps:
            took = 0.0
            if n > stored:
                took = await seed(conn, SEED_MESSAGES, cid, stored, n - stored)
                stored = n
            p50, p99 = p50_p99(await send_latencies(client, users[0], cid, rounds))
            rows.append([n, p50, p99, took])
            print(
                f"  stored {n:,}: send p50 {p50:.1f} ms, p99 {p99:.1f} ms (seeded in {took:.1f} s)",
                flush=True,
            )
    return rows


async def curve_conversations(
    base: str, database_url: str, users: list[dict[str, Any]], steps: list[int], rounds: int
) -> list[list[Any]]:
    rows = []
    owner, other = users[2], users[3]
    async with (
        held_connection(database_url) as conn,
        httpx.AsyncClient(base_url=base, timeout=60) as client,
    ):
        cid = await new_group(client, owner, [other["user"]["did"]])
        have = 1
        for n in steps:
            if n > have:
                await seed(conn, SEED_CONVERSATIONS, cid, have, n - have)
                have = n
            send50, send99 = p50_p99(await send_latencies(client, owner, cid, rounds))
            listing = [
                await timed_ms(lambda: client.get("/v1/conversations", headers=bearer(owner)))
                for _ in range(rounds)
            ]
            list50, list99 = p50_p99(listing)
            rows.append([n, send50, send99, list50, list99])
            print(
                f"  conversations {n:,}: send p50 {send50:.1f} / p99 {send99:.1f} ms, "
                f"list p50 {list50:.1f} / p99 {list99:.1f} ms",
                flush=True,
            )
    return rows


async def fanout_round(
    client: httpx.AsyncClient, owner: dict[str, Any], cid: str, sockets: list[Any]
) -> float:
    """One POST into ``cid`` → the last socket's receipt, in ms."""
    text = f"fanout-{uuid.uuid4().hex}"
    waiting = asyncio.ensure_future(receive_until(sockets, text))
    start = time.perf_counter()
    r = await client.post(
        f"/v1/conversations/{cid}/messages", json={"content": text}, headers=bearer(owner)
    )
    r.raise_for_status()
    return (max(await waiting) - start) * 1000


async def curve_sockets(
    base: str, users: list[dict[str, Any]], steps: list[int], rounds: int
) -> list[list[Any]]:
    limit = raise_fd_limit(max(steps) + 2000)
    rows = []
    members = users[: min(len(users), 1000)]
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        cid = await new_group(client, members[0], [u["user"]["did"] for u in members[1:]])
        for n in steps:
            if n + 500 > limit:  # this process holds n sockets, the server (its own limit) n
                print(f"  sockets {n:,}: not reached (open-file limit {limit:,})", flush=True)
                continue
            tokens = [members[i % len(members)]["access_token"] for i in range(n)]
            try:
                sockets = await open_sockets(base.replace("http", "ws") + "/v1/ws", tokens)
            except OSError as exc:
                print(f"  sockets {n:,}: not reached ({exc})", flush=True)
                continue
            try:
                await asyncio.sleep(1.0)
                latencies = [
                    await fanout_round(client, members[0], cid, sockets) for _ in range(rounds)
                ]
            finally:
                await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
            p50, p99 = p50_p99(latencies)
            rows.append([n, p50, p99, n / (p50 / 1000)])
            print(
                f"  sockets {n:,}: POST → last receipt p50 {p50:.1f} ms, p99 {p99:.1f} ms",
                flush=True,
            )
    return rows


async def curve_peers(admin: str, steps: list[int], rounds: int) -> list[list[Any]]:
    """Instance A and ``max(steps)`` peers, each its own database and one user; per step a
    group on A with the first N peers' users, POST → the last of them has it on its socket."""
    wanted = max(steps)
    async with contextlib.AsyncExitStack() as stack:
        bases: list[str] = []
        people: list[dict[str, Any]] = []
        template = await stack.enter_async_context(scratch_database(admin))

        async def start(index: int) -> None:
            url = await stack.enter_async_context(scratch_database(admin, template=template))
            port = free_port()
            public = f"http://localhost:{port}"
            user = (await register(url, public, [f"peer{index}"]))[0]
            await stack.enter_async_context(process(SERVER, env=server_env(url, port)))
            await healthy(f"http://127.0.0.1:{port}")
            bases.append(f"http://127.0.0.1:{port}")
            people.append(user)

        try:
            for i in range(wanted + 1):  # started one by one: a loaded machine, few slots
                await start(i)
        except (OSError, RuntimeError, asyncpg.PostgresError) as exc:
            print(f"  peers: started {max(0, len(bases) - 1)} of {wanted} ({exc})", flush=True)
        if len(bases) < 2:
            return []
        reached = [n for n in steps if n <= len(bases) - 1]
        rows = []
        origin, owner = bases[0], people[0]
        async with httpx.AsyncClient(base_url=origin, timeout=60) as client:
            for n in reached:
                cid = await new_group(client, owner, [p["user"]["did"] for p in people[1 : n + 1]])
                sockets = [
                    (await open_sockets(b.replace("http", "ws") + "/v1/ws", [p["access_token"]]))[0]
                    for b, p in zip(bases[1 : n + 1], people[1 : n + 1], strict=True)
                ]
                try:
                    await fanout_round(client, owner, cid, sockets)  # first contact: DID fetches
                    latencies = [
                        await fanout_round(client, owner, cid, sockets) for _ in range(rounds)
                    ]
                finally:
                    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
                p50, p99 = p50_p99(latencies)
                rows.append([n, p50, p99])
                print(
                    f"  peers {n}: POST on A → last peer's socket p50 {p50:.1f} ms, "
                    f"p99 {p99:.1f} ms",
                    flush=True,
                )
    return rows


async def curve_nats(admin: str, rounds: int) -> list[list[Any]]:
    """One database, two processes sharing NATS; alice posts on the first, bob has a socket on
    each: per send, POST → bob's socket on the same process and on the other one."""
    from tests.gateway.harness import nats_task_queue, reachable

    if not reachable(NATS_URL):
        print(f"  nats: skipped, no NATS at {NATS_URL}", flush=True)
        return []
    async with scratch_database(admin) as url, nats_task_queue(nats_url=NATS_URL) as queue:
        public = free_port()
        alice, bob = await register(url, f"http://localhost:{public}", ["alice", "bob"])
        extra = {f"CONFER_{k.upper()}": str(v) for k, v in queue.items()}
        ports = free_port(), free_port()
        async with (
            process(SERVER, env=server_env(url, ports[0], public, **extra)),
            process(SERVER, env=server_env(url, ports[1], public, **extra)),
        ):
            bases = [f"http://127.0.0.1:{p}" for p in ports]
            await asyncio.gather(*(healthy(b) for b in bases))
            async with httpx.AsyncClient(base_url=bases[0], timeout=60) as client:
                cid = await new_direct(client, alice, bob["user"]["did"])
                # bob on both processes at once: each send reaches both sockets, so the two
                # figures come from the same sends under the same load
                sockets = [
                    (await open_sockets(b.replace("http", "ws") + "/v1/ws", [bob["access_token"]]))[
                        0
                    ]
                    for b in bases
                ]
                same: list[float] = []
                other: list[float] = []
                try:
                    for i in range(-1, rounds):  # one unmeasured round first
                        text = f"nats-{uuid.uuid4().hex}"
                        waiting = asyncio.ensure_future(receive_until(sockets, text))
                        start = time.perf_counter()
                        post = client.post(
                            f"/v1/conversations/{cid}/messages",
                            json={"content": text},
                            headers=bearer(alice),
                        )
                        (await post).raise_for_status()
                        here, there = await waiting
                        if i >= 0:
                            same.append((here - start) * 1000)
                            other.append((there - start) * 1000)
                finally:
                    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    rows: list[list[Any]] = []
    for label, values in (("same process", same), ("other process (NATS)", other)):
        p50, p99 = p50_p99(values)
        rows.append([label, p50, p99])
        print(
            f"  nats, {label}: POST → bob's socket p50 {p50:.1f} ms, p99 {p99:.1f} ms", flush=True
        )
    return rows


# ---- reporting ----------------------------------------------------------------------------


def report(curve: str, rows: list[list[Any]]) -> None:
    if not rows:
        return
    xs = [row[0] for row in rows]
    if curve == "members":
        print(table("send against members per conversation", ["members", "p50 ms", "p99 ms"], rows))
        draw(
            curve,
            "Send latency vs members",
            "members per conversation",
            xs,
            {"p50": [r[1] for r in rows], "p99": [r[2] for r in rows]},
        )
    elif curve == "stored":
        print(
            table(
                "send against stored messages in the conversation",
                ["stored messages", "p50 ms", "p99 ms", "seeding s"],
                rows,
            )
        )
        draw(
            curve,
            "Send latency vs stored messages",
            "messages stored in the conversation",
            [max(x, 1) for x in xs],
            {"p50": [r[1] for r in rows], "p99": [r[2] for r in rows]},
        )
    elif curve == "conversations":
        print(
            table(
                "send and list against conversations per user",
                ["conversations", "send p50 ms", "send p99 ms", "list p50 ms", "list p99 ms"],
                rows,
            )
        )
        draw(
            curve,
            "Latency vs conversations per user",
            "conversations of the user",
            xs,
            {
                "send p50": [r[1] for r in rows],
                "send p99": [r[2] for r in rows],
                "list p50": [r[3] for r in rows],
                "list p99": [r[4] for r in rows],
            },
        )
    elif curve == "sockets":
        print(
            table(
                "fan-out against WebSocket clients",
                ["sockets", "p50 ms", "p99 ms", "deliveries/s at p50"],
                rows,
            )
        )
        draw(
            curve,
            "Fan-out: POST → last socket",
            "WebSocket clients",
            xs,
            {"p50": [r[1] for r in rows], "p99": [r[2] for r in rows]},
        )
    elif curve == "peers":
        print(
            table("federation fan-out against peer instances", ["peers", "p50 ms", "p99 ms"], rows)
        )
        draw(
            curve,
            "Federation: POST on A → last peer's socket",
            "peer instances",
            xs,
            {"p50": [r[1] for r in rows], "p99": [r[2] for r in rows]},
        )
    elif curve == "nats":
        rows = (
            [
                *rows,
                ["added by the second process", rows[1][1] - rows[0][1], rows[1][2] - rows[0][2]],
            ]
            if len(rows) == 2
            else rows
        )
        print(
            table(
                "send → recipient's socket, one process vs two over NATS",
                ["recipient's socket on", "p50 ms", "p99 ms"],
                rows,
            )
        )
        draw(
            curve,
            "POST → recipient's socket: same process vs other (NATS)",
            "",
            [0, 1],
            {"p50": [r[1] for r in rows[:2]], "p99": [r[2] for r in rows[:2]]},
            logx=False,
            categories=[r[0] for r in rows[:2]],
        )
    print(flush=True)


async def measured(curve: str, run: Awaitable[list[list[Any]]]) -> None:
    """Run one curve, then print its table and draw its PNG at once (a later curve that this
    machine cannot run does not take the earlier ones with it); a failure is printed."""
    print(f"{curve}:", flush=True)
    try:
        rows = await run
    except (
        OSError,
        RuntimeError,
        TimeoutError,
        httpx.HTTPError,
        asyncpg.PostgresError,
        websockets.ConnectionClosed,
    ) as exc:
        print(f"  {curve}: not measured ({type(exc).__name__}: {exc})", flush=True)
        return
    print()
    report(curve, rows)


async def main(args: argparse.Namespace) -> None:
    defaults = QUICK if args.quick else FULL
    steps = {name: getattr(args, name) or defaults[name] for name in FULL}
    rounds = args.rounds or (10 if args.quick else 50)
    only = args.only.split(",") if args.only else list(CURVES)
    admin = await asyncio.to_thread(admin_dsn)
    single = [c for c in ("members", "stored", "conversations", "sockets") if c in only]
    if single:
        async with scratch_database(admin) as url:
            port = free_port()
            users_wanted = max(
                4,
                max(steps["members"]) if "members" in single else 0,
                min(max(steps["sockets"]), 1000) if "sockets" in single else 0,
            )
            started = time.perf_counter()
            users = await register(
                url, f"http://localhost:{port}", [f"u{i:05d}" for i in range(users_wanted)]
            )
            print(
                f"registered {len(users)} users in {time.perf_counter() - started:.1f} s",
                flush=True,
            )
            if "sockets" in single:  # before the server starts: it inherits the limit
                raise_fd_limit(max(steps["sockets"]) + 2000)
            async with process(SERVER, env=server_env(url, port)):
                base = f"http://127.0.0.1:{port}"
                await healthy(base)
                runs = {
                    "members": lambda: curve_members(base, users, steps["members"], rounds),
                    "stored": lambda: curve_stored(base, url, users, steps["stored"], rounds),
                    "conversations": lambda: curve_conversations(
                        base, url, users, steps["conversations"], rounds
                    ),
                    "sockets": lambda: curve_sockets(base, users, steps["sockets"], rounds),
                }
                for curve in single:
                    await measured(curve, runs[curve]())
    if "peers" in only:
        await measured("peers", curve_peers(admin, steps["peers"], rounds))
    if "nats" in only:
        await measured("nats", curve_nats(admin, rounds))


def step_list(text: str) -> list[int]:
    return [int(part.replace("_", "")) for part in text.split(",") if part]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="short step lists, 10 rounds")
    parser.add_argument("--only", help=f"comma-separated curves of {', '.join(CURVES)}")
    parser.add_argument("--rounds", type=int, help="sends per step (default 50, quick 10)")
    for name, values in FULL.items():
        parser.add_argument(
            f"--{name}", type=step_list, help=f"steps (default {','.join(map(str, values))})"
        )
    asyncio.run(main(parser.parse_args()))
