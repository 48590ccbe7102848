"""The OpenAPI document shows, for every accounts/agents/admin endpoint, its request, response
and error shapes, each with an example."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.app import create_app

TAGS = {"accounts", "agents", "admin"}
SPEC = create_app().openapi()


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref:
        return dict(SPEC["components"]["schemas"][ref.rsplit("/", 1)[1]])
    return schema


def _has_example(content: dict[str, Any]) -> bool:
    if "example" in content or "examples" in content:
        return True
    schema = _resolve(content.get("schema", {}))
    if "examples" in schema:
        return True
    items = schema.get("items")
    return bool(items and "examples" in _resolve(items))


OPERATIONS = [
    (method.upper(), path, op)
    for path, item in SPEC["paths"].items()
    for method, op in item.items()
    if TAGS & set(op.get("tags", []))
]


def test_the_operations_are_all_there() -> None:
    paths = {path for _, path, _ in OPERATIONS}
    assert {"/v1/auth/refresh", "/v1/me/sessions", "/v1/me/llm-keys/{provider}"} <= paths
    assert {"/v1/agents/me", "/v1/admin/audit", "/v1/admin/stats"} <= paths
    admin = [op for _, path, op in OPERATIONS if path.startswith("/v1/admin/")]
    assert admin and all(op["tags"] == ["admin"] for op in admin)


@pytest.mark.parametrize(
    ("method", "path", "op"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS]
)
def test_operation_is_documented_with_examples(method: str, path: str, op: dict) -> None:
    assert op.get("summary") and op.get("description")
    body = op.get("requestBody")
    if body:
        assert _has_example(body["content"]["application/json"]), "request example"
    success = [code for code in op["responses"] if code.startswith("2")]
    assert len(success) == 1
    if success[0] != "204":
        assert _has_example(op["responses"][success[0]]["content"]["application/json"])
    errors = [code for code in op["responses"] if code[0] in "45"]
    takes_input = body or op.get("parameters") or op.get("security")
    assert errors or not takes_input, "error responses documented"
    for code in errors:
        content = op["responses"][code]["content"]
        assert _resolve(content["application/problem+json"]["schema"])["title"] == "ProblemDetails"
