"""Which route answers a request: the post's route is tried first, then the conversations'
router, before the others (copies, out of the OpenAPI document), which must change nothing."""

from __future__ import annotations

import re
from typing import Any

from fastapi.routing import APIRoute

from gateway.app import create_app
from gateway.ids import new_id
from gateway.routes import conversations


def _sample(path: str) -> str:
    """``path`` with a new ULID for each of its parameters."""
    return re.sub(r"\{[^}]+\}", lambda _: new_id(), path)


def _routes_of(entry: Any) -> list[Any]:
    """The routes an entry of the app's router stands for (an included router's own)."""
    router = getattr(entry, "original_router", None)
    return list(router.routes) if router is not None else [entry]


def test_no_route_ahead_of_the_conversations_answers_their_paths() -> None:
    """Every route listed before the documented conversations router (where they were tried
    before they were put first) leaves their paths alone, whatever the method."""
    entries = create_app().router.routes
    places = [
        i
        for i, e in enumerate(entries)
        if getattr(e, "original_router", None) is conversations.router
    ]
    assert len(places) == 2 and places[0] < places[1]
    samples = [_sample(r.path) for r in conversations.router.routes if isinstance(r, APIRoute)]
    assert samples
    copies = [entries[places[0]], _the_post_first(entries)]
    ahead = [
        r for e in entries[: places[1]] if all(e is not c for c in copies) for r in _routes_of(e)
    ]
    assert len(ahead) > 10
    for route in ahead:
        answered = [p for p in samples if route.path_regex.match(p)]
        assert not answered, f"{route.path} answers {answered}"


def test_the_openapi_document_shows_the_conversations_routes_once_in_their_place() -> None:
    spec = create_app().openapi()
    paths = list(spec["paths"])
    documented = [p for p in paths if p.startswith("/v1/conversations")]
    assert "/v1/conversations/{conversation_id}/messages" in documented
    assert paths.index("/v1/auth/login") < paths.index(documented[0])
    assert "post" in spec["paths"]["/v1/conversations/{conversation_id}/messages"]


def _the_post_first(entries: list[Any]) -> Any:
    """The app's first API route: the post's, as the conversations' router has it (same
    path, method and endpoint), out of the OpenAPI document."""
    [documented] = [
        r
        for r in conversations.router.routes
        if isinstance(r, APIRoute) and r.endpoint is conversations.post_message
    ]
    first = next(e for e in entries if isinstance(e, APIRoute))
    assert isinstance(first, type(documented)) and first is not documented
    assert (first.path, first.methods, first.endpoint) == (
        documented.path,
        documented.methods,
        documented.endpoint,
    )
    assert (first.status_code, first.response_model) == (201, documented.response_model)
    assert not first.include_in_schema and documented.include_in_schema
    return first
