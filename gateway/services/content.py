"""What a message may contain: the ``content_json`` shape of each content type, and the text
rules (no NUL, no lone surrogates, bounded length and nesting) that PostgreSQL would otherwise
reject with a 500.

Shapes (``content_type`` → ``content`` / ``content_json``):

- ``text``: ``content`` required; no ``content_json``.
- ``code``: ``content`` is the source; ``content_json`` optional ``{"language", "filename"}``.
- ``permission_request``: ``{"action", "level": "L1"|"L2"|"L3", "scope": {…}, "permission_id"?}``.
- ``tool_call``: ``{"call_id", "name", "arguments": {…}}``.
- ``tool_result``: ``{"call_id", "result": any, "is_error"?: bool}``.
- ``file``: ``{"attachment_id", "filename", "mime_type"?, "size_bytes"?}``; the server
  replaces ``filename``, ``mime_type`` and ``size_bytes`` with the upload's
  (:func:`gateway.services.attachments.take_upload`).
- ``citation``: ``citations`` required (at least one); ``content`` optional.
- ``system_notice``: written by the server only; clients get 422.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints, ValidationError

from gateway.errors import ValidationFailedError
from models.api import MessageCreate
from models.base import Ulid, unstorable

MAX_JSON_BYTES = 64 * 1024

Name = Annotated[str, StringConstraints(min_length=1, max_length=255)]


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CodeShape(_Shape):
    language: Annotated[str, StringConstraints(max_length=32)] | None = None
    filename: Name | None = None


class PermissionRequestShape(_Shape):
    action: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    level: Literal["L1", "L2", "L3"]
    scope: dict[str, JsonValue]
    permission_id: Ulid | None = None


class ToolCallShape(_Shape):
    call_id: Name
    name: Name
    arguments: dict[str, JsonValue] = Field(default_factory=dict)


class ToolResultShape(_Shape):
    call_id: Name
    result: JsonValue = None
    is_error: bool = False


class FileShape(_Shape):
    attachment_id: Ulid
    filename: Name
    mime_type: Annotated[str, StringConstraints(max_length=128)] | None = None
    size_bytes: int | None = Field(default=None, ge=0)


SHAPES: dict[str, type[_Shape]] = {
    "code": CodeShape,
    "permission_request": PermissionRequestShape,
    "tool_call": ToolCallShape,
    "tool_result": ToolResultShape,
    "file": FileShape,
}


def check_text(value: str, where: str) -> None:
    """ValidationFailedError when ``value`` holds NUL or a lone surrogate (not storable)."""
    check_json(value, where)


def check_json(value: Any, where: str) -> None:
    """ValidationFailedError when PostgreSQL could not store ``value``: too deep, a non-finite
    number, NUL or a lone surrogate in a string or key (:func:`models.base.unstorable`)."""
    reason = unstorable(value)
    if reason is not None:
        raise ValidationFailedError(f"{where} {reason}")


def validate_message(data: MessageCreate) -> None:
    """Check a message body against its content type. Raises ValidationFailedError (422)."""
    if data.content is not None:
        check_text(data.content, "content")
    for name in ("content_json", "citations", "translation", "language"):
        value = getattr(data, name)
        if value is not None:
            dumped = value if name == "content_json" else data.model_dump(mode="json")[name]
            check_json(dumped, name)
    if data.content_json is not None:
        if len(json.dumps(data.content_json)) > MAX_JSON_BYTES:
            raise ValidationFailedError(f"content_json is larger than {MAX_JSON_BYTES} bytes")
    _check_shape(data)


def _check_shape(data: MessageCreate) -> None:
    kind = data.content_type
    if kind == "system_notice":
        raise ValidationFailedError("system notices are written by the server only")
    if kind in ("text", "code") and not data.content:
        raise ValidationFailedError(f"a {kind} message needs content")
    if kind == "text" and data.content_json is not None:
        raise ValidationFailedError("a text message takes no content_json")
    if kind == "citation" and not data.citations:
        raise ValidationFailedError("a citation message needs citations")
    shape = SHAPES.get(kind)
    if shape is None:
        return
    if data.content_json is None and kind != "code":
        raise ValidationFailedError(f"a {kind} message needs content_json")
    if data.content_json is not None:
        try:
            shape.model_validate(data.content_json)
        except ValidationError as exc:
            fields = ", ".join(".".join(str(p) for p in e["loc"]) or "." for e in exc.errors())
            raise ValidationFailedError(f"content_json does not fit {kind}: {fields}") from exc
