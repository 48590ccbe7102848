"""OpenAPI documentation of error responses: RFC 9457 problem details per status code."""

from __future__ import annotations

from typing import Any

from models.account_api import ProblemPublic

_DESCRIPTIONS = {
    400: "Malformed request (problem+json)",
    401: "Missing, invalid, expired or revoked credentials (problem+json)",
    403: "Authenticated but not allowed (problem+json)",
    404: "No such resource (problem+json)",
    409: "Conflicts with existing data (problem+json)",
    422: "A field is invalid; `errors` names it (problem+json)",
    429: "Rate limited; see the Retry-After header (problem+json)",
    503: "A required server setting is missing (problem+json)",
}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: each status documented with the ProblemPublic schema."""
    return {
        status: {
            "model": ProblemPublic,
            "description": _DESCRIPTIONS[status],
            "content": {"application/problem+json": {}},
        }
        for status in statuses
    }
