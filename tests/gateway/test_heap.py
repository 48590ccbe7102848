"""``confer serve`` sets the garbage collector for serving once the app has started
(:mod:`gateway.heap`): what start-up built is frozen, young collections are rarer."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import uvicorn

from gateway import cli, heap


def test_settle_freezes_what_is_alive_and_raises_the_young_threshold() -> None:
    """In a process of its own: a frozen heap stays frozen."""
    code = (
        "import gc, gateway.app; from gateway import heap; heap.settle(); "
        "print(gc.get_freeze_count() > 50_000, gc.get_threshold(), gc.get_count()[0] < 100)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split(None, 1) == ["True", f"({heap.YOUNG_THRESHOLD}, 10, 10) True\n"]


async def test_the_server_settles_the_heap_once_started(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()
            started.append(True)
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})

    settled: list[list[bool]] = []
    monkeypatch.setattr(heap, "settle", lambda: settled.append(list(started)))
    wrapped = cli._RefusalAsSentence(app)
    config = uvicorn.Config(wrapped, host="127.0.0.1", port=0, log_level="warning")
    config.load()
    server = cli._Server(config, wrapped)
    server.lifespan = config.lifespan_class(config)  # as uvicorn's serve() sets it up
    await server.startup()
    try:
        assert settled == [[True]]  # after the app's start-up, once
    finally:
        await server.shutdown()
