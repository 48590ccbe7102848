"""The ``/mcp`` endpoint, built on its first request.

Importing the MCP SDK (its types, the streamable HTTP transport) is most of a second of
``confer serve`` start-up, and most instances never get an MCP request. :class:`LazyMCP` is
the ASGI app mounted at ``/mcp``: the first request imports :mod:`gateway.mcp.server` in a
worker thread (the event loop keeps serving), builds the server and starts its session
manager in a task of its own; :meth:`LazyMCP.aclose` (from the lifespan) stops it.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from gateway.mcp.deps import ToolDeps
from gateway.settings import Settings

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class LazyMCP:
    """ASGI app for ``/mcp`` that builds :func:`gateway.mcp.server.build_mcp` on first use."""

    def __init__(self, get_deps: Callable[[], ToolDeps], settings: Settings) -> None:
        self._get_deps = get_deps
        self._settings = settings
        self._app: ASGIApp | None = None
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app or await self._start()
        await app(scope, receive, send)

    async def _start(self) -> ASGIApp:
        async with self._lock:
            if self._app is None:
                module = await asyncio.to_thread(importlib.import_module, "gateway.mcp.server")
                server, app = module.build_mcp(self._get_deps, self._settings)
                running = asyncio.get_running_loop().create_future()
                self._runner = asyncio.create_task(self._run(server, running))
                await running  # the session manager accepts requests once it runs
                self._app = app
        return self._app

    async def _run(self, server: Any, running: asyncio.Future[None]) -> None:
        # The session manager's task group must be entered and left in one task: this one.
        try:
            async with server.session_manager.run():
                running.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not running.done():
                running.set_exception(exc)
            raise

    async def aclose(self) -> None:
        """Stop the session manager, if a request ever started it."""
        self._stop.set()
        runner, self._runner, self._app = self._runner, None, None
        self._stop = asyncio.Event()  # a later lifespan builds a fresh server
        if runner is not None:
            await runner
