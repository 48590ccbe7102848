"""The performance issue's table: each of its figures before and after, from one run.

Run: ``python bench/table.py --baseline DIR [--quick] [--synapse] [--json FILE]`` (or
``make bench-table BASELINE=DIR``). ``DIR`` is another checkout (a ``git worktree`` of the
commit to compare with). The benches ``startup.py``, ``send.py``, ``fanout.py``,
``roundtrip.py`` and ``federation.py`` of *this* checkout run one after the other, each bench
alternately against ``DIR`` ("before") and this checkout ("after"), every run a process of its
own started with ``CONFER_BENCH_CHECKOUT`` (``bench/checkout.py``): its servers, the
migrations of its scratch databases and its in-process set-up are that checkout's code, so an
older tree is measured on its own schema. ``startup.py`` runs once, with ``--baseline DIR``
(each checkout started from its own database, migrated by its own code), so that its starts of
the two trees alternate run by run: a start takes about a second, and the load of a shared
machine moves more than that between two bench runs. Each writes its figures with
``--json``; this script reads them and prints the issue's rows, with "before", "after" and
"after ÷ before" (a mean over the rounds when a bench runs more than once), plus the memory per
idle connection at the larger connection count. The benches' own output goes to
``bench/out/table/<bench>-<side>-<round>.log``.

The full run takes about 15–25 minutes on a 2-core machine; ``--quick`` (smaller loads, fewer
runs, the same rows: the labels say the sizes) 5–10. ``--synapse`` also runs
``bench/synapse_side_by_side.py`` (which installs Synapse into a venv of its own on first use)
and adds Synapse's figures and Confer ÷ Synapse from that run. PostgreSQL as
``bench/databases.py`` picks it; the machine may be shared, so compare the ratios of one run.
Loopback only; every bench run is bounded by ``--timeout``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkout import ROOT
from databases import admin_dsn

BENCH = ROOT / "bench"
LOGS = BENCH / "out" / "table"

Figures = dict[str, Any]


@dataclass(frozen=True)
class Bench:
    """One bench script and its arguments at full size and with ``--quick``."""

    name: str
    full: list[str]
    quick: list[str]
    rounds: int = 1  # runs per side at full size (--quick: one)
    alternates: bool = False  # one run with --baseline, alternating the sides run by run


# Sized so that both sides together take 15–25 minutes on 2 cores; the rows fix the
# loads (16 in flight, 50 and 1,000 sockets, 5,000 idle connections, 8 senders × 1,000).
BENCHES = [
    Bench("startup", "--runs 7".split(), "--runs 3".split(), alternates=True),
    Bench("send", "--posts 2000 --rounds 1".split(), "--posts 400 --rounds 1".split(), 2),
    Bench(
        "fanout",
        "--clients 1000 --sizes 50,1000 --rounds 20 --sends 400 --connections 5000,10000".split(),
        "--clients 1000 --sizes 50,1000 --rounds 5 --sends 100 --connections 2000,4000".split(),
    ),
    Bench(
        "roundtrip",
        "--messages 0 --load 1000 --batches on".split(),
        "--messages 0 --load 200 --batches on".split(),
    ),
    Bench("federation", "--calls 600".split(), "--calls 150".split()),
]


def _option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def _fanout(figures: Figures, clients: int) -> Figures:
    """The Confer side of ``fanout.py``'s fan-out to ``clients`` sockets."""
    return next(f["confer"] for f in figures["fanout"] if f["confer"]["clients"] == clients)


def _memory(figures: Figures, index: int) -> float:
    return float(figures["memory"][index]["kib_per_connection"])


@dataclass(frozen=True)
class Row:
    """One row of the table: ``figures`` reads its numbers from a bench's JSON, ``text``
    formats them (``str.format`` fields ``{0}``, ``{1}`` …); ``ratios`` picks those divided."""

    label: str
    bench: str
    figures: Callable[[Figures], list[float]]
    text: str
    ratios: tuple[int, ...] | None = None  # None: every figure


def rows(plan: dict[str, list[str]]) -> list[Row]:
    """The issue's rows, labelled with the sizes ``plan`` (bench name → arguments) runs."""
    fan, trip = plan["fanout"], plan["roundtrip"]
    small, large = (int(n) for n in _option(fan, "--sizes").split(","))
    idle, more = (int(n) for n in _option(fan, "--connections").split(","))
    load = int(_option(trip, "--load"))
    return [
        Row(
            "sends/s, one sender, 16 in flight, one conversation",
            "send",
            lambda f: [f["this"]["posts_per_s"]],
            "{0:,.0f}",
        ),
        Row(
            "send p50 / p99",
            "send",
            lambda f: [f["this"]["p50_ms"], f["this"]["p99_ms"]],
            "{0:,.0f} / {1:,.0f} ms",
        ),
        Row("server CPU per send", "send", lambda f: [f["this"]["cpu_ms_per_post"]], "{0:.1f} ms"),
        Row(
            f"fan-out to {small} sockets: deliveries/s, last receiver p99",
            "fanout",
            lambda f: [_fanout(f, small)["deliveries_per_s"], _fanout(f, small)["p99_ms"]],
            "{0:,.0f}, {1:,.0f} ms",
        ),
        Row(
            f"fan-out to {large:,} sockets (`bench/fanout.py`)",
            "fanout",
            lambda f: [_fanout(f, large)["deliveries_per_s"], _fanout(f, large)["p99_ms"]],
            "{0:,.0f}/s, p99 {1:,.0f} ms",
        ),
        Row(
            f"RSS per idle authenticated connection ({idle:,} open)",
            "fanout",
            lambda f: [_memory(f, 0)],
            "{0:.1f} KiB",
        ),
        Row(
            f"RSS per idle authenticated connection ({more:,} open)",
            "fanout",
            lambda f: [_memory(f, 1)],
            "{0:.1f} KiB",
        ),
        Row(
            f"federation A → B, 8 senders, {load:,} messages",
            "roundtrip",
            lambda f: [
                f["batches_on"]["messages_per_s"],
                f["batches_on"]["p50_ms"] / 1000,
                f["batches_on"]["p99_ms"] / 1000,
            ],
            "{0:.0f} msg/s; post → peer socket p50 {1:.2f} s, p99 {2:.2f} s",
        ),
        Row(
            "signed ÷ unsigned A2A round trips",
            "federation",
            lambda f: [f["signed_over_unsigned"]],
            "{0:.2f}",
        ),
        Row(
            "`confer serve` to first healthy answer",
            "startup",
            lambda f: [
                f["this checkout"]["wall_p50_s"],
                f["this checkout"]["wall_min_s"],
                f["this checkout"]["wall_max_s"],
                f["this checkout"]["cpu_p50_s"],
            ],
            # the CPU seconds say how much of the wall time was the machine's other load
            "p50 {0:.2f} s ({1:.2f}–{2:.2f} s), CPU p50 {3:.2f} s",
            ratios=(0, 3),
        ),
    ]


def run_bench(
    bench: Bench, args: list[str], checkout: Path, side: str, round_no: int, timeout: float
) -> Figures:
    """Run one bench against ``checkout`` in a process of its own; its ``--json`` figures."""
    LOGS.mkdir(parents=True, exist_ok=True)
    stem = f"{bench.name}-{side}-{round_no}"
    figures_file, log_file = LOGS / f"{stem}.json", LOGS / f"{stem}.log"
    figures_file.unlink(missing_ok=True)
    admin = admin_dsn()
    env = {
        **os.environ,
        "CONFER_BENCH_CHECKOUT": str(checkout),
        "PYTHONPATH": str(checkout),
        "CONFER_BENCH_DATABASE_URL": admin,
        # roundtrip.py and federation.py take their admin database from these
        "CONFER_DATABASE_URL": admin,
        "CONFER_TEST_DATABASE_URL": admin,
    }
    command = [sys.executable, "-u", str(BENCH / f"{bench.name}.py"), *args]
    started = time.perf_counter()
    with log_file.open("wb") as log:
        result = subprocess.run(
            [*command, "--json", str(figures_file)],
            env=env,
            cwd=checkout,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
    took = time.perf_counter() - started
    if result.returncode != 0 or not figures_file.exists():
        tail = log_file.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{bench.name} ({side}, {checkout}) exited {result.returncode}:\n{tail}")
    print(f"{bench.name} {side} round {round_no}: {took:.0f} s (log: {log_file})", flush=True)
    figures: Figures = json.loads(figures_file.read_text())
    return figures


def measure(
    checkouts: dict[str, Path], quick: bool, timeout: float
) -> dict[str, dict[str, list[Figures]]]:
    """Every bench, each side in turn (before first); figures by bench, then by side."""
    results: dict[str, dict[str, list[Figures]]] = {}
    for bench in BENCHES:
        results[bench.name] = {side: [] for side in checkouts}
        if bench.alternates:
            args = [*(bench.quick if quick else bench.full), "--baseline", str(checkouts["before"])]
            both = run_bench(bench, args, checkouts["after"], "both", 1, timeout)
            results[bench.name]["before"].append({"this checkout": both["baseline"]})
            results[bench.name]["after"].append({"this checkout": both["this checkout"]})
            continue
        for round_no in range(1, (1 if quick else bench.rounds) + 1):
            for side, checkout in checkouts.items():
                args = bench.quick if quick else bench.full
                figures = run_bench(bench, args, checkout, side, round_no, timeout)
                results[bench.name][side].append(figures)
    return results


def _mean(row: Row, runs: list[Figures]) -> list[float]:
    """``row``'s figures, each the mean over ``runs``."""
    return [statistics.mean(values) for values in zip(*(row.figures(f) for f in runs), strict=True)]


def _ratios(row: Row, after: list[float], before: list[float]) -> str:
    picked = row.ratios if row.ratios is not None else range(len(after))
    return " / ".join(f"{after[i] / before[i]:.2f}" for i in picked)


def table(results: dict[str, dict[str, list[Figures]]], plan: dict[str, list[str]]) -> list[str]:
    """The issue's table as Markdown lines: figure, before, after, after ÷ before."""
    lines = ["| figure | before | after | after ÷ before |", "|---|---:|---:|---:|"]
    for row in rows(plan):
        before = _mean(row, results[row.bench]["before"])
        after = _mean(row, results[row.bench]["after"])
        lines.append(
            f"| {row.label} | {row.text.format(*before)} | {row.text.format(*after)} "
            f"| {_ratios(row, after, before)} |"
        )
    return lines


def held_sockets(results: dict[str, dict[str, list[Figures]]]) -> list[str]:
    """A line for each memory step whose server held fewer open files than the bench had
    connections open (its RSS per connection then counts sockets it no longer holds)."""
    return [
        f"note: {side}: {m['connections']:,.0f} connections open, the server held "
        f"{m['server_open_files']:,} open files"
        for side, runs in results["fanout"].items()
        for figures in runs
        for m in figures["memory"]
        if m.get("server_open_files", m["connections"]) < m["connections"]
    ]


def synapse(quick: bool, timeout: float) -> list[str]:
    """Run ``bench/synapse_side_by_side.py``; its figures as Markdown lines (Synapse, Confer of
    the same run, Confer ÷ Synapse), or the sentence it exited with."""
    LOGS.mkdir(parents=True, exist_ok=True)
    figures_file, log_file = LOGS / "synapse.json", LOGS / "synapse.log"
    figures_file.unlink(missing_ok=True)
    args = "--rounds 1 --sends 200" if quick else "--rounds 2"
    script = BENCH / "synapse_side_by_side.py"
    with log_file.open("wb") as log:
        result = subprocess.run(
            [sys.executable, "-u", str(script), *args.split(), "--json", str(figures_file)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
    if result.returncode != 0 or not figures_file.exists():
        tail = log_file.read_text(errors="replace").strip().splitlines()[-3:]
        return [f"Synapse side by side did not run (exit {result.returncode}): {' '.join(tail)}"]
    runs = json.loads(figures_file.read_text())["runs"]

    def mean(kind: str, phase: str, key: str) -> float:
        return float(statistics.mean(r[phase][key] for r in runs if r["kind"] == kind))

    figures = [
        ("sends/s", "sends", "sends_per_s", "{:,.0f}"),
        ("send p50", "sends", "p50_ms", "{:,.0f} ms"),
        ("send p99", "sends", "p99_ms", "{:,.0f} ms"),
        ("server CPU per send", "sends", "server_cpu_ms", "{:.1f} ms"),
        ("fan-out deliveries/s", "fanout", "deliveries_per_s", "{:,.0f}"),
        ("fan-out last receiver p99", "fanout", "p99_ms", "{:,.0f} ms"),
    ]
    lines = [
        "| side by side (`bench/synapse_side_by_side.py`) | Synapse | Confer | Confer ÷ Synapse |",
        "|---|---:|---:|---:|",
    ]
    for label, phase, key, text in figures:
        s, c = mean("Synapse", phase, key), mean("Confer", phase, key)
        lines.append(f"| {label} | {text.format(s)} | {text.format(c)} | {c / s:.2f} |")
    return lines


def main(args: argparse.Namespace) -> None:
    checkouts = {"before": Path(args.baseline).resolve(), "after": ROOT}
    plan = {b.name: (b.quick if args.quick else b.full) for b in BENCHES}
    started = time.perf_counter()
    results = measure(checkouts, args.quick, args.timeout)
    lines = [
        f"before: {checkouts['before']}; after: {checkouts['after']}; "
        f"{'quick' if args.quick else 'full'} run in {(time.perf_counter() - started) / 60:.1f} "
        f"min; cpus: {os.cpu_count()}",
        "",
        *table(results, plan),
    ]
    lines += held_sockets(results)
    if args.synapse:
        lines += ["", *synapse(args.quick, args.timeout)]
    print("\n" + "\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({"plan": plan, "results": results}, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", required=True, help="the checkout measured as 'before'")
    parser.add_argument("--quick", action="store_true", help="smaller loads: 5–10 minutes")
    parser.add_argument("--synapse", action="store_true", help="also run Synapse side by side")
    parser.add_argument("--json", help="also write every bench's figures to this file")
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds one bench run may take at most"
    )
    try:
        main(parser.parse_args())
    except RuntimeError as exc:
        sys.exit(str(exc))
