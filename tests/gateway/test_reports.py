"""Reports and the moderation queue: a user reports a peer's message, a local message and a
user; an admin resolves each (block the peer, delete the message, suspend the user, dismiss);
the reporter hears each outcome — two instances on loopback, real PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.gateway.harness import User, next_event, run_instance
from tests.gateway.test_delivery_status import delivery_event


async def first_message(user: User, within: float = 30) -> dict[str, Any]:
    """The newest message of the user's newest conversation, once there is one."""
    deadline = time.monotonic() + within
    while True:
        conversations = (await user.request("GET", "/v1/conversations")).json()
        if conversations:
            cid = conversations[0]["id"]
            items = (await user.request("GET", f"/v1/conversations/{cid}/messages")).json()
            if items["items"]:
                return dict(items["items"][0])
        assert time.monotonic() < deadline, "no message arrived"
        await asyncio.sleep(0.1)


async def report(user: User, **body: Any) -> Any:
    return await user.request("POST", "/v1/reports", json=body)


async def resolve(admin: User, report_id: str, action: str) -> dict[str, Any]:
    response = await admin.request(
        "POST", f"/v1/admin/reports/{report_id}/resolve", json={"action": action, "note": "ok"}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_reports_are_resolved_with_each_action(make_database) -> None:
    async with (
        run_instance(
            await make_database(), admin_usernames="alice", rate_limit_reports="5/hour"
        ) as a,
        run_instance(await make_database()) as b,
    ):
        alice, carol, dave = [await a.register(n) for n in ("alice", "carol", "dave")]
        bob = await b.register("bob")
        bob_cid = (await bob.direct_with(carol.did))["id"]
        await bob.send(bob_cid, "buy cheap watches")
        remote = await first_message(carol)
        assert remote["sender_did"] == bob.did

        async with carol.websocket() as ws:
            # Bounds: a message carol cannot read, over-long text, a malformed DID.
            hidden = await report(
                carol, target_type="message", message_id="0" * 26, category="spam"
            )
            assert hidden.status_code == 404
            long = await report(
                carol, target_type="peer", did=bob.did, category="spam", text="x" * 2001
            )
            assert long.status_code == 422
            bad = await report(carol, target_type="peer", did="did:web:", category="spam")
            assert bad.status_code == 422

            filed = await report(
                carol,
                target_type="message",
                message_id=remote["id"],
                category="spam",
                text="unsolicited ads",
            )
            assert filed.status_code == 201, filed.text
            spam = filed.json()
            assert spam["status"] == "open" and spam["target_did"] == bob.did
            assert spam["snapshot"]["content"] == "buy cheap watches"
            assert spam["snapshot"]["sender_did"] == bob.did

            assert (await carol.request("GET", "/v1/admin/reports")).status_code == 403
            queue = (await alice.request("GET", "/v1/admin/reports")).json()["items"]
            assert [r["id"] for r in queue] == [spam["id"]]

            # Block the peer: its domain joins the deny list and the instance turns denylist.
            blocked = await resolve(alice, spam["id"], "block_peer")
            assert blocked["status"] == "resolved" and blocked["action"] == "block_peer"
            outcome = (await next_event(ws, "report.resolved", 10))["data"]
            assert outcome == {
                "report_id": spam["id"],
                "action": "block_peer",
                "status": "resolved",
            }
            policy = (await alice.request("GET", "/v1/admin/federation/policy")).json()
            port_b = b.base_url.rsplit(":", 1)[1]
            assert policy["mode"] == "denylist"
            assert [e["pattern"] for e in policy["entries"]] == [f"localhost:{port_b}"]
            again = await alice.request(
                "POST", f"/v1/admin/reports/{spam['id']}/resolve", json={"action": "dismiss"}
            )
            assert again.status_code == 422
            async with bob.websocket() as bob_ws:
                refused = await bob.send(bob_cid, "more watches")
                failed = (await delivery_event(bob_ws, refused["id"], "failed"))["delivery"]
                assert "federation_refused" in failed["reason"]

            # A local user's message: deleted for everyone in the conversation.
            dave_cid = (await dave.direct_with(carol.did))["id"]
            rude = await dave.send(dave_cid, "a rude remark")
            filed = await report(
                carol, target_type="message", message_id=rude["id"], category="harassment"
            )
            deleted = await resolve(alice, filed.json()["id"], "delete_message")
            assert deleted["action"] == "delete_message"
            gone = await carol.request("GET", f"/v1/conversations/{dave_cid}/messages/{rude['id']}")
            assert gone.status_code == 404
            # The snapshot stays for the admin.
            resolved = (
                await alice.request("GET", "/v1/admin/reports", params={"status": "resolved"})
            ).json()["items"]
            assert {r["snapshot"]["content"] for r in resolved if r["snapshot"]} == {
                "buy cheap watches",
                "a rude remark",
            }

            # The user: suspended, their sessions end.
            filed = await report(carol, target_type="user", did=dave.did, category="abuse")
            assert filed.json()["target_user_id"] == dave.profile["id"]
            await resolve(alice, filed.json()["id"], "suspend_user")
            assert (await dave.request("GET", "/v1/me")).status_code == 401

            # Dismiss: nothing happens but the outcome.
            filed = await report(carol, target_type="peer", domain="Spam.Example", category="other")
            assert filed.json()["target_did"] == "spam.example"
            await resolve(alice, filed.json()["id"], "dismiss")
            outcomes = []
            while len(outcomes) < 3:
                outcomes.append((await next_event(ws, "report.resolved", 10))["data"]["action"])
            assert outcomes == ["delete_message", "suspend_user", "dismiss"]

            # Rate limited: 5 reports an hour (the refused ones above do not count).
            over = await report(carol, target_type="peer", did=bob.did, category="spam")
            assert over.status_code == 201
            limited = await report(carol, target_type="peer", did=bob.did, category="spam")
            assert limited.status_code == 429 and limited.headers["Retry-After"]
        audit = []
        async with a.state.pool.acquire() as conn:
            audit = [
                r["action"]
                for r in await conn.fetch(
                    "SELECT action FROM audit_log WHERE action LIKE '%report%' ORDER BY id"
                )
            ]
        assert audit.count("report.filed") == 5 and audit.count("admin.report.resolved") == 4
