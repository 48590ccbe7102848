"""Two real Confer processes on loopback (``python -m gateway serve``), as in ``make demo``."""

from __future__ import annotations

import asyncpg

from gateway.demo import run_demo
from tests.gateway.harness import free_port


async def test_two_processes_exchange_signed_messages(make_database) -> None:
    a_db, b_db = await make_database(), await make_database()
    steps: list[str] = []
    result = await run_demo(
        ports=(free_port(), free_port()), database_urls=(a_db, b_db), say=steps.append
    )
    assert result.delivered_to_bob["content"] == "Hello Bob! Signed by instance A."
    assert result.delivered_to_bob["sender_type"] == "peer_agent"
    assert result.delivered_to_bob["sender_did"] == result.a_did
    assert result.delivered_to_alice["sender_did"] == result.b_did
    assert result.a_did.split(":users:")[0] != result.b_did.split(":users:")[0]
    for url, peer_did in ((b_db, result.a_did), (a_db, result.b_did)):
        conn = await asyncpg.connect(url)
        try:
            peer = await conn.fetchrow("SELECT * FROM peer_agents WHERE did = $1", peer_did)
            inbound = await conn.fetchval(
                "SELECT count(*) FROM audit_log WHERE action = 'federation.inbound'"
            )
            outbound = await conn.fetchval(
                "SELECT count(*) FROM audit_log WHERE action = 'federation.outbound'"
            )
        finally:
            await conn.close()
        assert peer is not None and peer["public_key_json"]
        assert inbound == 1 and outbound == 1
    assert any("started" in s for s in steps)
