"""Passwords: argon2id parameters, rehash on login, and equal 401s in equal time."""

from __future__ import annotations

import random
import statistics
import time

from argon2 import extract_parameters

from tests.gateway.harness import Instance, run_instance

PASSWORD = "correct horse battery"
UNLIMITED = {"rate_limit_login_ip": "100000/minute", "rate_limit_login_account": "100000/minute"}
# Parity comes from the code path (one argon2 verification with the instance's parameters
# whatever the case), not from the parameters; a lighter hash keeps CPU-contention noise on a
# busy CI machine well under the bound. bench/login_latency.py measures the production ones.
LIGHT = {"argon2_time_cost": 2, "argon2_memory_kib": 16384, "argon2_parallelism": 1}
ROUNDS = 30
BOUND_SECONDS = 0.020
TRIM = 0.2  # drop the slowest and fastest 20 % of each case: scheduler noise, not the code


def trimmed_mean(values: list[float]) -> float:
    """Mean of the middle of ``values`` (a 20 % trimmed mean, robust to CPU contention)."""
    ordered = sorted(values)
    cut = int(len(ordered) * TRIM)
    return statistics.mean(ordered[cut : len(ordered) - cut])


async def _hash(instance: Instance, username: str) -> str:
    async with instance.state.pool.acquire() as conn:
        return str(
            await conn.fetchval("SELECT password_hash FROM users WHERE username = $1", username)
        )


async def test_outdated_hash_is_upgraded_on_login(database_url: str) -> None:
    weak = {"argon2_time_cost": 1, "argon2_memory_kib": 8192, "argon2_parallelism": 1}
    async with run_instance(database_url, **weak) as old:
        await old.register("alice", PASSWORD)
        before = await _hash(old, "alice")
    assert extract_parameters(before).memory_cost == 8192
    async with run_instance(database_url) as new:
        wrong = await new.client.post(
            "/v1/auth/login", json={"username": "alice", "password": "wrong password"}
        )
        assert wrong.status_code == 401
        assert await _hash(new, "alice") == before  # a failed login upgrades nothing
        ok = await new.client.post(
            "/v1/auth/login", json={"username": "alice", "password": PASSWORD}
        )
        assert ok.status_code == 200
        after = await _hash(new, "alice")
        params = extract_parameters(after)
        assert after.startswith("$argon2id$") and after != before
        assert (params.time_cost, params.memory_cost, params.parallelism) == (3, 65536, 4)
        again = await new.client.post(
            "/v1/auth/login", json={"username": "alice", "password": PASSWORD}
        )
        assert again.status_code == 200 and await _hash(new, "alice") == after
        async with new.state.pool.acquire() as conn:
            details = await conn.fetch(
                "SELECT details_json FROM audit_log WHERE action = 'auth.login' ORDER BY id"
            )
    assert [d["details_json"]["rehashed"] for d in details] == [True, False]


async def _timed_login(instance: Instance, username: str, password: str) -> tuple[float, dict]:
    start = time.perf_counter()
    response = await instance.client.post(
        "/v1/auth/login", json={"username": username, "password": password}
    )
    elapsed = time.perf_counter() - start
    assert response.status_code == 401, response.text
    body = response.json()
    body.pop("instance")
    return elapsed, body


async def test_unknown_deleted_and_wrong_password_are_alike(database_url: str) -> None:
    async with run_instance(database_url, **UNLIMITED, **LIGHT) as instance:
        await instance.register("alice", PASSWORD)
        bob = await instance.register("bob", PASSWORD)
        assert (await bob.request("DELETE", "/v1/me", json={"password": PASSWORD})).status_code
        cases = {
            "unknown": ("nobody", PASSWORD),
            "deleted": ("bob", PASSWORD),
            "wrong": ("alice", "wrong password"),
        }
        for username, password in cases.values():  # warm-up
            await _timed_login(instance, username, password)
        times: dict[str, list[float]] = {name: [] for name in cases}
        bodies = []
        order = list(cases)
        for _ in range(ROUNDS):
            random.shuffle(order)  # no case always runs first (warm caches) or last
            for name in order:
                username, password = cases[name]
                elapsed, body = await _timed_login(instance, username, password)
                times[name].append(elapsed)
                bodies.append(body)
    assert all(body == bodies[0] for body in bodies)
    assert bodies[0]["code"] == "invalid_credentials"
    means = {name: trimmed_mean(values) for name, values in times.items()}
    spread = max(means.values()) - min(means.values())
    print(
        "login 401 mean ms:",
        {k: round(v * 1000, 2) for k, v in means.items()},
        f"spread {spread * 1000:.2f} ms over {ROUNDS} rounds",
    )
    assert spread < BOUND_SECONDS, means
