"""Concept search latency with and without ``contested``, on a large concept graph.

The semantic-memory spec promises that ``contested`` (one aggregate query per batch, never the
subgraph) leaves search throughput alone; this measures it. A scratch database is created on the
PostgreSQL ``bench/databases.py`` picks (CONFER_BENCH_DATABASE_URL, the local server or the
embedded one), migrated, and dropped afterwards. One Confer instance runs in this process; one
user's main agent gets ``--concepts`` concepts (10 % archived, random words in names and
descriptions, several domains and projects) and ``--relations`` relations among them (a fifth of
them ``contradicts`` or ``supersedes``, so many hits are contested), bulk-loaded with COPY.

Then ``--queries`` full-text searches (limit 10, the MCP default) run through the search
service (:func:`gateway.services.concepts.search`) with ``contested`` on and off, alternating
so drift hits both alike, and again over REST (``GET /v1/concepts/search``, ``contested=false``
skipping the check). Printed: p50/p99 of each, the ratio with/without measured in this run, and
the contested query's own latency.

Usage: python bench/concepts.py [--concepts 10000] [--relations 50000] [--queries 300]
Clients and server share one process and event loop: compare runs, not deployments.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fanout import percentile, scratch_database  # noqa: E402  (bench/ is on the path)

from gateway.ids import new_id  # noqa: E402
from gateway.services import concepts as concept_service  # noqa: E402
from gateway.services.concept_weight import fold  # noqa: E402
from gateway.store import concepts as concept_store  # noqa: E402
from gateway.store import users as users_store  # noqa: E402
from tests.gateway.harness import Instance, run_instance  # noqa: E402

KINDS = ["depends_on", "refines", "related_to", "contradicts", "supersedes"]
KIND_WEIGHTS = [40, 20, 20, 10, 10]
TYPES = ["principle", "pattern", "event"]
SUFFIXES = ["", "ing", "er", "able", "less", "wise", "ful", "ism", "ity", "ward", "ness"]
SUFFIXES += [f"{c}x" for c in "abcdefghijklmnopqrstuvwxyz"]
STEMS = ("cache", "queue", "retry", "schema", "token", "session", "index", "stream")
VOCABULARY = [f"{a}{b}" for a in STEMS for b in SUFFIXES]  # 296 words, ~1/100 of names each


async def load_graph(
    pool: asyncpg.Pool, user_id: str, agent_id: str, concepts: int, relations: int
) -> list[str]:
    """COPY ``concepts`` concepts and ``relations`` relations into the agent's graph; returns
    the concept ids."""
    rng = random.Random(42)
    now = datetime.now(UTC)
    ids = [new_id() for _ in range(concepts)]
    rows = []
    for i, concept_id in enumerate(ids):
        words = rng.sample(VOCABULARY, 3)
        name = f"{words[0]} {words[1]} {i}"
        weight = round(rng.uniform(0.5, 6.0), 3)
        status = "archived" if rng.random() < 0.1 else "active"
        description = " ".join(rng.sample(VOCABULARY, 8))
        projects = [f"project-{rng.randrange(20)}"]
        kind, seen = rng.choice(TYPES), rng.randrange(1, 20)
        head = (concept_id, user_id, agent_id, name, fold(name), kind, status, weight, now)
        rows.append((*head, weight, description, projects, seen, now, now, now))
    columns = (
        "id user_id agent_id name name_key type status weight weight_at peak_weight "
        "description projects occurrence_count last_seen_at created_at updated_at"
    ).split()
    edges: set[tuple[str, str, str]] = set()
    while len(edges) < relations:
        source, target = rng.sample(ids, 2)
        edges.add((source, target, rng.choices(KINDS, KIND_WEIGHTS)[0]))
    async with pool.acquire() as conn:
        await conn.copy_records_to_table("concepts", records=rows, columns=columns)
        domain_ids = [new_id() for _ in range(30)]
        await concept_store.ensure_domains(
            conn, agent_id=agent_id, slugs=[f"domain-{d}" for d in range(30)], new_ids=domain_ids
        )
        links = [(c, domain_ids[rng.randrange(30)]) for c in ids]
        await conn.copy_records_to_table(
            "concept_domain_links", records=links, columns=["concept_id", "domain_id"]
        )
        await conn.copy_records_to_table(
            "concept_relations",
            records=[(new_id(), agent_id, s, t, k, None, now) for s, t, k in edges],
            columns=["id", "agent_id", "source_id", "target_id", "kind", "notes", "created_at"],
        )
        await conn.execute("ANALYZE concepts, concept_relations, concept_domain_links")
    return ids


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


def line(label: str, values: list[float]) -> None:
    print(
        f"{label:<44} p50 {percentile(values, 0.5) * 1000:7.2f} ms   "
        f"p99 {percentile(values, 0.99) * 1000:7.2f} ms   (n={len(values)})"
    )


def ratio(label: str, with_: list[float], without: list[float]) -> None:
    p50 = percentile(with_, 0.5) / percentile(without, 0.5)
    p99 = percentile(with_, 0.99) / percentile(without, 0.99)
    print(f"{label:<44} p50 x{p50:.3f}   p99 x{p99:.3f}")


async def bench(instance: Instance, args: argparse.Namespace) -> None:
    owner = await instance.register("bench")
    state = instance.state
    async with state.pool.acquire() as conn:
        user = await users_store.get_user_by_username(conn, username="bench")
        agent = await users_store.get_main_agent(conn, user_id=user.id) if user else None
    assert user is not None and agent is not None
    started = time.perf_counter()
    ids = await load_graph(state.pool, user.id, agent.id, args.concepts, args.relations)
    print(
        f"loaded {args.concepts} concepts and {args.relations} relations "
        f"in {time.perf_counter() - started:.1f} s"
    )
    deps = concept_service.ConceptDeps(state.pool, state.context.embedder, state.clock)
    rng = random.Random(7)
    queries = [rng.choice(VOCABULARY) for _ in range(args.queries)]

    async def search(query: str, contested: bool) -> None:
        found = await concept_service.search(deps, user, query=query, contested=contested)
        assert found["concepts"] and not found["warnings"]

    for query in queries[:20]:  # warm the caches and the plans
        await search(query, True)
        await search(query, False)
    with_: list[float] = []
    without: list[float] = []
    hits = contested_hits = 0
    for query in queries:
        with_.append(await timed(lambda q=query: search(q, True)))  # type: ignore[misc]
        without.append(await timed(lambda q=query: search(q, False)))  # type: ignore[misc]
    for query in queries[:50]:
        found = await concept_service.search(deps, user, query=query)
        hits += len(found["concepts"])
        contested_hits += sum(c.contested.state == "contested" for c in found["concepts"])

    batch_ids = [rng.sample(ids, 10) for _ in range(args.queries)]
    alone: list[float] = []
    async with state.pool.acquire() as conn:
        for batch in batch_ids:
            alone.append(
                await timed(lambda b=batch: concept_store.list_challengers(conn, concept_ids=b))  # type: ignore[misc]
            )

    rest_with: list[float] = []
    rest_without: list[float] = []
    for query in queries:
        for flag, into in (("true", rest_with), ("false", rest_without)):
            params = {"query": query, "contested": flag}
            started = time.perf_counter()
            response = await owner.request("GET", "/v1/concepts/search", params=params)
            into.append(time.perf_counter() - started)
            assert response.status_code == 200, response.text

    print(
        f"hits per search: {hits / 50:.1f} (limit 10), contested among them: "
        f"{contested_hits / max(hits, 1):.0%}"
    )
    line("service search, contested on", with_)
    line("service search, contested off", without)
    ratio("service search, on / off", with_, without)
    line("contested query alone (10 concepts)", alone)
    line("GET /v1/concepts/search, contested=true", rest_with)
    line("GET /v1/concepts/search, contested=false", rest_without)
    ratio("REST search, on / off", rest_with, rest_without)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concepts", type=int, default=10_000)
    parser.add_argument("--relations", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    async with scratch_database() as url, run_instance(url, access_log="off") as instance:
        await bench(instance, args)


if __name__ == "__main__":
    asyncio.run(main())
