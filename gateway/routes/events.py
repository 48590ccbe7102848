"""The per-device WebSocket ``/v1/ws``: authentication, Origin check, then the event session.

Connect offering the subprotocol ``confer.v1``. Authenticate by also offering
``bearer.<access token>`` in ``Sec-WebSocket-Protocol`` (never in the URL), or by sending
``{"type": "auth", "token": "<access token>"}`` as the first frame within 10 s. To resume, pass
``?epoch=<epoch>&offset=<last offset>`` in the URL or ``epoch``/``offset`` in the ``auth``
frame. A browser ``Origin`` must be ``public_url``'s or in ``ws_allowed_origins`` (else the
handshake gets HTTP 403). The whole protocol, with every frame and close code, is in
``docs/websocket.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Annotated, Any
from urllib.parse import urlsplit

import asyncpg
from fastapi import APIRouter, Depends, WebSocket, WebSocketDisconnect
from starlette.websockets import WebSocketState

from gateway.agents.peer_tasks import release_waiting
from gateway.deps import get_ws_state
from gateway.errors import ConferError, DatabaseBusyError
from gateway.http_errors import WS_CLOSE_FORBIDDEN, WS_CLOSE_UNAUTHENTICATED
from gateway.ids import new_id
from gateway.realtime.hub import EventHub
from gateway.realtime.session import (
    CLOSE_TOO_MANY_CONNECTIONS,
    CLOSE_UNSUPPORTED,
    EventSession,
    Resume,
    SessionLimits,
    parse_frame,
    receive_text_frame,
)
from gateway.services import presence
from gateway.services.accounts import Accounts, Authenticated
from gateway.services.typing import handle_client_frame
from gateway.state import AppState

router = APIRouter()
log = logging.getLogger(__name__)

SUBPROTOCOL = "confer.v1"
BEARER_PREFIX = "bearer."
AUTH_TIMEOUT = 10.0
# any failed authentication (a disabled account too) closes with 4001, as docs/websocket.md says
CLOSE_UNAUTHENTICATED = WS_CLOSE_UNAUTHENTICATED
CLOSE_ORIGIN_REFUSED = WS_CLOSE_FORBIDDEN


def origin_allowed(origin: str | None, public_url: str, allowed: list[str]) -> bool:
    """True when a handshake's ``Origin`` may connect (RFC 6455 §10.2).

    No ``Origin`` (non-browser clients) is allowed; otherwise it must equal ``public_url``'s
    origin or an entry of ``allowed`` (``*`` allows any), compared case-insensitively.
    """
    if origin is None:
        return True
    if "*" in allowed:
        return True
    parts = urlsplit(public_url)
    origins = {f"{parts.scheme}://{parts.netloc}", *allowed}
    origins = {o.lower().rstrip("/") for o in origins}
    return origin.lower().rstrip("/") in origins


def _forget_handshake(scope: Any) -> None:
    """Empty what only the handshake needed in an authenticated socket's ASGI scope: its
    request headers and offered subprotocols (the latter hold the bearer token). The scope
    lives as long as the connection, and nothing reads these after authentication.

    Emptied in place: Starlette's ``websocket.headers`` (which FastAPI reads while solving the
    route's dependencies) shares the scope's header list.
    """
    for key in ("headers", "subprotocols"):
        values = scope.get(key)
        if isinstance(values, list):
            values.clear()


class MalformedResume(ValueError):
    """A resume position whose ``offset`` is not a non-negative integer (closes with 1003)."""


def _resume_from(values: Any, *, query: bool = False) -> Resume | None:
    """A Resume from a mapping with ``epoch`` and ``offset``; None when both are absent.

    ``offset`` must be a non-negative integer: a JSON integer in the ``auth`` frame or a string
    of decimal digits in the query (``query``), and ``epoch`` a non-empty string. Anything
    else (``"5"`` in the frame, ``-5``, ``"abc"``, ``1.5``, ``1e400``, ``-Infinity``, ``true``,
    one of the two without the other) raises MalformedResume: resuming from a position the
    client cannot have been given is a protocol error, not a fresh start (docs/websocket.md,
    "Resuming").
    """
    epoch, offset = values.get("epoch"), values.get("offset")
    if epoch is None and offset is None:
        return None
    if not isinstance(epoch, str) or not epoch or offset is None:
        raise MalformedResume("a resume position needs both epoch and offset")
    if isinstance(offset, int) and not isinstance(offset, bool):
        number = offset
    elif query and isinstance(offset, str) and offset.isascii() and offset.isdigit():
        number = int(offset)
    else:
        raise MalformedResume("offset must be a non-negative integer")
    if number < 0:
        raise MalformedResume("offset must be a non-negative integer")
    return Resume(epoch, number)


async def _first_frame_auth(
    websocket: WebSocket, accounts: Accounts
) -> tuple[Authenticated, dict[str, Any]] | None:
    """The user of a valid ``auth`` first frame and the frame itself; None otherwise."""
    try:
        raw = await asyncio.wait_for(receive_text_frame(websocket), AUTH_TIMEOUT)
    except (TimeoutError, WebSocketDisconnect):
        return None
    frame = parse_frame(raw) if raw is not None else None
    if frame is None or frame.get("type") != "auth":
        return None
    try:
        auth = await accounts.authenticate(str(frame.get("token", "")))
    except DatabaseBusyError:
        raise  # not the token's fault: the device is told to try again (:func:`serve`)
    except ConferError:
        return None
    return auth, frame


async def _close(websocket: WebSocket, code: int, reason: str = "") -> None:
    """Close with ``code`` (RFC 6455 §7.4); a client that already went away (it hung up
    before authenticating, or the server closed for a too-large frame) needs no close frame,
    and is not an error worth a traceback."""
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        await websocket.close(code=code, reason=reason)


async def _authenticate(
    websocket: WebSocket, accounts: Accounts
) -> tuple[Authenticated, Resume | None] | None:
    """Authenticate and read the resume position; None once the socket has been closed.

    A bad token closes with 4001 (before accept for a subprotocol token), a malformed resume
    position with 1003.
    """
    offered = websocket.scope.get("subprotocols", [])
    subprotocol = SUBPROTOCOL if SUBPROTOCOL in offered else None
    tokens = [p[len(BEARER_PREFIX) :] for p in offered if p.startswith(BEARER_PREFIX)]
    if tokens:
        try:
            auth = await accounts.authenticate(tokens[0])
        except DatabaseBusyError:
            raise  # not the token's fault: the device is told to try again (:func:`serve`)
        except ConferError:
            await _close(websocket, CLOSE_UNAUTHENTICATED)
            return None
        await websocket.accept(subprotocol=subprotocol)
        frame: dict[str, Any] = {}
    else:
        await websocket.accept(subprotocol=subprotocol)
        result = await _first_frame_auth(websocket, accounts)
        if result is None:
            await _close(websocket, CLOSE_UNAUTHENTICATED, "authentication failed")
            return None
        auth, frame = result
    try:
        resume = _resume_from(frame) or _resume_from(websocket.query_params, query=True)
    except MalformedResume:
        await _close(websocket, CLOSE_UNSUPPORTED, "invalid resume offset")
        return None
    return auth, resume


PATH = "/v1/ws"
"""Where devices connect; :class:`gateway.app._ConferApp` dispatches it before the stack."""


@router.websocket(PATH)
async def events(websocket: WebSocket, state: Annotated[AppState, Depends(get_ws_state)]) -> None:
    """Stream the user's events to one device (protocol: docs/websocket.md)."""
    settings = state.settings
    origin = websocket.headers.get("origin")
    if not origin_allowed(origin, settings.public_url, settings.ws_allowed_origins):
        await _close(websocket, CLOSE_ORIGIN_REFUSED)
        return
    result = await _authenticate(websocket, state.accounts)
    if result is None:
        return
    auth, resume = result
    _forget_handshake(websocket.scope)
    limits = SessionLimits(
        replay_window=settings.ws_replay_window,
        ping_interval=settings.ws_ping_interval_seconds,
        ping_timeout=settings.ws_ping_timeout_seconds,
        max_connections=settings.ws_max_connections_per_user,
        session_check=settings.ws_session_check_seconds,
    )

    async def on_frame(frame: dict[str, Any]) -> bool:
        return await handle_client_frame(
            state.pool,
            state.hub,
            settings.typing_interval_seconds,
            auth.user,
            frame,
            state.signals,
        )

    # with a shared presence store the budget counts the user's devices on every process (the
    # hub below counts this process's, atomically); handshakes racing on two processes may
    # overshoot by one each
    budget = settings.ws_max_connections_per_user
    elsewhere = await state.hub.ephemeral.device_count(auth.user.id)
    if elsewhere is not None and elsewhere >= budget:
        reason = f"at most {budget} WebSocket connections per user; close another one first"
        await _close(websocket, CLOSE_TOO_MANY_CONNECTIONS, reason)
        return
    device = new_id()

    async def check() -> bool:
        return await _session_alive(state.hub, state.accounts, auth, device)

    session = EventSession(websocket, state.hub, auth.user.id, limits, on_frame, check)
    await presence.device_connected(state.pool, state.hub, auth.user, device, state.signals)
    # the owner is back: held peer requests complete and the agent answers them
    await release_waiting(
        state.pool, state.clock, state.agent_queue, auth.user.id, state.task_events
    )
    ready = {"user_id": auth.user.id, "did": auth.user.did}
    try:
        # runs in this task: an idle connection holds no other task (gateway.realtime.session)
        await session.run(ready, resume)
    finally:
        await presence.device_disconnected(state.pool, state.hub, auth.user, device, state.signals)


CLOSE_TRY_AGAIN = 1013
"""RFC 6455 §11.7 "Try Again Later": the server could not serve the device just now."""


async def serve(websocket: WebSocket, state: AppState) -> None:
    """:func:`events` for a connection dispatched straight from the application
    (:class:`gateway.app._ConferApp`), without the exception handlers of the middleware
    stack: a Confer error (no database connection came free, say) or a refused database
    connection is logged in one line and the socket closed with 1013, as the stack would
    have turned it into a problem answer; anything else propagates to the server."""
    try:
        await events(websocket, state)
    except (ConferError, asyncpg.TooManyConnectionsError, asyncpg.CannotConnectNowError) as exc:
        code = getattr(exc, "wire_code", "database_busy")
        log.warning("%s on %s: %s", code, PATH, getattr(exc, "detail", exc))
        if websocket.client_state == WebSocketState.CONNECTING:
            # a close before the handshake is an HTTP 403, which reads as "not allowed":
            # accept, so that the device gets the close code that says "try again"
            offered = websocket.scope.get("subprotocols", [])
            with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                await websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
        await _close(websocket, CLOSE_TRY_AGAIN, "server busy; try again")


async def _session_alive(
    hub: EventHub, accounts: Accounts, auth: Authenticated, device: str
) -> bool:
    """Whether the device's login session is still valid (False after logout, revocation,
    expiry, a disabled or deleted account: the session then closes with 4001); also renews the
    device's presence lease in ``hub``. Run every ``ws_session_check_seconds``."""
    with contextlib.suppress(Exception):  # presence is best effort; the check is not
        await hub.ephemeral.device_alive(auth.user.id, device)
    return await accounts.session_alive(auth)
