"""A2A 1.0 protocol shapes for the JSON-RPC binding: requests, task states, errors.

Only what Confer reads is modelled; unknown members are ignored (A2A §4.5 "Unknown fields
SHOULD be ignored"). JSON is ProtoJSON: camelCase members, enum strings such as
``TASK_STATE_COMPLETED`` and ``ROLE_USER``, results wrapped as ``{"task": …}`` /
``{"message": …}`` / ``{"statusUpdate": …}``. Source: A2A specification 1.0 §4–§9,
``specification/a2a.proto`` (package ``lf.a2a.v1``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from did.resolver import json_nesting_exceeds

PROTOCOL_VERSION = "1.0"
VERSION_HEADER = "A2A-Version"
JSONRPC_BINDING = "JSONRPC"
ERROR_DOMAIN = "a2a-protocol.org"

TaskState = Literal[
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
]
TERMINAL_STATES: frozenset[str] = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
INTERRUPTED_STATES: frozenset[str] = frozenset(
    {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"}
)
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
MAX_BODY_DEPTH = 64
"""Deepest nesting of arrays/objects accepted in a JSON-RPC body: the envelope and an A2A
message take about eight levels, their ``data`` parts and metadata the rest."""

Id = Annotated[str, StringConstraints(min_length=1, max_length=128)]


class Part(BaseModel):
    """``Part``: one piece of content; Confer reads ``text`` and ``data`` (A2A §4.5)."""

    model_config = ConfigDict(extra="allow")
    text: str | None = None
    data: Any = None


class Message(BaseModel):
    """``Message``: id, context, task, role, parts, metadata (A2A §4.5)."""

    model_config = ConfigDict(extra="allow")
    messageId: Id
    contextId: Id | None = None
    taskId: Id | None = None
    role: Literal["ROLE_USER", "ROLE_AGENT"]
    parts: list[Part] = Field(min_length=1)
    metadata: dict[str, Any] | None = None


class SendMessageParams(BaseModel):
    """``SendMessageRequest`` params (A2A §9, ``SendMessage`` / ``SendStreamingMessage``)."""

    model_config = ConfigDict(extra="allow")
    tenant: str | None = None
    message: Message
    configuration: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None


class GetTaskParams(BaseModel):
    """``GetTaskRequest``: ``historyLength`` unset = everything, 0 = none."""

    model_config = ConfigDict(extra="allow")
    tenant: str | None = None
    id: Id
    historyLength: Annotated[int, Field(ge=0)] | None = None


class TaskIdParams(BaseModel):
    """``CancelTaskRequest`` / ``SubscribeToTaskRequest``: the task id."""

    model_config = ConfigDict(extra="allow")
    tenant: str | None = None
    id: Id
    metadata: dict[str, Any] | None = None


class ListTasksParams(BaseModel):
    """``ListTasksRequest`` (new in 1.0): filters and paging; newest status first."""

    model_config = ConfigDict(extra="allow")
    tenant: str | None = None
    contextId: Id | None = None
    status: TaskState | None = None
    pageSize: Annotated[int, Field(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE
    pageToken: Annotated[str, StringConstraints(max_length=256)] | None = None
    historyLength: Annotated[int, Field(ge=0)] | None = None
    includeArtifacts: bool = False


MAX_PUSH_URL_CHARS = 2048
MAX_PUSH_TOKEN_CHARS = 512
MAX_PUSH_CREDENTIALS_CHARS = 4096
HeaderText = r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$"
"""Visible ASCII (inner spaces allowed): what may go into an HTTP header value as it is — no
CR/LF (header injection), no other control characters."""


class PushAuthentication(BaseModel):
    """``AuthenticationInfo``: sent back as ``Authorization: <scheme> <credentials>``."""

    model_config = ConfigDict(extra="allow")
    scheme: Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9._~+-]{0,63}$")]
    credentials: (
        Annotated[str, StringConstraints(max_length=MAX_PUSH_CREDENTIALS_CHARS, pattern=HeaderText)]
        | None
    ) = None


class PushConfigParams(BaseModel):
    """``TaskPushNotificationConfig`` (flattened in 1.0): the body of
    ``CreateTaskPushNotificationConfig`` and ``SendMessageConfiguration
    .taskPushNotificationConfig`` (``taskId`` is then the new task's)."""

    model_config = ConfigDict(extra="allow")
    tenant: str | None = None
    id: Id | None = None
    taskId: Id | None = None
    url: Annotated[str, StringConstraints(min_length=1, max_length=MAX_PUSH_URL_CHARS)]
    token: (
        Annotated[str, StringConstraints(max_length=MAX_PUSH_TOKEN_CHARS, pattern=HeaderText)]
        | None
    ) = None
    authentication: PushAuthentication | None = None


class PushConfigIdParams(BaseModel):
    """``GetTaskPushNotificationConfigRequest`` / ``DeleteTaskPushNotificationConfigRequest``."""

    model_config = ConfigDict(extra="allow")
    tenant: str | None = None
    taskId: Id
    id: Id


class ListPushConfigsParams(BaseModel):
    """``ListTaskPushNotificationConfigsRequest``: a task's configs, by id, paged."""

    model_config = ConfigDict(extra="allow")
    tenant: str | None = None
    taskId: Id
    pageSize: Annotated[int, Field(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE
    pageToken: Annotated[str, StringConstraints(max_length=256)] | None = None


class JSONRPCError(Exception):
    """A JSON-RPC error object (JSON-RPC 2.0 §5.1, A2A §9.5) with an ``ErrorInfo`` reason."""

    code: ClassVar[int] = -32603
    reason: ClassVar[str] = "INTERNAL_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_json(self) -> dict[str, Any]:
        """``{"code", "message", "data": [ErrorInfo]}`` as A2A 1.0 servers send it."""
        return {
            "code": self.code,
            "message": self.message,
            "data": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": self.reason,
                    "domain": ERROR_DOMAIN,
                }
            ],
        }


class ParseError(JSONRPCError):
    code, reason = -32700, "PARSE_ERROR"


class InvalidRequestError(JSONRPCError):
    code, reason = -32600, "INVALID_REQUEST"


class MethodNotFoundError(JSONRPCError):
    code, reason = -32601, "METHOD_NOT_FOUND"


class InvalidParamsError(JSONRPCError):
    code, reason = -32602, "INVALID_PARAMS"


class TaskNotFoundError(JSONRPCError):
    code, reason = -32001, "TASK_NOT_FOUND"


class TaskNotCancelableError(JSONRPCError):
    code, reason = -32002, "TASK_NOT_CANCELABLE"


class PushNotificationNotSupportedError(JSONRPCError):
    code, reason = -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED"


class UnsupportedOperationError(JSONRPCError):
    code, reason = -32004, "UNSUPPORTED_OPERATION"


class ContentTypeNotSupportedError(JSONRPCError):
    code, reason = -32005, "CONTENT_TYPE_NOT_SUPPORTED"


class VersionNotSupportedError(JSONRPCError):
    code, reason = -32009, "VERSION_NOT_SUPPORTED"


def parse_call(body: bytes) -> tuple[str | int, str, Any]:
    """``(id, method, params)`` of a JSON-RPC 2.0 request body.

    Raises ParseError (not UTF-8 JSON, or nested deeper than :data:`MAX_BODY_DEPTH`, checked
    before parsing) or InvalidRequestError (not a JSON-RPC 2.0 call with an id).
    """
    return call_of(parse_body(body))


def parse_body(body: bytes, depth: int = MAX_BODY_DEPTH) -> Any:
    """The JSON value of a JSON-RPC body, nested at most ``depth`` deep (checked before
    parsing). Raises ParseError (JSON-RPC 2.0 §5.1)."""
    try:
        text = body.decode("utf-8")
        if json_nesting_exceeds(text, depth):
            raise ParseError(f"Parse error: the body is nested deeper than {depth}")
        return json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ParseError("Parse error: the body is not JSON") from exc


def call_of(payload: Any) -> tuple[str | int, str, Any]:
    """``(id, method, params)`` of one parsed JSON-RPC 2.0 call (a body, or one element of a
    batch). Raises InvalidRequestError (not a JSON-RPC 2.0 call with an id)."""
    if (
        not isinstance(payload, dict)
        or payload.get("jsonrpc") != "2.0"
        or not isinstance(payload.get("method"), str)
        or not isinstance(payload.get("id"), str | int)
        or isinstance(payload.get("id"), bool)
    ):
        raise InvalidRequestError("Invalid Request: not a JSON-RPC 2.0 call with an id")
    return payload["id"], payload["method"], payload.get("params")


def parse_batch(body: bytes, max_items: int) -> list[Any]:
    """The elements of a JSON-RPC 2.0 batch body (§6), each still to be checked with
    :func:`call_of` on its own.

    Raises ParseError (not JSON, too deep: one level more than a single call may use) or
    InvalidRequestError (not an array, an empty array, more than ``max_items`` elements).
    """
    payload = parse_body(body, MAX_BODY_DEPTH + 1)
    if not isinstance(payload, list) or not payload:
        raise InvalidRequestError("Invalid Request: a batch is a non-empty array of calls")
    if len(payload) > max_items:
        raise InvalidRequestError(f"Invalid Request: a batch carries at most {max_items} calls")
    return payload


def result_envelope(rpc_id: str | int | None, result: Any) -> dict[str, Any]:
    """A JSON-RPC success response."""
    return {"jsonrpc": "2.0", "id": rpc_id, "result": result}


def error_envelope(rpc_id: str | int | None, error: JSONRPCError) -> dict[str, Any]:
    """A JSON-RPC error response."""
    return {"jsonrpc": "2.0", "id": rpc_id, "error": error.to_json()}


def message_text(message: Message, max_chars: int) -> str:
    """The message's text parts joined by newlines.

    Raises ContentTypeNotSupportedError when there is no text part and InvalidParamsError
    when the text exceeds ``max_chars`` characters.
    """
    text = "\n".join(p.text for p in message.parts if p.text)
    if not text:
        raise ContentTypeNotSupportedError("the message has no text part")
    if len(text) > max_chars:
        raise InvalidParamsError(f"the message text exceeds {max_chars} characters")
    return text


def agent_text_message(
    text: str, *, message_id: str, context_id: str, task_id: str, data: Any = None
) -> dict[str, Any]:
    """A ``ROLE_AGENT`` message with a text part (and a data part when ``data`` is given)."""
    parts: list[dict[str, Any]] = [{"text": text}]
    if data is not None:
        parts.append({"data": data})
    return {
        "messageId": message_id,
        "contextId": context_id,
        "taskId": task_id,
        "role": "ROLE_AGENT",
        "parts": parts,
    }
