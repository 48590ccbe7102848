"""Who may send a group's history (``gateway.services.group_history``): only the group's home,
signed by its instance DID, for an author who is none of the receiver's users, into a replica
that exists and in which the named recipients take part. Each refusal stores nothing."""

from __future__ import annotations

import json
from typing import Any

from a2a.confer import ConferConversation, ConferHistory, ConferMetadata, send_message_params
from gateway.ids import new_id
from tests.gateway.harness import Instance, run_instance
from tests.gateway.test_group_membership import new_group, the_group


async def history(
    sender: Instance,
    receiver: Instance,
    *,
    group: ConferConversation,
    author: str,
    recipient: str,
    text: str,
) -> Any:
    """A history message signed by ``sender``'s instance DID, posted to ``receiver``'s /a2a."""
    params = send_message_params(
        message_id=new_id(),
        context_id=group.id,
        text=text,
        confer=ConferMetadata(
            sender=author,
            recipient=recipient,
            recipients=[recipient],
            conversation=group,
            history=ConferHistory(remaining=0),
        ),
    )
    body = json.dumps(
        {"jsonrpc": "2.0", "id": "1", "method": "SendMessage", "params": params}
    ).encode()
    url = f"{receiver.base_url}/a2a"
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    signer = sender.state.identity.signer_for(sender.did)
    headers.update(signer.headers_for("POST", url, headers, body))
    return await receiver.client.post("/a2a", content=body, headers=headers)


async def stored(instance: Instance, text: str) -> int:
    async with instance.state.pool.acquire() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM messages WHERE content = $1", text))


async def test_history_is_taken_from_the_groups_home_only(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
        run_instance(await make_database()) as c,
    ):
        alice, bob, dave = (
            await a.register("alice"),
            await b.register("bob"),
            await b.register("dave"),
        )
        carol = await c.register("carol")
        g1 = await new_group(alice, "G1", [bob.did, carol.did])
        await the_group(bob)
        claim = ConferConversation(id=g1, home=a.did, members=[alice.did, bob.did, carol.did])

        # C is not the group's home: its "history" in alice's name is a forged sender.
        refused = await history(c, b, group=claim, author=alice.did, recipient=bob.did, text="c1")
        assert refused.status_code == 401, refused.text
        assert refused.json()["code"] == "signature_sender_mismatch"
        # C claiming to be the home of A's group does not make it so.
        moved = claim.model_copy(update={"home": c.did})
        refused = await history(c, b, group=moved, author=carol.did, recipient=bob.did, text="c2")
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "not_group_member"

        # The home never speaks for B's own users.
        refused = await history(a, b, group=claim, author=bob.did, recipient=bob.did, text="a1")
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "not_group_member"
        # A recipient who takes no part in the replica gets nothing.
        refused = await history(a, b, group=claim, author=alice.did, recipient=dave.did, text="a2")
        assert refused.status_code == 403, refused.text
        # A group of A's that B has no replica of takes no history.
        other = ConferConversation(id=new_id(), home=a.did, members=[alice.did, bob.did])
        refused = await history(a, b, group=other, author=alice.did, recipient=bob.did, text="a3")
        assert refused.status_code == 403, refused.text
        for text in ("c1", "c2", "a1", "a2", "a3"):
            assert await stored(b, text) == 0
        async with b.state.pool.acquire() as conn:
            audited = await conn.fetchval(
                "SELECT count(*) FROM audit_log WHERE action = 'group.history.refused'"
            )
        assert audited == 3  # c2, a2, a3 (c1 is a forged sender, a1 refused as any relay)

        # The home's history for a member of the replica is stored, once.
        taken = await history(a, b, group=claim, author=alice.did, recipient=bob.did, text="ok")
        assert taken.status_code == 200, taken.text
        assert taken.json()["result"]["message"]["parts"][1]["data"]["stored"] is True
        assert await stored(b, "ok") == 1
