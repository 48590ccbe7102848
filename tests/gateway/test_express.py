"""ExpressRoute (gateway.routes.express) answers exactly as FastAPI's own handler: the same
status, headers and bytes for the common request it answers itself and for every request it
hands to FastAPI; the post route takes it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import fastapi.routing
import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI, Header, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import Field

from gateway.app import create_app
from gateway.errors import AuthenticationError, ConversationNotFoundError, TokenInvalidError
from gateway.http_errors import install_error_handlers
from gateway.ids import new_id
from gateway.routes import conversations
from gateway.routes.express import ExpressRoute, _Plan
from models.base import ULID_PATTERN, ConferModel
from tests.gateway.harness import Instance, run_instance

_bearer = HTTPBearer(auto_error=False)


class Note(ConferModel):
    text: str = Field(min_length=1, max_length=20)
    count: int = 0


class Echo(ConferModel):
    item_id: str
    text: str
    count: int
    who: str
    path: str
    key: str | None


async def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    if credentials is None:
        raise AuthenticationError("send Authorization: Bearer <token>")
    if credentials.credentials != "good":
        raise TokenInvalidError("unknown token")
    return "alice"


async def where(request: Request) -> str:
    return request.url.path


async def endpoint(
    item_id: Annotated[str, Path(pattern=ULID_PATTERN)],
    data: Note,
    who: Annotated[str, Depends(caller)],
    path: Annotated[str, Depends(where)],
    key: Annotated[str | None, Header(alias="Idempotency-Key", min_length=1, max_length=8)] = None,
) -> Echo:
    if data.text == "missing":
        raise ConversationNotFoundError("no such thing")
    return Echo(item_id=item_id, text=data.text, count=data.count, who=who, path=path, key=key)


def _app(route_class: type[fastapi.routing.APIRoute], **include: Any) -> FastAPI:
    router = APIRouter()
    router.add_api_route(
        "/items/{item_id}/notes",
        endpoint,
        methods=["POST"],
        status_code=201,
        route_class_override=route_class,
    )
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(router, **include)
    return app


GOOD = {"Authorization": "Bearer good"}
ID = new_id()
CASES: list[tuple[str, dict[str, str], bytes | None]] = [
    (ID, GOOD, b'{"text": "hello"}'),
    (ID, {**GOOD, "Content-Type": "application/json; charset=utf-8"}, b'{"text": "h\\u00e9"}'),
    (ID, {**GOOD, "Idempotency-Key": "k1"}, b'{"text": "hello", "count": 3}'),
    (ID, {**GOOD, "Idempotency-Key": "much-too-long"}, b'{"text": "hello"}'),
    (ID, {**GOOD, "Idempotency-Key": ""}, b'{"text": "hello"}'),
    (ID, {}, b'{"text": "hello"}'),
    (ID, {"Authorization": "Bearer bad"}, b'{"text": "hello"}'),
    (ID, {"Authorization": "Basic Z29vZA=="}, b'{"text": "hello"}'),
    (ID.lower(), GOOD, b'{"text": "hello"}'),
    (ID.lower(), {}, b'{"text": "hello"}'),
    (ID, GOOD, b'{"text": '),
    (ID, {}, b"not json"),
    (ID, GOOD, b""),
    (ID, GOOD, None),
    (ID, GOOD, b"\xff\xfe"),
    (ID, GOOD, b"[1, 2]"),
    (ID, GOOD, b"null"),
    (ID, GOOD, b'{"text": ""}'),
    (ID, GOOD, b'{"text": "hello", "extra": 1}'),
    (ID, GOOD, b'{"text": "hello", "count": "3"}'),
    (ID, GOOD, b'{"text": "missing"}'),
    (ID, {**GOOD, "Content-Type": "text/plain"}, b'{"text": "hello"}'),
    (ID, {**GOOD, "Content-Type": "application/vnd.api+json"}, b'{"text": "hello"}'),
    (ID, {**GOOD, "Content-Type": "application/json, text/plain"}, b'{"text": "hello"}'),
    (ID, {**GOOD, "Content-Type": " Application/JSON ; x=1"}, b'{"text": "hello"}'),
    (ID, {**GOOD, "Content-Type": "application/json/x"}, b'{"text": "hello"}'),
    (ID, {**GOOD, "Content-Type": "text/json"}, b'{"text": "hello"}'),
]


Answer = tuple[int, list[tuple[str, str]], bytes, bool]


async def _answers(app: FastAPI, solved: list[object], prefix: str = "") -> list[Answer]:
    """Each case's status, headers and body, and whether FastAPI's solving ran for it."""
    transport = httpx.ASGITransport(app=app)
    answers = []
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        for item_id, headers, body in CASES:
            headers = {"Content-Type": "application/json", **headers}
            if body is None:
                headers.pop("Content-Type")
            before = len(solved)
            response = await client.post(
                f"{prefix}/items/{item_id}/notes", headers=headers, content=body or b""
            )
            answers.append(
                (
                    response.status_code,
                    response.headers.multi_items(),
                    response.content,
                    len(solved) > before,
                )
            )
    return answers


@pytest.fixture
def solved() -> Iterator[list[object]]:
    """The requests FastAPI's generic handler solved (each call of its
    ``solve_dependencies`` for an endpoint)."""
    calls: list[object] = []
    original = fastapi.routing.solve_dependencies

    async def counting(**kwargs: Any) -> Any:
        calls.append(kwargs["dependant"].call)
        return await original(**kwargs)

    fastapi.routing.solve_dependencies = counting
    try:
        yield calls
    finally:
        fastapi.routing.solve_dependencies = original


_included: list[str] = []


async def _noted(request: Request) -> None:
    _included.append(request.url.path)


async def _yielded() -> AsyncIterator[None]:
    _included.append("yield")
    yield


@pytest.mark.parametrize(
    "include",
    [{}, {"prefix": "/api"}, {"dependencies": [Depends(_noted)]}],
    ids=["plain", "prefix", "dependency"],
)
async def test_express_answers_every_request_as_fastapi_does(
    solved: list[object], include: dict[str, Any]
) -> None:
    prefix = include.get("prefix", "")
    _included.clear()
    generic = await _answers(_app(fastapi.routing.APIRoute, **include), solved, prefix)
    theirs_included = list(_included)
    _included.clear()
    express = await _answers(_app(ExpressRoute, **include), solved, prefix)
    assert _included == theirs_included
    for case, mine, theirs in zip(CASES, express, generic, strict=True):
        assert mine[:3] == theirs[:3], case
    assert [answer[0] for answer in generic[:3]] == [201, 201, 201]
    assert {answer[0] for answer in generic[3:]} == {201, 400, 401, 404, 422}
    # every request the endpoint answered (201, or the error it raised) was answered without
    # FastAPI's solving; FastAPI's handler solved each of them
    answered = [i for i, answer in enumerate(generic) if answer[0] in (201, 404)]
    assert len(answered) == 7
    assert all(generic[i][3] and not express[i][3] for i in answered)


async def test_a_dependency_that_yields_keeps_fastapi_handling(solved: list[object]) -> None:
    include = {"dependencies": [Depends(_yielded)]}
    generic = await _answers(_app(fastapi.routing.APIRoute, **include), solved)
    express = await _answers(_app(ExpressRoute, **include), solved)
    assert [answer[:3] for answer in express] == [answer[:3] for answer in generic]
    assert all(answer[3] for answer in express if answer[0] == 201)


def test_the_post_route_takes_the_express_path() -> None:
    """The post keeps a plan (a new parameter the express path cannot read would make it fall
    back to FastAPI for every request, silently: this says so)."""
    [route] = [
        r
        for r in conversations.router.routes
        if isinstance(r, fastapi.routing.APIRoute) and r.endpoint is conversations.post_message
    ]
    assert isinstance(route, ExpressRoute)
    assert _Plan.of(route) is not None
    create_app()  # the app builds (the route's handler is made per inclusion)


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


async def test_a_post_is_answered_without_fastapi_solving(
    instance: Instance, solved: list[object]
) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    cid = (await alice.direct_with(bob.did))["id"]
    transport = httpx.ASGITransport(app=instance.app)
    async with httpx.AsyncClient(transport=transport, base_url=instance.base_url) as client:
        solved.clear()
        path = f"/v1/conversations/{cid}/messages"
        sent = await client.post(path, json={"content": "hi"}, headers=alice.headers)
        assert sent.status_code == 201, sent.text
        assert sent.json()["content"] == "hi" and sent.json()["version"] == 1
        assert solved == []
        wrong = await client.post(path, json={"content": ""}, headers=alice.headers)
        assert wrong.status_code == 422, wrong.text
        assert wrong.json()["code"] == "validation_failed"
        assert wrong.json()["errors"][0]["loc"] == ["body", "content"]
        assert solved == [conversations.post_message]
