"""One error tree, one response shape: RFC 9457 problem details with a stable ``code``.

Every error Confer raises on purpose is a :class:`ConferError` subclass with a wire ``code``
and an HTTP ``status``. The ``a2a`` and ``did`` libraries raise their own errors; they are
mapped here, in one place, together with FastAPI's validation errors and Starlette's HTTP
errors, so a client only ever sees ``application/problem+json``.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import asyncpg
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


# --- the own agent's context: memories, knowledge, project memory (issue 6) ---


class AgentNotFoundError(NotFoundError):
    code, title = "agent_not_found", "No such agent of yours"


class MemoryNotFoundError(NotFoundError):
    code, title = "memory_not_found", "No such memory"


class KnowledgeNotFoundError(NotFoundError):
    code, title = "knowledge_not_found", "No such knowledge entry"


class KnowledgeDuplicateError(ConflictError):
    code, title = "knowledge_duplicate", "The same content is already in your knowledge base"


class ProjectMemoryNotFoundError(NotFoundError):
    code, title = "project_memory_not_found", "No project memory for this project and peer"


class VersionConflictError(ConflictError):
    """A write named a version that is no longer current (``If-Match`` on a stale version)."""

    code, title = "version_conflict", "The document changed since you read it"


class PreconditionFailedError(ConferError):
    code, status, title = "precondition_failed", 412, "The If-Match version does not match"


class PreconditionRequiredError(ConferError):
    code, status, title = "precondition_required", 428, "Send If-Match with the version you read"


class UsernameInvalidError(ValidationFailedError):
    """A username breaks the rules of ``gateway.services.usernames`` (422, names the field)."""

    title = "The username cannot be used"

    def __init__(self, detail: str, *, field: str = "username") -> None:
        super().__init__(
            detail, errors=[{"loc": ["body", field], "msg": detail, "type": "username_invalid"}]
        )


class FieldInvalidError(ValidationFailedError):
    """One field (``loc`` as pydantic gives it: ``["body", "email"]``) holds a value the service
    refuses (422, same shape as pydantic's errors)."""

    def __init__(self, loc: list[str | int], detail: str, kind: str = "value_error") -> None:
        path = ".".join(str(p) for p in loc)
        super().__init__(
            f"invalid fields: {path}: {detail}",
            errors=[{"loc": list(loc), "msg": detail, "type": kind}],
        )


class EmailTakenError(ConflictError):
    code, title = "email_taken", "That email address belongs to another account"


class PhoneTakenError(ConflictError):
    code, title = "phone_taken", "That phone number belongs to another account"


class RefreshTokenInvalidError(AuthenticationError):
    code, title = "refresh_token_invalid", "The refresh token is not valid"


class AccountDisabledError(ForbiddenError):
    code, title = "account_disabled", "This account has been disabled by an administrator"


class AdminRequiredError(ForbiddenError):
    code, title = "admin_required", "Only administrators may do this"


class RateLimitedError(ConferError):
    """Too many attempts; ``Retry-After`` (RFC 9110 §10.2.3) says when to try again."""

    code, status, title = "rate_limited", 429, "Too many requests"

    def __init__(self, detail: str, *, retry_after: int) -> None:
        super().__init__(detail, retry_after=retry_after)
        self.headers = {"Retry-After": str(retry_after)}


class SessionNotFoundError(NotFoundError):
    code, title = "session_not_found", "No such session"


class LLMKeyNotFoundError(NotFoundError):
    code, title = "llm_key_not_found", "No key is stored for that provider"


class EncryptionNotConfiguredError(ConferError):
    code, status = "encryption_not_configured", 503
    title = "CONFER_ENCRYPTION_KEYS is not set; LLM keys cannot be stored"


class EncryptionKeyError(ConferError):
    """Stored ciphertext cannot be decrypted: its key id is unknown, or the key is wrong, or
    the data was tampered with. An operator problem, never returned as garbage."""

    code, status, title = "encryption_key_error", 500, "Stored secret cannot be decrypted"


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
    response = problem(
        exc.status, _wire_code(exc), exc.title, exc.detail, request.url.path, **exc.extra
    )
    response.headers.update(getattr(exc, "headers", None) or {})
    return response


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
    app.add_exception_handler(Exception, _unexpected_error)


class ApiKeyNotFoundError(NotFoundError):
    code, title = "api_key_not_found", "No such API key"


class ApiKeyInvalidError(AuthenticationError):
    code, title = "api_key_invalid", "The API key is not valid or was revoked"


class ApiKeyScopeError(ForbiddenError):
    code, title = "api_key_scope", "API keys may call this user's agents and public agents only"


class ContactNotFoundError(NotFoundError):
    code, title = "contact_not_found", "No such contact"


class AgentNotReachableError(ForbiddenError):
    code, title = "agent_not_reachable", "That agent belongs to another user and is not public"


class PeerBlockedError(ForbiddenError):
    code, title = "peer_blocked", "The recipient does not accept requests from this peer"


class PermissionNotFoundError(NotFoundError):
    code, title = "permission_not_found", "No such permission request"


class PermissionDecidedError(ConflictError):
    code, title = "permission_decided", "The permission request was already decided"


class PermissionExpiredError(ConflictError):
    code, title = "permission_expired", "The permission request expired and was denied"


class ServiceUnavailableError(ConferError):
    code, status, title = "service_unavailable", 503, "A backing service is unavailable"


class TranslationFailedError(ConferError):
    code, status, title = "translation_failed", 502, "The translation model could not translate"


class NothingToTranslateError(ConferError):
    code, status, title = "nothing_to_translate", 422, "The message has no text to translate"
