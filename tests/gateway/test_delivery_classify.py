"""``classify`` is total: every peer answer is delivered, retry or failed, never an exception."""

from __future__ import annotations

import json

import pytest

from gateway.workers.delivery import ANSWER_MAX_BYTES, classify

RESULT = json.dumps({"jsonrpc": "2.0", "id": "1", "result": {"task": {}}}).encode()
ERROR = json.dumps({"jsonrpc": "2.0", "id": "1", "error": {"code": -32001}}).encode()


@pytest.mark.parametrize(
    ("status", "body", "outcome", "reason"),
    [
        (200, RESULT, "delivered", "HTTP 200"),
        (202, RESULT, "delivered", "HTTP 202"),
        (200, ERROR, "failed", "JSON-RPC error"),
        (200, b'{"jsonrpc": "2.0", "error": null}', "failed", "JSON-RPC error: null"),
        (200, b"[]", "failed", "not an object"),
        (200, b'"ok"', "failed", "not an object"),
        (200, b"42", "failed", "not an object"),
        (200, b"null", "failed", "not an object"),
        (200, b"", "failed", "not valid JSON"),
        (200, b'{"result": ', "failed", "not valid JSON"),
        (200, b"<html><body>Hi</body></html>", "failed", "not valid JSON"),
        (200, b"\xff\xfe{}", "failed", "not UTF-8"),
        (200, b"[" * 100_000, "failed", "nested deeper"),
        (200, b'{"result": 1, "result": 2}', "failed", "not valid JSON"),
        (200, b'{"result": NaN}', "failed", "not valid JSON"),
        (200, b'{"jsonrpc": "2.0"}', "failed", "neither result nor error"),
        (200, None, "failed", f"over {ANSWER_MAX_BYTES} bytes"),
        (204, b"", "failed", "not valid JSON"),
        (301, b"", "failed", "redirects are not followed"),
        (307, b"moved", "failed", "redirects are not followed"),
        (304, b"", "failed", "redirects are not followed"),
        (100, b"", "failed", "HTTP 100"),
        (400, b"bad request", "failed", "HTTP 400: bad request"),
        (404, b"\xff" * 400, "failed", "HTTP 404"),
        (413, None, "failed", "an answer over"),
        (401, b"", "retry", "HTTP 401"),
        (408, b"", "retry", "HTTP 408"),
        (429, b"slow down", "retry", "HTTP 429"),
        (500, b"[]", "retry", "HTTP 500"),
        (503, None, "retry", "HTTP 503"),
        (599, b"", "retry", "HTTP 599"),
    ],
)
def test_every_answer_has_an_outcome(
    status: int, body: bytes | None, outcome: str, reason: str
) -> None:
    got, why = classify(status, body)
    assert got == outcome
    assert reason in why
    assert len(why) < 400
