"""An integer in a request body is a JSON integer: ``1.0``, ``"5"`` and ``true`` are refused
with a 422 (a number likewise refuses ``"0.5"`` and ``true``), on every request model the API
reads; an integer query parameter takes decimal digits only and a boolean one ``true`` or
``false`` only, on every route."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError

from gateway.app import create_app
from tests.agents.helpers import agent_id
from tests.gateway.harness import run_instance
from tests.gateway.test_strict_booleans import _request_models

WRONG = {"integer": ("1.0", '"5"', "true", "false"), "number": ('"0.5"', "true")}
RIGHT = {"integer": ("1", "5", "0", "-1"), "number": ("0.5", "1", "0")}


def _kinds(schema: dict[str, Any]) -> set[str]:
    """The JSON types a (sub)schema admits at its top: ``type`` and its ``anyOf`` members."""
    found = {schema["type"]} if isinstance(schema.get("type"), str) else set()
    for option in schema.get("anyOf", []):
        found |= _kinds(option)
    return found


def _adapter(field: Any) -> TypeAdapter[Any]:
    annotation = (
        Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
    )
    return TypeAdapter(annotation)


def _accepts(adapter: TypeAdapter[Any], raw: str) -> bool:
    try:
        adapter.validate_json(raw)
    except ValidationError:
        return False
    return True


def test_every_number_of_every_request_model_is_strict() -> None:
    checked, lax = [], []
    for model in _request_models():
        for name, field in model.model_fields.items():
            adapter = _adapter(field)
            kinds = _kinds(adapter.json_schema()) & set(WRONG)
            for kind in kinds:
                checked.append(f"{model.__name__}.{name}")
                assert any(_accepts(adapter, raw) for raw in RIGHT[kind]), (model, name)
                lax += [
                    f"{model.__name__}.{name} accepts {raw}"
                    for raw in WRONG[kind]
                    if _accepts(adapter, raw)
                ]
    assert len(checked) >= 9, checked  # ttl, priority ×2, importance ×2, version, page, …
    assert not lax, lax


def _api_routes(routes: list[Any]) -> list[APIRoute]:
    """Every APIRoute, through the included routers."""
    found: list[APIRoute] = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        elif hasattr(route, "original_router"):
            found += _api_routes(route.original_router.routes)
    return found


def _query_params(route: APIRoute) -> list[Any]:
    todo, found = [route.dependant], []
    while todo:
        dependant = todo.pop()
        found += dependant.query_params
        todo += dependant.dependencies
    return found


def test_every_integer_and_boolean_query_parameter_is_strict() -> None:
    app = create_app()
    checked, lax = [], []
    for route in _api_routes(app.routes):
        for param in _query_params(route):
            kinds = _kinds(TypeAdapter(param.field_info.annotation).json_schema())
            wrong = ()
            if "boolean" in kinds:
                wrong, right = ("1", "0", "yes", "on", "True"), "true"
            elif "integer" in kinds:
                wrong, right = ("1.0", "true", "1e1", " 5", "0x10"), "1"
            else:
                continue
            checked.append(f"{route.path} {param.name}")
            assert not param.validate(right, {}, loc=("query", param.name))[1], (route, param)
            for raw in wrong:
                if not param.validate(raw, {}, loc=("query", param.name))[1]:
                    lax.append(f"{route.path}?{param.name}={raw!r}")
    assert len(checked) >= 15, checked
    assert not lax, lax


@pytest.mark.parametrize("wrong", [1.0, "5", True])
async def test_a_float_string_or_boolean_for_an_integer_is_refused(
    database_url: str, wrong: Any
) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        base = f"/v1/agents/{agent_id(alice)}/memories"
        refused = await alice.request(
            "POST", base, json={"type": "fact", "content": "x", "importance": wrong}
        )
        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "validation_failed"
        made = await alice.request(
            "POST", base, json={"type": "fact", "content": "x", "importance": 5}
        )
        assert made.status_code == 201, made.text
        assert made.json()["importance"] == 5
        patched = await alice.request(
            "PATCH", f"{base}/{made.json()['id']}", json={"importance": wrong}
        )
        assert patched.status_code == 422, patched.text
        knowledge = await alice.request(
            "POST",
            "/v1/knowledge",
            json={"category": "project", "content": "k", "priority": wrong},
        )
        assert knowledge.status_code == 422, knowledge.text


@pytest.mark.parametrize(
    ("params", "ok"),
    [
        ({"limit": "1.0"}, False),
        ({"limit": "true"}, False),
        ({"limit": "1e1"}, False),
        ({"limit": "10"}, True),
        ({"include_expired": "1"}, False),
        ({"include_expired": "yes"}, False),
        ({"include_expired": "true"}, True),
    ],
)
async def test_query_integers_and_booleans_are_spelled_as_json(
    database_url: str, params: dict[str, str], ok: bool
) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        response = await alice.request(
            "GET", f"/v1/agents/{agent_id(alice)}/memories", params=params
        )
        if ok:
            assert response.status_code == 200, response.text
        else:
            assert response.status_code == 422, response.text
            assert response.json()["code"] == "validation_failed"


def _unbounded(schema: dict[str, Any]) -> list[str]:
    found = []
    for option in schema.get("anyOf", [schema]):
        kind = option.get("type")
        if kind == "string" and not {"maxLength", "enum", "pattern", "format"} & set(option):
            found.append("string")
        if kind == "array":
            if "maxItems" not in option:
                found.append("array")
            found += _unbounded(option.get("items", {}))
    return found


def test_every_query_parameter_is_bounded() -> None:
    """A query value reaches a query (a comparison, a search) or a parser: each string has a
    length limit, a pattern or an enumeration, each list a count limit."""
    app = create_app()
    unbounded = []
    for route in _api_routes(app.routes):
        for param in _query_params(route):
            schema = TypeAdapter(param.field_info.annotation).json_schema()
            bounded = any(
                getattr(m, "max_length", None) is not None or getattr(m, "pattern", None)
                for m in param.field_info.metadata
            )
            if _unbounded(schema) and not bounded:
                unbounded.append(f"{route.path}?{param.name}")
    assert not unbounded, unbounded
