"""Thin route modules: parse, call one service, return a model."""

from __future__ import annotations

from typing import Any

from models.api import ProblemPublic

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
    503: "A required server setting is missing",
}


def problems(*statuses: int, **descriptions: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for error statuses, each an RFC 9457 ``ProblemPublic``.

    ``descriptions`` override the default text per status, keyed ``s404="…"``.
    """
    return {
        status: {
            "model": ProblemPublic,
            "description": descriptions.get(f"s{status}", _DESCRIPTIONS[status]),
            "content": {"application/problem+json": {}},
        }
        for status in statuses
    }
