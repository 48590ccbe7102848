"""/metrics parsed as Prometheus text by prometheus-client's own parser; /readyz."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.harness import Instance, run_instance


async def scrape(instance: Instance, **kwargs: Any) -> dict[str, Any]:
    response = await instance.client.get("/metrics", **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {family.name: family for family in text_string_to_metric_families(response.text)}


def value(families: dict[str, Any], name: str, sample: str, **labels: str) -> float:
    family = families.get(name)
    if family is None:
        return 0.0
    for s in family.samples:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    return 0.0


async def wait_for(check: Any, within: float = 30.0) -> None:
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110 (polls the other instance)
            await asyncio.sleep(0.1)


async def test_metrics_families_and_request_counter(database_url: str) -> None:
    async with run_instance(database_url) as a:
        before = await scrape(a)
        for name in (
            "confer_http_requests",
            "confer_http_request_duration_seconds",
            "confer_websocket_connections",
            "confer_events_fanned_out",
            "confer_deliveries",
            "confer_did_resolutions",
            "confer_agent_tasks",
            "confer_db_pool_size",
            "confer_db_pool_in_use",
            "confer_outbox_depth",
            "confer_outbox_oldest_age_seconds",
        ):
            assert name in before, name
        route = "/v1/conversations/{conversation_id}"
        user = await a.register("alice")
        missing = await user.request("GET", "/v1/conversations/01J0000000000000000000NOPE")
        assert missing.status_code in (404, 422)
        after = await scrape(a)
        labels = {"method": "GET", "route": route, "status": str(missing.status_code)}
        counted = value(after, "confer_http_requests", "confer_http_requests_total", **labels)
        assert (
            counted
            == value(before, "confer_http_requests", "confer_http_requests_total", **labels) + 1
        )
        # Raw paths never become labels: only templates (or "unmatched").
        routes = {s.labels["route"] for s in after["confer_http_requests"].samples}
        assert not any("NOPE" in r for r in routes)
        await a.client.get("/no/such/path/abc123")
        routes = {s.labels["route"] for s in (await scrape(a))["confer_http_requests"].samples}
        assert "unmatched" in routes and not any("abc123" in r for r in routes)
        assert value(after, "confer_db_pool_size", "confer_db_pool_size") >= 1

        async with user.websocket():
            live = await scrape(a)
            assert value(live, "confer_websocket_connections", "confer_websocket_connections") == 1


async def test_a_delivery_moves_the_counters_and_the_outbox_gauges(make_database) -> None:
    db_a, db_b = await make_database(), await make_database()
    async with run_instance(db_a) as a, run_instance(db_b) as b:
        alice, bob = await a.register("alice"), await b.register("bob")
        before = await scrape(a)
        conversation = await alice.direct_with(bob.did)
        async with alice.websocket():
            await alice.send(conversation["id"], "hello over the wire")

            async def delivered() -> bool:
                now = await scrape(a)
                return value(
                    now, "confer_deliveries", "confer_deliveries_total", outcome="delivered"
                ) > value(
                    before, "confer_deliveries", "confer_deliveries_total", outcome="delivered"
                )

            await wait_for(delivered)
        after = await scrape(a)
        resolutions = sum(
            s.value for s in after["confer_did_resolutions"].samples if s.name.endswith("_total")
        )
        assert resolutions >= 1
        fanned = "confer_events_fanned_out_total"
        assert value(after, "confer_events_fanned_out", fanned) > value(
            before, "confer_events_fanned_out", fanned
        )
        # Nothing pending any more: no destination has a depth above zero.
        assert all(s.value == 0 for s in after["confer_outbox_depth"].samples)


async def test_outbox_depth_per_destination_while_the_peer_is_down(make_database) -> None:
    db_a, db_b = await make_database(), await make_database()
    async with run_instance(db_a) as a:
        alice = await a.register("alice")
        async with run_instance(db_b) as b:
            destination = b.base_url.split("//", 1)[1]
            bob = await b.register("bob")
            conversation = await alice.direct_with(bob.did)
        await alice.send(conversation["id"], "you are not there")
        families = await scrape(a)
        depth = value(
            families, "confer_outbox_depth", "confer_outbox_depth", destination=destination
        )
        assert depth == 1
        age = value(
            families,
            "confer_outbox_oldest_age_seconds",
            "confer_outbox_oldest_age_seconds",
            destination=destination,
        )
        assert 0 <= age < 600


async def test_metrics_token_and_switch(database_url: str) -> None:
    async with run_instance(database_url, metrics_token="s3cret") as a:
        assert (await a.client.get("/metrics")).status_code == 401
        families = await scrape(a, headers={"Authorization": "Bearer s3cret"})
        assert "confer_http_requests" in families
    async with run_instance(database_url, metrics=False) as a:
        assert (await a.client.get("/metrics")).status_code == 404


async def test_without_a_token_metrics_are_for_this_host_only(database_url: str) -> None:
    """What a reverse proxy on this host passes on (it names the visitor) is refused: the
    outbox figures name the instances this one talks to."""
    async with run_instance(database_url) as a:
        assert "confer_http_requests" in await scrape(a)  # a scraper on loopback
        for forwarded in (
            {"X-Forwarded-For": "203.0.113.7"},
            {"Forwarded": "for=203.0.113.7;proto=https"},
        ):
            refused = await a.client.get("/metrics", headers=forwarded)
            assert refused.status_code == 401, refused.text
            assert "CONFER_METRICS_TOKEN" in refused.json()["detail"]


async def test_readyz_names_the_failing_check(database_url: str) -> None:
    async with run_instance(database_url) as a:
        ready = await a.client.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["checks"] == {"database": "ok", "migrations": "ok", "workers": "ok"}

        supervisor = a.state.supervisor
        assert supervisor is not None
        supervisor.tasks["delivery"].cancel()
        await asyncio.sleep(0)
        await asyncio.sleep(0.05)
        stopped = await a.client.get("/readyz")
        assert stopped.status_code == 503
        assert stopped.json()["failed"] == ["workers"]
        assert "delivery" in stopped.json()["checks"]["workers"]

        async with a.state.pool.acquire() as conn:
            await conn.execute("UPDATE alembic_version SET version_num = '0001'")
        behind = await a.client.get("/readyz")
        assert behind.status_code == 503
        assert behind.json()["failed"] == ["migrations", "workers"]
