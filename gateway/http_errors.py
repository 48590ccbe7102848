"""The edge of the error tree: how an error reaches a client, in one table.

:data:`ERROR_MAPPING` maps each :class:`~gateway.errors.ConferError` class that chooses a
response to its HTTP status (the response body is RFC 9457 problem details,
``application/problem+json``, with the class's wire ``code``) and to the WebSocket close code
(RFC 6455 §7.4.2: 4000–4999 are ours; ``docs/websocket.md`` lists them) used when the same
error ends a WebSocket. A subclass not in the table answers as its nearest listed ancestor.

:func:`install_error_handlers` also maps the ``a2a`` and ``did`` libraries' errors, FastAPI's
validation errors, Starlette's HTTP errors and the PostgreSQL errors that mean "this input
cannot be stored", so a client only ever sees problem details.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import asyncpg
import http_sf
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from http_sf.types import InnerListType
from limits.errors import StorageError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from a2a.errors import A2AError
from a2a.signatures import ALGORITHM, CONFER_TAG, DEFAULT_COMPONENTS
from did.errors import DIDError, DIDKeyError
from gateway import errors as e

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
WS_CLOSE_UNAUTHENTICATED = 4001
WS_CLOSE_FORBIDDEN = 4003
WS_CLOSE_POLICY_VIOLATION = 1008
WS_CLOSE_INTERNAL_ERROR = 1011
WS_CLOSE_TRY_AGAIN_LATER = 1013
WS_CLOSE_TOO_MANY_CONNECTIONS = 4029


class Wire(NamedTuple):
    """How one error class is answered: HTTP ``status`` and WebSocket ``ws_close`` code."""

    status: int
    ws_close: int = WS_CLOSE_POLICY_VIOLATION


ERROR_MAPPING: dict[type[e.ConferError], Wire] = {
    e.ConferError: Wire(500, WS_CLOSE_INTERNAL_ERROR),
    e.BadRequestError: Wire(400),
    e.ValidationFailedError: Wire(422),
    e.PayloadTooLargeError: Wire(413),
    e.AuthenticationError: Wire(401, WS_CLOSE_UNAUTHENTICATED),
    e.ForbiddenError: Wire(403, WS_CLOSE_FORBIDDEN),
    e.NotFoundError: Wire(404),
    e.ConflictError: Wire(409),
    e.PeerError: Wire(422),
    e.UnsupportedMediaTypeError: Wire(415),
    e.PreconditionFailedError: Wire(412),
    e.PreconditionRequiredError: Wire(428),
    e.RateLimitedError: Wire(429),
    e.TooManyConnectionsError: Wire(429, WS_CLOSE_TOO_MANY_CONNECTIONS),
    e.EncryptionNotConfiguredError: Wire(503, WS_CLOSE_INTERNAL_ERROR),
    e.EncryptionKeyError: Wire(500, WS_CLOSE_INTERNAL_ERROR),
    e.ServiceUnavailableError: Wire(503, WS_CLOSE_INTERNAL_ERROR),
    e.DatabaseBusyError: Wire(503, WS_CLOSE_TRY_AGAIN_LATER),
    e.TranslationFailedError: Wire(502, WS_CLOSE_INTERNAL_ERROR),
    e.GroupHomeUnreachableError: Wire(502, WS_CLOSE_INTERNAL_ERROR),
    e.NothingToTranslateError: Wire(422),
    e.OAuthError: Wire(400),
}


def wire_for(exc: e.ConferError) -> Wire:
    """The table entry of ``exc``'s class or of its nearest listed ancestor."""
    for cls in type(exc).__mro__:
        wire = ERROR_MAPPING.get(cls)
        if wire is not None:
            return wire
    return ERROR_MAPPING[e.ConferError]


def ws_close_code(exc: e.ConferError) -> int:
    """The WebSocket close code that reports ``exc`` (``docs/websocket.md``)."""
    return wire_for(exc).ws_close


def problem(
    status: int, code: str, title: str, detail: str, instance: str, **extra: Any
) -> JSONResponse:
    """Render an RFC 9457 problem details response (``application/problem+json``)."""
    body = {
        "type": f"urn:confer:problem:{code}",
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
        "instance": instance,
        **extra,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON)


REALM = 'realm="confer"'
_REQUESTED: InnerListType = (
    [(component, {}) for component in DEFAULT_COMPONENTS],
    {"created": True, "expires": True, "nonce": True, "alg": ALGORITHM, "tag": CONFER_TAG},
)
ACCEPT_SIGNATURE = http_sf.ser({"sig1": _REQUESTED})
"""The signature an A2A endpoint asks for (RFC 9421 §5.1 ``Accept-Signature``)."""


def challenge_headers(path: str) -> dict[str, str]:
    """The ``WWW-Authenticate`` of a 401 at ``path`` (RFC 9110 §11.6.1), naming the schemes
    the endpoint accepts: an A2A endpoint takes an RFC 9421 signature or an API key (Bearer),
    and asks for the signature with ``Accept-Signature``; every other endpoint takes a Bearer
    token."""
    if path == "/a2a" or path.endswith("/a2a"):
        return {
            "WWW-Authenticate": f"Signature {REALM}, Bearer {REALM}",
            "Accept-Signature": ACCEPT_SIGNATURE,
        }
    return {"WWW-Authenticate": f"Bearer {REALM}"}


def _unauthorized(response: JSONResponse, path: str) -> JSONResponse:
    if response.status_code == 401:
        response.headers.update(challenge_headers(path))
    return response


def problem_for(exc: e.ConferError, instance: str) -> JSONResponse:
    """The problem details response for ``exc`` at path ``instance``, with its headers
    (``Retry-After`` of a :class:`~gateway.errors.RateLimitedError`)."""
    status = wire_for(exc).status
    if status == 500:
        log.error("internal error on %s: %s", instance, exc.detail)
    elif status > 500:
        # a known condition with its own code (encryption not configured, a service down):
        # worth an operator's attention, but not a fault of ours
        log.warning("%s on %s: %s", exc.wire_code, instance, exc.detail)
    response = problem(status, exc.wire_code, exc.title, exc.detail, instance, **exc.extra)
    response.headers.update(getattr(exc, "headers", None) or {})
    return _unauthorized(response, instance)


async def _confer_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, e.ConferError)
    return problem_for(exc, request.url.path)


async def _oauth_error(request: Request, exc: Exception) -> JSONResponse:
    """RFC 6749 §5.2 error JSON (never cached, RFC 6749 §5.1)."""
    assert isinstance(exc, e.OAuthError)
    return JSONResponse(
        {"error": exc.error, "error_description": exc.detail},
        status_code=exc.status,
        headers={"Cache-Control": "no-store"},
    )


async def _a2a_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, A2AError)
    path = request.url.path
    return _unauthorized(
        problem(401, exc.code, "Signature verification failed", exc.detail, path), path
    )


async def _did_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DIDError)
    status = 401 if isinstance(exc, DIDKeyError) else 422
    path = request.url.path
    return _unauthorized(problem(status, exc.code, "DID could not be used", exc.detail, path), path)


def _json_safe(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return str(value)


def _reason(message: str) -> str:
    """Pydantic's message for one field, without the ``Value error, `` its validators' start
    with (``"Value error, must be an http or https URL with a host"``)."""
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in exc.errors()
    ]
    if any(err["type"] == "json_invalid" for err in errors):
        malformed = e.MalformedJSONError("the request body could not be parsed as JSON")
        return problem_for(malformed, request.url.path)
    # each field with pydantic's reason (a length limit, a pattern…): a client shows the
    # detail as it is, and "invalid fields: body.username" alone tells nobody what to change
    fields = "; ".join(
        f"{'.'.join(str(p) for p in err['loc'])}: {_reason(str(err['msg']))}" for err in errors
    )
    invalid = e.ValidationFailedError(f"invalid fields: {fields}", errors=_json_safe(errors))
    return problem_for(invalid, request.url.path)


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc.__cause__, RecursionError):
        # FastAPI reports a body nested too deeply for the JSON parser as a parse error.
        too_deep = e.ValidationFailedError("the JSON body is nested too deeply")
        return problem_for(too_deep, request.url.path)
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    detail = exc.detail if isinstance(exc.detail, str) else code
    response = problem(exc.status_code, code, detail, detail, request.url.path)
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    return response


async def _untranslatable_text(request: Request, exc: Exception) -> JSONResponse:
    """PostgreSQL text cannot hold U+0000: the transaction rolled back; the input is invalid."""
    return problem(
        422,
        "invalid_text",
        "The request contains text that cannot be stored",
        "text must not contain the NUL character (U+0000)",
        request.url.path,
    )


async def _unstorable_value(request: Request, exc: Exception) -> JSONResponse:
    """A last line behind validation: PostgreSQL refused a value (a number out of its column's
    range, JSON it cannot hold). The transaction rolled back; the input is invalid."""
    out_of_range = isinstance(exc, asyncpg.exceptions.NumericValueOutOfRangeError)
    return problem(
        422,
        "value_out_of_range" if out_of_range else "invalid_input",
        "The request holds a value that cannot be stored",
        str(exc).splitlines()[0][:300],
        request.url.path,
    )


async def _statement_timeout(request: Request, exc: Exception) -> JSONResponse:
    """PostgreSQL cancelled a statement (``statement_timeout``, SQLSTATE 57014): the database
    is too slow to answer now; the transaction rolled back."""
    busy = e.DatabaseBusyError("a database statement took longer than the statement timeout")
    return problem_for(busy, request.url.path)


async def _database_refused(request: Request, exc: Exception) -> JSONResponse:
    """PostgreSQL refused a new connection for the pool: too many clients (SQLSTATE 53300)
    or not accepting connections now (57P03, starting up or shutting down). Nothing was
    done; the client may try again shortly."""
    log.warning("the database refused a connection on %s: %s", request.url.path, exc)
    busy = e.DatabaseBusyError("the database refused a new connection; try again shortly")
    return problem_for(busy, request.url.path)


async def _rate_limit_storage(request: Request, exc: Exception) -> JSONResponse:
    """Redis (``CONFER_REDIS_URL``) did not answer during the request: most often while a
    login, registration, password reset or OAuth request was counted. Those limits guard
    passwords against guessing, so the request is refused (503 ``backend_unavailable``,
    ``Retry-After``) rather than let through uncounted."""
    log.warning("Redis does not answer on %s: %s", request.url.path, exc)
    down = e.BackendUnavailableError("a shared store (Redis) does not answer; try again")
    return problem_for(down, request.url.path)


def install_redis_handler(app: FastAPI) -> None:
    """Answer a Redis error that reached a route (``CONFER_REDIS_URL`` gone: presence, typing,
    unread counts) with 503 ``backend_unavailable`` as the rate limits' is, not a 500. Only
    for an app with Redis configured: it imports redis-py."""
    from redis.exceptions import ConnectionError, TimeoutError

    for failure in (ConnectionError, TimeoutError):
        app.add_exception_handler(failure, _rate_limit_storage)


async def _transaction_conflict(request: Request, exc: Exception) -> JSONResponse:
    """PostgreSQL ended the transaction to resolve a conflict with a concurrent one: a
    deadlock (SQLSTATE 40P01) or a serialization failure (40001). The transaction rolled
    back, so nothing was done; the same request again will almost always succeed."""
    log.warning("a transaction conflict on %s %s: %s", request.method, request.url.path, exc)
    busy = e.DatabaseBusyError(
        "the request met a concurrent change and was rolled back; try again", retry_after=1
    )
    return problem_for(busy, request.url.path)


async def _client_disconnect(request: Request, exc: Exception) -> JSONResponse:
    """The client went away before its body was read (``await request.body()`` in a
    dependency, e.g. the A2A caller's signature check): nothing was done, nobody is there to
    answer; not an error of ours, so no traceback. The status is for the access log."""
    log.debug("client disconnected during %s %s", request.method, request.url.path)
    return problem(
        400,
        "client_disconnected",
        "The client disconnected",
        "the request body ended before it was complete",
        request.url.path,
    )


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return problem(500, "internal_error", "Internal error", "unexpected error", request.url.path)


def install_error_handlers(app: FastAPI) -> None:
    """Register the one mapping from exceptions to problem details on ``app``."""
    app.add_exception_handler(e.ConferError, _confer_error)
    app.add_exception_handler(e.OAuthError, _oauth_error)
    app.add_exception_handler(A2AError, _a2a_error)
    app.add_exception_handler(DIDError, _did_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for text_error in (
        asyncpg.exceptions.CharacterNotInRepertoireError,
        asyncpg.exceptions.UntranslatableCharacterError,
    ):
        app.add_exception_handler(text_error, _untranslatable_text)
    for value_error in (
        asyncpg.exceptions.InvalidTextRepresentationError,
        asyncpg.exceptions.NumericValueOutOfRangeError,
    ):
        app.add_exception_handler(value_error, _unstorable_value)
    app.add_exception_handler(asyncpg.exceptions.QueryCanceledError, _statement_timeout)
    for refusal in (
        asyncpg.exceptions.TooManyConnectionsError,
        asyncpg.exceptions.CannotConnectNowError,
    ):
        app.add_exception_handler(refusal, _database_refused)
    for conflict in (
        asyncpg.exceptions.DeadlockDetectedError,
        asyncpg.exceptions.SerializationError,
    ):
        app.add_exception_handler(conflict, _transaction_conflict)
    app.add_exception_handler(StorageError, _rate_limit_storage)
    app.add_exception_handler(ClientDisconnect, _client_disconnect)
    app.add_exception_handler(Exception, _unexpected_error)
