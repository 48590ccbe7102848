"""The error tree imports no web stack; the edge table answers every class in it."""

from __future__ import annotations

import subprocess
import sys

from gateway import errors
from gateway.http_errors import ERROR_MAPPING, wire_for, ws_close_code


def _tree(cls: type[errors.ConferError]) -> list[type[errors.ConferError]]:
    return [cls, *(sub for child in cls.__subclasses__() for sub in _tree(child))]


def test_error_tree_imports_no_web_framework_or_driver() -> None:
    code = (
        "import sys, gateway.errors; "
        "web = {'fastapi', 'starlette', 'asyncpg'}; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & web))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_error_class_has_a_code_and_a_status() -> None:
    for cls in _tree(errors.ConferError):
        assert cls.code and cls.title, cls
        assert wire_for(cls.__new__(cls)).status in range(400, 600), cls


def test_subclasses_answer_as_their_nearest_listed_ancestor() -> None:
    assert wire_for(errors.MessageNotFoundError()).status == 404
    assert wire_for(errors.EmailTakenError()).status == 409
    assert wire_for(errors.RateLimitedError("slow down", retry_after=3)).status == 429
    assert ws_close_code(errors.TokenInvalidError()) == 4001
    assert ws_close_code(errors.AdminRequiredError()) == 4003
    assert set(ERROR_MAPPING) <= set(_tree(errors.ConferError))


def test_raiser_may_name_a_finer_wire_code() -> None:
    assert errors.PeerError("did_not_found", "no such DID").wire_code == "did_not_found"
    assert errors.UserNotFoundError().wire_code == "user_not_found"
