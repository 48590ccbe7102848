"""How many statements (round trips to PostgreSQL) a REST post to a remote peer costs on the
sender's instance, its outbox row included: a regression guard on counts, not on time (the
time lives in ``bench/roundtrip.py``).

The post runs through an in-process ASGI client, so the count is of the request's own
connections (:mod:`tests.gateway.statements`), never of the delivery worker's.
"""

from __future__ import annotations

from tests.gateway.harness import run_instance
from tests.gateway.test_send_statements import _statements

# What a direct post to a peer of another instance costs now, authentication included.
# Lower it when a change makes such a post cheaper.
FEDERATED_DIRECT_POST = 7


async def test_a_post_to_a_peer_costs_at_most_the_known_round_trips(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        alice, bob = await a.register("alice"), await b.register("bob")
        cid = (await alice.direct_with(bob.did))["id"]
        statements = await _statements(a, alice, cid)
        assert sum("INSERT INTO federation_outbox" in s for s in statements) == 1, statements
        # a direct conversation's type is known from the post: no group claim is looked up
        assert not any("SELECT type, name FROM conversations" in s for s in statements)
        assert len(statements) <= FEDERATED_DIRECT_POST, "\n".join(statements)
