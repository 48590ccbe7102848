"""Login latency against a running Confer instance: p50/p99 of successful logins and the mean
time of the three 401 cases (unknown user, deleted user, wrong password).

    python bench/login_latency.py --url http://127.0.0.1:8000 --rounds 100

The target must allow that many attempts: start it with, e.g.,
``CONFER_RATE_LIMIT_LOGIN_IP=100000/minute CONFER_RATE_LIMIT_LOGIN_ACCOUNT=100000/minute
CONFER_RATE_LIMIT_REGISTER_IP=1000/hour``. The script registers two throw-away users
(``bench-<random>``) and deletes one of them.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import time

import httpx

PASSWORD = "bench password 1234"


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def timed(client: httpx.AsyncClient, username: str, password: str, expect: int) -> float:
    start = time.perf_counter()
    response = await client.post(
        "/v1/auth/login", json={"username": username, "password": password, "device_id": "bench"}
    )
    elapsed = time.perf_counter() - start
    if response.status_code != expect:
        raise SystemExit(f"unexpected {response.status_code}: {response.text}")
    return elapsed


async def main(url: str, rounds: int) -> None:
    tag = secrets.token_hex(4)
    alive, deleted = f"bench-{tag}-a", f"bench-{tag}-d"
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        for name in (alive, deleted):
            r = await client.post(
                "/v1/auth/register", json={"username": name, "password": PASSWORD}
            )
            r.raise_for_status()
        token = r.json()["access_token"]
        await client.request(
            "DELETE",
            "/v1/me",
            json={"password": PASSWORD},
            headers={"Authorization": f"Bearer {token}"},
        )
        ok = [await timed(client, alive, PASSWORD, 200) for _ in range(rounds)]
        cases = {
            "unknown user": (f"bench-{tag}-x", PASSWORD),
            "deleted user": (deleted, PASSWORD),
            "wrong password": (alive, "not the password"),
        }
        failures: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(rounds):
            for name, (username, password) in cases.items():
                failures[name].append(await timed(client, username, password, 401))
    ms = 1000
    print(
        f"successful login over {rounds} tries: p50 {percentile(ok, 0.5) * ms:.1f} ms, "
        f"p99 {percentile(ok, 0.99) * ms:.1f} ms, mean {statistics.mean(ok) * ms:.1f} ms"
    )
    means = {name: statistics.mean(v) for name, v in failures.items()}
    for name, mean in means.items():
        p50 = percentile(failures[name], 0.5)
        print(f"401 {name:15s} mean {mean * ms:.1f} ms, p50 {p50 * ms:.1f} ms")
    print(f"401 spread of means: {(max(means.values()) - min(means.values())) * ms:.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(main(args.url, args.rounds))
