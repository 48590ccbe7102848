"""The per-device WebSocket: live events for the authenticated user.

Connect to ``/v1/ws`` offering the subprotocol ``confer.v1``. Authenticate either by also
offering ``bearer.<access token>`` in ``Sec-WebSocket-Protocol`` (never in the URL), or by
sending ``{"type": "auth", "token": "<access token>"}`` as the first frame within 10 s.
The server then sends ``{"type": "ready", "data": {"user_id", "did"}}`` followed by events
such as ``{"type": "message.created", "data": <Message>}``. ``{"type": "ping"}`` is answered
with ``{"type": "pong"}``.

Close codes: 4001 authentication failed, 4008 client too slow (its queue overflowed),
1003 unsupported frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Annotated

from fastapi import APIRouter, Depends, WebSocket, WebSocketDisconnect

from gateway.deps import get_ws_state
from gateway.errors import ConferError
from gateway.realtime.hub import Subscriber
from gateway.services.accounts import Authenticated
from gateway.state import AppState

router = APIRouter()

SUBPROTOCOL = "confer.v1"
BEARER_PREFIX = "bearer."
AUTH_TIMEOUT = 10.0
CLOSE_UNAUTHENTICATED = 4001
CLOSE_TOO_SLOW = 4008
CLOSE_UNSUPPORTED = 1003
CLOSE_TIMEOUT = 5.0


async def _first_frame_auth(websocket: WebSocket, state: AppState) -> Authenticated | None:
    try:
        frame = await asyncio.wait_for(websocket.receive_json(), AUTH_TIMEOUT)
    except (TimeoutError, ValueError, WebSocketDisconnect):
        return None
    if not isinstance(frame, dict) or frame.get("type") != "auth":
        return None
    try:
        return await state.accounts.authenticate(str(frame.get("token", "")))
    except ConferError:
        return None


async def _authenticate(websocket: WebSocket, state: AppState) -> Authenticated | None:
    offered = websocket.scope.get("subprotocols", [])
    subprotocol = SUBPROTOCOL if SUBPROTOCOL in offered else None
    tokens = [p[len(BEARER_PREFIX) :] for p in offered if p.startswith(BEARER_PREFIX)]
    if tokens:
        try:
            auth = await state.accounts.authenticate(tokens[0])
        except ConferError:
            await websocket.close(code=CLOSE_UNAUTHENTICATED)
            return None
        await websocket.accept(subprotocol=subprotocol)
        return auth
    await websocket.accept(subprotocol=subprotocol)
    first = await _first_frame_auth(websocket, state)
    if first is None:
        await websocket.close(code=CLOSE_UNAUTHENTICATED, reason="authentication failed")
    return first


async def _pump(websocket: WebSocket, subscriber: Subscriber) -> None:
    while True:
        text = await subscriber.queue.get()
        await websocket.send_text(text)


async def _read(websocket: WebSocket) -> None:
    while True:
        raw = await websocket.receive_text()
        try:
            frame = json.loads(raw)
        except ValueError:
            frame = None
        if isinstance(frame, dict) and frame.get("type") == "ping":
            await websocket.send_text('{"type":"pong"}')
        else:
            await websocket.close(code=CLOSE_UNSUPPORTED, reason="unsupported frame")
            return


@router.websocket("/v1/ws")
async def events(websocket: WebSocket, state: Annotated[AppState, Depends(get_ws_state)]) -> None:
    """Stream the user's events to one device (see the module docstring for the protocol)."""
    auth = await _authenticate(websocket, state)
    if auth is None:
        return
    subscriber = state.hub.subscribe(auth.user.id)
    tasks: list[asyncio.Task[object]] = []
    try:
        await websocket.send_json(
            {"type": "ready", "data": {"user_id": auth.user.id, "did": auth.user.did}}
        )
        tasks = [
            asyncio.create_task(_pump(websocket, subscriber)),
            asyncio.create_task(_read(websocket)),
            asyncio.create_task(subscriber.overflowed.wait()),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    except (WebSocketDisconnect, RuntimeError):
        pass
    finally:
        state.hub.unsubscribe(subscriber)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    if subscriber.overflowed.is_set():
        # The client is not reading: the close frame may never drain, so bound the wait.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                websocket.close(code=CLOSE_TOO_SLOW, reason="client too slow"), CLOSE_TIMEOUT
            )
