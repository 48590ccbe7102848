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
