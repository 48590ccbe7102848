"""Notifications of users away from the screen: Web Push against a push service on loopback
that verifies the VAPID signature and decrypts the RFC 8291 payload, and e-mail through a
real SMTP server (aiosmtpd)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.services.mail import Mailer, MailError
from gateway.settings import Settings
from tests.gateway.harness import Instance, User, free_port, run_instance
from tests.gateway.pushservice import PushService, push_service, smtp_server

QUIET = 1.0
FAST = {"notify_quiet_seconds": QUIET, "notify_max_delay_seconds": 30, "notify_retry_seconds": 1}


async def eventually(check: Callable[[], Any], within: float = 20.0) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


async def pending(instance: Instance, user: User) -> int:
    async with instance.state.pool.acquire() as conn:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM notification_outbox WHERE user_id = $1", user.profile["id"]
            )
        )


async def subscribe(user: User, push: PushService, name: str) -> None:
    response = await user.request(
        "POST", "/v1/push/subscriptions", json=push.browser(name).subscription(push.endpoint(name))
    )
    assert response.status_code == 201, response.text


@pytest.fixture
async def pushes(database_url: str) -> AsyncIterator[tuple[Instance, PushService]]:
    async with push_service() as push, run_instance(database_url, **FAST) as instance:
        key = (await instance.client.get("/v1/push/vapid-public-key")).json()
        push.vapid_public_key = key["public_key"]
        yield instance, push
        assert push.errors == []


async def _pair(instance: Instance, push: PushService) -> tuple[User, User, str]:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    await subscribe(bob, push, "bob")
    conversation = await alice.direct_with(bob.did)
    return alice, bob, conversation["id"]


async def test_a_burst_to_an_offline_user_is_one_push(
    pushes: tuple[Instance, PushService],
) -> None:
    instance, push = pushes
    alice, bob, conversation = await _pair(instance, push)
    for i in range(5):
        await alice.send(conversation, f"message {i}")
    payloads = await eventually(lambda: push.received["bob"])
    await asyncio.sleep(QUIET * 3)  # nothing else comes for the same burst
    assert len(push.received["bob"]) == 1
    [payload] = payloads
    assert payload["count"] == 5
    assert payload["conversation_id"] == conversation
    assert "alice" in payload["title"] and "message 4" in payload["body"]
    assert payload["url"] == instance.base_url + "/"
    headers = push.headers["bob"][0]
    assert headers["topic"] == "confer-messages" and headers["ttl"] == str(24 * 3600)
    assert await pending(instance, bob) == 0


async def test_an_online_user_gets_no_push(pushes: tuple[Instance, PushService]) -> None:
    instance, push = pushes
    alice, bob, conversation = await _pair(instance, push)
    async with bob.websocket():
        sent = await alice.send(conversation, "you are here")
        async with instance.state.pool.acquire() as conn:
            same_transaction = await conn.fetchval(
                """SELECT m.xmin::text = o.xmin::text FROM messages m
                   JOIN notification_outbox o ON o.message_id = m.id WHERE m.id = $1""",
                sent["id"],
            )
        assert same_transaction is True  # queued in the message's own transaction...
        await eventually(lambda: _none(instance, bob))
    assert push.hits["bob"] == 0  # ...and dropped: a device was connected


async def _none(instance: Instance, user: User) -> bool:
    return await pending(instance, user) == 0


async def test_conversation_setting_none_and_mentions(
    pushes: tuple[Instance, PushService],
) -> None:
    instance, push = pushes
    alice, bob, conversation = await _pair(instance, push)
    membership = f"/v1/conversations/{conversation}/membership"
    response = await bob.request("PATCH", membership, json={"notification": "none"})
    assert response.status_code == 200, response.text
    await alice.send(conversation, "not for your pocket")
    assert await pending(instance, bob) == 0  # not even queued

    await bob.request("PATCH", membership, json={"notification": "mentions"})
    await alice.send(conversation, "just chatting")
    await alice.send(conversation, "hey @Bob, look at this")
    await alice.send(conversation, "and mail@bobby.example is not you")
    [payload] = await eventually(lambda: push.received["bob"])
    assert payload["count"] == 1 and "hey @Bob" in payload["body"]
    await asyncio.sleep(QUIET * 2)
    assert len(push.received["bob"]) == 1


async def test_muted_contact_does_not_notify(pushes: tuple[Instance, PushService]) -> None:
    instance, push = pushes
    alice, bob, conversation = await _pair(instance, push)
    carol = await instance.register("carol")
    response = await bob.request("POST", "/v1/contacts", json={"did": alice.did, "muted": True})
    assert response.status_code == 201, response.text
    await alice.send(conversation, "muted words")
    await eventually(lambda: _none(instance, bob))
    assert push.hits["bob"] == 0
    other = await carol.direct_with(bob.did)
    await carol.send(other["id"], "carol is not muted")
    [payload] = await eventually(lambda: push.received["bob"])
    assert payload["count"] == 1 and "carol is not muted" in payload["body"]


async def test_privacy_keeps_text_and_names_out(pushes: tuple[Instance, PushService]) -> None:
    instance, push = pushes
    alice, bob, conversation = await _pair(instance, push)
    response = await bob.request(
        "PATCH", "/v1/me", json={"preferences": {"privacy": {"notification_preview": False}}}
    )
    assert response.status_code == 200, response.text
    assert response.json()["preferences"]["privacy"]["notification_preview"] is False
    await alice.send(conversation, "the secret plan")
    await alice.send(conversation, "second secret")
    [payload] = await eventually(lambda: push.received["bob"])
    text = str(payload).lower()
    assert "secret" not in text and "alice" not in text
    assert payload["title"] == "Confer" and payload["count"] == 2
    assert "2 new messages" in payload["body"]


async def test_gone_subscription_is_removed_and_failures_are_retried(
    pushes: tuple[Instance, PushService],
) -> None:
    instance, push = pushes
    alice, bob, conversation = await _pair(instance, push)
    carol = await instance.register("carol")
    await subscribe(carol, push, "carol")
    push.status["bob"] = 410
    push.status["carol"] = 500
    await alice.send(conversation, "hello bob")
    other = await alice.direct_with(carol.did)
    await alice.send(other["id"], "hello carol")

    async def bob_unsubscribed() -> bool:
        response = await bob.request("GET", "/v1/push/subscriptions/current")
        return response.status_code == 404

    await eventually(bob_unsubscribed)
    await eventually(lambda: _none(instance, bob))  # gone is final: nothing to retry
    assert push.hits["bob"] == 1
    await eventually(lambda: push.hits["carol"] >= 2)  # 500: retried with backoff
    async with instance.state.pool.acquire() as conn:
        attempts = await conn.fetchval(
            "SELECT max(attempts) FROM notification_outbox WHERE user_id = $1",
            carol.profile["id"],
        )
    assert attempts is not None and attempts >= 1
    push.status["carol"] = 201  # the push service recovers; the worker kept going
    await eventually(lambda: _none(instance, carol))
    assert instance.state.supervisor is not None
    assert instance.state.supervisor.states()["notifications"] == "running"


async def test_logout_removes_the_subscription(pushes: tuple[Instance, PushService]) -> None:
    instance, push = pushes
    _, bob, _ = await _pair(instance, push)
    current = await bob.request("GET", "/v1/push/subscriptions/current")
    assert current.status_code == 200 and current.json()["endpoint"] == push.endpoint("bob")
    assert (await bob.request("POST", "/v1/auth/logout")).status_code == 204
    async with instance.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM push_subscriptions") == 0


async def test_subscriptions_are_validated(pushes: tuple[Instance, PushService]) -> None:
    instance, push = pushes
    bob = await instance.register("bob")
    good = push.browser("bob").subscription(push.endpoint("bob"))
    bad: list[dict[str, Any]] = [
        {**good, "endpoint": "ftp://127.0.0.1/push"},
        {**good, "endpoint": "https://user:pw@push.example/x"},
        {**good, "endpoint": "https://push.example/" + "x" * 1100},
        {**good, "keys": {**good["keys"], "auth": "AAAAAAAAAAAAAAAAAAAAAAAA"}},  # 18 bytes
        {**good, "keys": {**good["keys"], "p256dh": "B" + "A" * 86}},  # not on the curve
        {**good, "keys": {"p256dh": good["keys"]["p256dh"]}},
    ]
    for body in bad:
        response = await bob.request("POST", "/v1/push/subscriptions", json=body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["code"] in ("push_subscription_invalid", "validation_failed")
    assert (await bob.request("DELETE", "/v1/push/subscriptions")).status_code == 404


async def test_loopback_endpoint_is_refused_by_the_address_policy(database_url: str) -> None:
    async with (
        push_service() as push,
        run_instance(database_url, allow_private_networks=False) as instance,
    ):
        bob = await instance.register("bob")
        body = push.browser("bob").subscription(push.endpoint("bob"))
        response = await bob.request("POST", "/v1/push/subscriptions", json=body)
        assert response.status_code == 422
        assert response.json()["code"] == "push_subscription_invalid"
        assert "not a public address" in response.json()["detail"]


async def test_vapid_key_survives_a_restart(database_url: str) -> None:
    async with run_instance(database_url) as first:
        before = (await first.client.get("/v1/push/vapid-public-key")).json()
    async with run_instance(database_url) as second:
        after = (await second.client.get("/v1/push/vapid-public-key")).json()
    assert before == after and before["enabled"] is True
    assert len(before["public_key"]) == 87  # 65 bytes, unpadded base64url


async def test_offline_user_gets_an_email(database_url: str) -> None:
    with smtp_server() as (port, mails):
        smtp = {"smtp_host": "127.0.0.1", "smtp_port": port, "smtp_tls": "none"}
        smtp["smtp_from"] = "confer@notify.example"
        async with run_instance(database_url, **FAST, **smtp) as instance:
            alice = await instance.register("alice")
            bob = await instance.register("bob")
            response = await bob.request(
                "PATCH",
                "/v1/me",
                json={
                    "email": "bob@notify.example",
                    "preferences": {"notification": {"push": False, "email": True}},
                },
            )
            assert response.status_code == 200, response.text
            conversation = await alice.direct_with(bob.did)
            await alice.send(conversation["id"], "lunch at one?")
            await alice.send(conversation["id"], "or two")
            [(recipients, mail)] = await eventually(lambda: mails)
            assert recipients == ["bob@notify.example"]
            assert mail["From"] == "confer@notify.example"
            assert mail["Subject"].startswith("[Confer] 2 new messages")
            body = mail.get_payload(decode=True).decode()
            assert "lunch at one?" in body and "or two" in body
            assert instance.base_url in body
            await asyncio.sleep(QUIET * 2)
            assert len(mails) == 1


async def test_a_peer_permission_request_notifies_the_owner(make_database: Any) -> None:
    async with (
        push_service() as push,
        run_instance(await make_database()) as a,
        run_instance(await make_database(), **FAST) as b,
    ):
        push.vapid_public_key = (await b.client.get("/v1/push/vapid-public-key")).json()[
            "public_key"
        ]
        alice = await a.register("alice")
        bob = await b.register("bob")
        await subscribe(bob, push, "bob")
        conversation = await alice.direct_with(bob.profile["agent_did"])
        await alice.send(conversation["id"], "May I see the Q3 plan?")  # policy: ask
        [payload] = await eventually(lambda: push.received["bob"], within=30)
        assert payload["title"] == "Permission request" and payload["count"] == 1
        assert "asks to" in payload["body"] and "Q3 plan" in payload["body"]
        assert push.errors == []


async def test_queued_notifications_survive_a_restart(database_url: str) -> None:
    async with push_service() as push:
        slow = {**FAST, "notify_quiet_seconds": 600, "notify_max_delay_seconds": 600}
        async with run_instance(database_url, **slow) as first:
            push.vapid_public_key = (await first.client.get("/v1/push/vapid-public-key")).json()[
                "public_key"
            ]
            alice, _, conversation = await _pair(first, push)
            await alice.send(conversation, "sent just before the stop")
        assert push.hits["bob"] == 0
        async with run_instance(database_url, **FAST):
            [payload] = await eventually(lambda: push.received["bob"])
        assert "sent just before the stop" in payload["body"]
        assert push.errors == []


async def test_starttls_is_required_not_skipped() -> None:
    with smtp_server() as (port, mails):
        settings = Settings(smtp_host="127.0.0.1", smtp_port=port, smtp_tls="starttls")
        with pytest.raises(MailError):  # the server offers no STARTTLS: refuse, not plain text
            await Mailer(settings).send("bob@notify.example", "hello", "text")
        plain = Settings(smtp_host="127.0.0.1", smtp_port=port, smtp_tls="none")
        await Mailer(plain).send("bob@notify.example", "hello", "text")
        assert [recipients for recipients, _ in mails] == [["bob@notify.example"]]


async def test_two_processes_share_the_outbox(database_url: str) -> None:
    async with (
        push_service() as push,
        run_instance(database_url, **FAST) as first,
        run_instance(database_url, port=free_port(), **FAST) as second,
    ):
        push.vapid_public_key = (await first.client.get("/v1/push/vapid-public-key")).json()[
            "public_key"
        ]
        alice, bob, conversation = await _pair(first, push)
        for i in range(3):
            await alice.send(conversation, f"burst {i}")
        [payload] = await eventually(lambda: push.received["bob"])
        await asyncio.sleep(QUIET * 3)
        assert push.hits["bob"] == 1 and payload["count"] == 3  # leased by one process only
        assert await pending(second, bob) == 0
        assert push.errors == []


async def test_sessions_racing_for_one_endpoint_all_succeed(
    pushes: tuple[Instance, PushService],
) -> None:
    """The same browser subscribed by several sessions at the same moment: every request is a
    201 (none trips over the endpoint's uniqueness) and one session holds it afterwards."""
    instance, push = pushes
    bob = await instance.register("bob")
    sessions = [bob]
    for device in range(3):
        response = await instance.client.post(
            "/v1/auth/login",
            json={
                "username": "bob",
                "password": "correct horse battery",
                "device_id": f"tab-{device}",
            },
        )
        assert response.status_code == 200, response.text
        sessions.append(User(instance, response.json()["access_token"], bob.profile))
    for round_ in range(4):
        body = push.browser(f"shared-{round_}").subscription(push.endpoint(f"shared-{round_}"))
        answers = await asyncio.gather(
            *(s.request("POST", "/v1/push/subscriptions", json=body) for s in sessions)
        )
        assert [a.status_code for a in answers] == [201] * len(sessions), [a.text for a in answers]
        async with instance.state.pool.acquire() as conn:
            holders = await conn.fetchval(
                "SELECT count(*) FROM push_subscriptions WHERE endpoint = $1", body["endpoint"]
            )
        assert holders == 1
