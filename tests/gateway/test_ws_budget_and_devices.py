"""A user's WebSocket connection budget (``CONFER_WS_MAX_CONNECTIONS_PER_USER``) and logins
without a ``device_id``, against a served instance over real HTTP and WebSockets."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from tests.gateway.harness import User, free_port, reachable, run_instance

REDIS_URL = "redis://127.0.0.1:6379/0"

PASSWORD = "correct horse battery"


async def _open(user: User) -> Any:
    return await websockets.connect(
        user.instance.ws_url,
        subprotocols=["confer.v1", f"bearer.{user.token}"],  # type: ignore[list-item]
    )


async def _ready(ws: Any) -> dict[str, Any]:
    frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
    assert frame["type"] == "ready", frame
    return dict(frame)


async def _closed(ws: Any) -> tuple[int, str]:
    """The close code and reason once the server closed ``ws`` (frames before it skipped)."""
    try:
        async with asyncio.timeout(10):
            while True:
                await ws.recv()
    except ConnectionClosed as closed:
        assert closed.rcvd is not None
        return closed.rcvd.code, closed.rcvd.reason
    raise AssertionError("not closed")


async def test_a_users_connections_beyond_the_budget_are_closed_with_4029(
    database_url: str,
) -> None:
    async with run_instance(database_url, ws_max_connections_per_user=2) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        first, second = await _open(alice), await _open(alice)
        await _ready(first)
        await _ready(second)
        third = await _open(alice)
        code, reason = await _closed(third)
        assert code == 4029
        assert "at most 2 WebSocket connections per user" in reason
        assert instance.state.hub.connections(alice.profile["id"]) == 2
        async with bob.websocket():  # the budget is per user, not per instance
            pass
        await second.close()
        deadline = asyncio.get_running_loop().time() + 10
        while instance.state.hub.connections(alice.profile["id"]) > 1:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        again = await _open(alice)  # a slot came free
        await _ready(again)
        await again.close()
        await first.close()


async def test_simultaneous_handshakes_do_not_overshoot_the_budget(database_url: str) -> None:
    async with run_instance(database_url, ws_max_connections_per_user=3) as instance:
        alice = await instance.register("alice")
        sockets = await asyncio.gather(*(_open(alice) for _ in range(8)))
        outcomes: list[str | int] = []
        for ws in sockets:
            try:
                outcomes.append(json.loads(await asyncio.wait_for(ws.recv(), 10))["type"])
            except ConnectionClosed as closed:
                assert closed.rcvd is not None
                outcomes.append(closed.rcvd.code)
        assert sorted(outcomes, key=str) == [4029] * 5 + ["ready"] * 3
        assert instance.state.hub.connections(alice.profile["id"]) == 3
        for ws in sockets:
            await ws.close()


async def _login(instance: Any, **extra: str) -> dict[str, Any]:
    response = await instance.client.post(
        "/v1/auth/login", json={"username": "alice", "password": PASSWORD, **extra}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def _works(instance: Any, token: str) -> bool:
    response = await instance.client.get("/v1/me", headers={"Authorization": f"Bearer {token}"})
    return response.status_code == 200


async def test_a_login_without_device_id_ends_no_other_session(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        registered = await instance.client.post(
            "/v1/auth/register", json={"username": "alice", "password": PASSWORD}
        )
        assert registered.status_code == 201
        from_registration = registered.json()["access_token"]
        plain = await _login(instance)  # no device_id
        other_plain = await _login(instance)
        phone = await _login(instance, device_id="phone")
        assert await _works(instance, from_registration)  # ended before the fix
        assert await _works(instance, plain["access_token"])
        assert await _works(instance, other_plain["access_token"])
        assert await _works(instance, phone["access_token"])
        sessions = await instance.client.get(
            "/v1/me/sessions", headers={"Authorization": f"Bearer {plain['access_token']}"}
        )
        listed = sessions.json()
        items = listed["items"] if isinstance(listed, dict) else listed
        devices = sorted(s["device_id"] for s in items)
        assert len(devices) == 4
        # a device without a name is its session
        assert plain["session_id"] in devices and "phone" in devices
        # a named device still keeps one session: the next login on it replaces the first
        phone_again = await _login(instance, device_id="phone")
        assert not await _works(instance, phone["access_token"])
        assert await _works(instance, phone_again["access_token"])
        assert await _works(instance, from_registration)


@pytest.mark.skipif(
    not reachable(REDIS_URL), reason="needs the local Redis on 6379 (.ci/run starts it)"
)
async def test_with_redis_the_budget_counts_every_process(database_url: str) -> None:
    """Two processes sharing Redis presence: a user's connections on both count against one
    budget, and a slot freed on one may be used on the other."""
    shared = {"ws_max_connections_per_user": 2, "redis_url": REDIS_URL}
    async with run_instance(database_url, **shared) as a:
        alice = await a.register("alice")
        async with run_instance(database_url, port=free_port(), **shared) as b:
            on_b = User(b, alice.token, alice.profile)
            first, second = await _open(alice), await _open(on_b)
            await _ready(first)
            await _ready(second)
            code, reason = await _closed(await _open(on_b))
            assert code == 4029 and "at most 2 WebSocket connections per user" in reason
            await first.close()
            deadline = asyncio.get_running_loop().time() + 15
            while True:  # A's device leaves Redis presence when its socket is gone
                again = await _open(on_b)
                try:
                    await _ready(again)
                    break
                except ConnectionClosed:
                    assert asyncio.get_running_loop().time() < deadline, "no slot came free"
                    await asyncio.sleep(0.2)
            await again.close()
            await second.close()
