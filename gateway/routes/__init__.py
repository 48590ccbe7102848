"""Thin route modules: parse, call one service, return a model."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute

from models.api import ProblemDetails

PROBLEM_JSON = "application/problem+json"
PROBLEM_REF = {"$ref": "#/components/schemas/ProblemDetails"}

_DESCRIPTIONS = {
    400: "Malformed request, e.g. a body that is not JSON",
    401: "Missing, invalid or expired credentials",
    403: "Not allowed",
    404: "Not found, or not visible to the caller",
    409: "Conflict with the current state",
    413: "Request body too large",
    415: "Unsupported media type",
    422: "The request is well-formed but invalid (the `errors` member names the fields)",
    429: "Too many requests (see Retry-After)",
    502: "Another instance this depends on could not be reached, or answered nonsense",
    503: "A required server setting is missing, or the database is busy (see Retry-After)",
}


def problems(*statuses: int, **descriptions: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for error statuses, each an RFC 9457 ``ProblemDetails``.

    ``descriptions`` override the default text per status, keyed ``s404="…"``. The entries
    name no ``model``: :func:`document_problems` gives each its schema in the finished
    document, and FastAPI would otherwise build a pydantic field per route and status at
    import (most of the time it takes to register the routes).
    """
    return {
        status: {
            "description": descriptions.get(f"s{status}", _DESCRIPTIONS[status]),
            "content": {PROBLEM_JSON: {}},
        }
        for status in statuses
    }


def document_problems(spec: dict[str, Any]) -> dict[str, Any]:
    """Give every 4xx/5xx response of the OpenAPI document ``spec`` the body actually sent:
    ``application/problem+json`` with the ``ProblemDetails`` schema (RFC 9457 §3), in place
    of FastAPI's ``application/json`` guesses (its default 422 ``HTTPValidationError`` is
    never sent: :mod:`gateway.http_errors` renders validation errors as problem details).
    Mutates and returns ``spec``."""
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    schemas["ProblemDetails"] = ProblemDetails.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    for item in spec.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for status, response in operation.get("responses", {}).items():
                if str(status)[0] in "45":
                    response["content"] = {PROBLEM_JSON: {"schema": dict(PROBLEM_REF)}}
    for unused in ("HTTPValidationError", "ValidationError"):
        if f'/{unused}"' not in json.dumps([spec["paths"], schemas]):
            schemas.pop(unused, None)
    return spec


def install_problem_schema(app: FastAPI) -> None:
    """Serve ``app``'s OpenAPI document through :func:`document_problems` (built once)."""

    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_problems(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def answer_head(router: APIRouter, *paths: str) -> None:
    """Answer ``HEAD`` like ``GET`` at ``paths`` of ``router`` (every GET route of it when none
    are named): the same endpoint, whose body the server leaves out (RFC 9110 §9.3.2). FastAPI
    routes answer only the methods they list, so a monitor's or a browser's HEAD would be 405.
    The HEAD routes stay out of the OpenAPI document. Call it after the GET routes are added."""
    for route in list(router.routes):
        if not isinstance(route, APIRoute) or "GET" not in (route.methods or ()):
            continue
        if paths and route.path not in paths:
            continue
        router.add_api_route(route.path, route.endpoint, methods=["HEAD"], include_in_schema=False)
