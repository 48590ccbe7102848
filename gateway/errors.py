"""One error tree, one response shape: RFC 9457 problem details with a stable ``code``.

Every error Confer raises on purpose is a :class:`ConferError` subclass with a wire ``code``
and an HTTP ``status``. The ``a2a`` and ``did`` libraries raise their own errors; they are
mapped here, in one place, together with FastAPI's validation errors and Starlette's HTTP
errors, so a client only ever sees ``application/problem+json``.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from a2a.errors import A2AError
from did.errors import DIDError, DIDKeyError

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
WS_CLOSE_POLICY_VIOLATION = 1008


class ConferError(Exception):
    """Base of every deliberate error. ``code`` is stable and documented; ``status`` is HTTP."""

    code: ClassVar[str] = "internal_error"
    status: ClassVar[int] = 500
    title: ClassVar[str] = "Internal error"

    def __init__(self, detail: str | None = None, **extra: Any) -> None:
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.extra = extra


class BadRequestError(ConferError):
    code, status, title = "bad_request", 400, "Bad request"


class MalformedJSONError(BadRequestError):
    code, title = "malformed_json", "The request body is not valid JSON"


class ValidationFailedError(ConferError):
    code, status, title = "validation_failed", 422, "The request is not valid"


class PayloadTooLargeError(ConferError):
    code, status, title = "payload_too_large", 413, "The request body is too large"


class AuthenticationError(ConferError):
    code, status, title = "unauthorized", 401, "Authentication required"


class InvalidCredentialsError(AuthenticationError):
    code, title = "invalid_credentials", "Wrong username or password"


class TokenInvalidError(AuthenticationError):
    code, title = "token_invalid", "The access token is not valid"


class FederationAuthError(AuthenticationError):
    """A signed server-to-server request failed authentication (RFC 9421 §3.2)."""

    code, title = "federation_unauthorized", "The federation request is not authenticated"

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.wire_code = code


class ForbiddenError(ConferError):
    code, status, title = "forbidden", 403, "Not allowed"


class NotFoundError(ConferError):
    code, status, title = "not_found", 404, "Not found"


class ConversationNotFoundError(NotFoundError):
    code, title = "conversation_not_found", "No such conversation"


class RecipientNotFoundError(NotFoundError):
    code, title = "recipient_not_found", "No such user or agent on this instance"


class UserNotFoundError(NotFoundError):
    code, title = "user_not_found", "No such user"


class ConflictError(ConferError):
    code, status, title = "conflict", 409, "Conflict"


class UsernameTakenError(ConflictError):
    code, title = "username_taken", "That username is taken"


class PeerError(ConferError):
    """A peer (DID) supplied by our user cannot be used."""

    code, status, title = "peer_invalid", 422, "The peer cannot be used"

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.wire_code = code


class NotConversationAdminError(ForbiddenError):
    code, title = "not_conversation_admin", "Only the conversation's admins may do that"


class ObserverCannotPostError(ForbiddenError):
    code, title = "observer_cannot_post", "Observers read but cannot post"


class ConversationArchivedError(ConflictError):
    code, title = "conversation_archived", "The conversation is archived (read-only)"


class NotAGroupError(ConflictError):
    code, title = "not_a_group", "Participants can only be added to or removed from a group"


class AlreadyParticipantError(ConflictError):
    code, title = "already_participant", "Already a participant"


class ParticipantNotFoundError(NotFoundError):
    code, title = "participant_not_found", "No such participant in this conversation"


class MessageNotFoundError(NotFoundError):
    code, title = "message_not_found", "No such message"


class NotMessageAuthorError(ForbiddenError):
    code, title = "not_message_author", "Only the author may change this message"


class EditConflictError(ConflictError):
    code, title = "edit_conflict", "The message changed since that version"


class IdempotencyKeyReusedError(ValidationFailedError):
    code, title = "idempotency_key_reused", "The Idempotency-Key was used for another request"


class AttachmentNotFoundError(NotFoundError):
    code, title = "attachment_not_found", "No such attachment"


class ThreadNotFoundError(NotFoundError):
    code, title = "thread_not_found", "No such thread"


class ThreadExistsError(ConflictError):
    code, title = "thread_exists", "That message already roots an archived thread"


class UnsupportedMediaTypeError(ConferError):
    code, status, title = "unsupported_media_type", 415, "Unsupported media type"


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


def _wire_code(exc: ConferError) -> str:
    return getattr(exc, "wire_code", None) or exc.code


async def _confer_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ConferError)
    if exc.status >= 500:
        log.error("internal error on %s: %s", request.url.path, exc.detail)
    return problem(
        exc.status, _wire_code(exc), exc.title, exc.detail, request.url.path, **exc.extra
    )


async def _a2a_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, A2AError)
    return problem(401, exc.code, "Signature verification failed", exc.detail, request.url.path)


async def _did_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DIDError)
    status = 401 if isinstance(exc, DIDKeyError) else 422
    return problem(status, exc.code, "DID could not be used", exc.detail, request.url.path)


def _json_safe(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return str(value)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
        for e in exc.errors()
    ]
    if any(e["type"] == "json_invalid" for e in errors):
        err = MalformedJSONError("the request body could not be parsed as JSON")
        return problem(400, err.code, err.title, err.detail, request.url.path)
    fields = ", ".join(".".join(str(p) for p in e["loc"]) for e in errors)
    return problem(
        422,
        ValidationFailedError.code,
        ValidationFailedError.title,
        f"invalid fields: {fields}",
        request.url.path,
        errors=_json_safe(errors),
    )


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
        err = ValidationFailedError("the JSON body is nested too deeply")
        return problem(err.status, err.code, err.title, err.detail, request.url.path)
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    detail = exc.detail if isinstance(exc.detail, str) else code
    response = problem(exc.status_code, code, detail, detail, request.url.path)
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    return response


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return problem(500, "internal_error", "Internal error", "unexpected error", request.url.path)


def install_error_handlers(app: FastAPI) -> None:
    """Register the one mapping from exceptions to problem details on ``app``."""
    app.add_exception_handler(ConferError, _confer_error)
    app.add_exception_handler(A2AError, _a2a_error)
    app.add_exception_handler(DIDError, _did_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
