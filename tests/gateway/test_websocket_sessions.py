"""A device's WebSocket lives only as long as its device session."""

from __future__ import annotations

import asyncio

import pytest
import websockets

from tests.gateway.harness import run_instance


async def test_logout_closes_the_devices_websocket(database_url: str) -> None:
    async with run_instance(database_url, ws_session_check_seconds=0.2) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        conversation = await alice.direct_with(bob.did)
        async with bob.websocket() as ws:
            assert (await bob.request("POST", "/v1/auth/logout")).status_code == 204
            with pytest.raises(websockets.ConnectionClosed) as closed:
                async with asyncio.timeout(5):
                    while True:
                        await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4001
            await alice.send(conversation["id"], "after logout")
        assert instance.state.hub.connections(bob.profile["id"]) == 0


async def test_a_live_session_keeps_its_websocket(database_url: str) -> None:
    async with run_instance(database_url, ws_session_check_seconds=0.1) as instance:
        alice = await instance.register("alice")
        async with alice.websocket() as ws:
            await asyncio.sleep(0.5)  # several checks pass
            await ws.send('{"type": "ping"}')
            async with asyncio.timeout(5):
                while '"pong"' not in await ws.recv():
                    pass


@pytest.mark.parametrize("ending", ["logout", "disable", "password_reset"])
async def test_a_session_ended_anywhere_stops_its_websocket_before_the_next_event(
    database_url: str, ending: str
) -> None:
    """The periodic check is 10 minutes away here: only the session-change notification can
    close the socket, and no event posted after the change reaches it."""
    async with run_instance(
        database_url, ws_session_check_seconds=600, admin_usernames="root"
    ) as instance:
        async with asyncio.timeout(20):
            while not instance.state.accounts.session_cache.enabled:  # noqa: ASYNC110 (a worker's state)
                await asyncio.sleep(0.05)
        root = await instance.register("root")
        alice = await instance.register("alice")
        carol = await instance.register("carol")
        conversation = await alice.direct_with(carol.did)
        await alice.send(conversation["id"], "before")
        async with carol.websocket() as ws:
            target = f"/v1/admin/users/{carol.profile['id']}"
            if ending == "logout":
                done = await carol.request("POST", "/v1/auth/logout")
            elif ending == "disable":
                done = await root.request("POST", f"{target}/disable", json={"reason": "test"})
            else:
                done = await root.request(
                    "PUT", f"{target}/password", json={"password": "a fresh password 1"}
                )
            assert done.status_code in (200, 204), done.text
            await alice.send(conversation["id"], "after the session ended")
            frames = []
            with pytest.raises(websockets.ConnectionClosed) as closed:
                async with asyncio.timeout(15):
                    while True:
                        frames.append(await ws.recv())
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4001
            assert not any("after the session ended" in f for f in frames), frames
