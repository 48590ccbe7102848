"""The base class and shared field types of every Confer model.

Source: the data model spec ("Confer — Modelo de datos"): "all identifiers are ULIDs", stored as
``CHAR(26)``; timestamps are ``TIMESTAMPTZ``.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    JsonValue,
    StringConstraints,
    TypeAdapter,
)

ULID_PATTERN = r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$"
"""The canonical text form of a ULID: 26 upper-case Crockford base32 characters, the first at
most ``7`` (128 bits; ULID spec, "Overflow Errors"). Every id Confer issues has this form, and
every id it is given (a path or query parameter, a body field, a peer's message) must: a
lower-case or otherwise non-canonical spelling is invalid, never looked up or compared."""

Ulid = Annotated[str, StringConstraints(pattern=ULID_PATTERN)]
"""A ULID in its canonical text form (:data:`ULID_PATTERN`, ``CHAR(26)``)."""


def clean_name(value: str | None) -> str | None:
    """A name fit to show, or None when nothing is left: characters that print nothing —
    control characters (Cc), format characters (Cf: bidi controls such as U+202E, zero-width
    characters such as U+200B), separators other than the ASCII space, unassigned and private
    code points — are dropped, except that whitespace among them (tab, newline, U+00A0) becomes
    a space; runs of spaces collapse to one and the ends are trimmed. Applied to every name
    shown to other people: a local display name or group name (:data:`DisplayName`,
    :data:`GroupName`), a peer's signed ``senderName``, profile name and group name."""
    if not value:
        return None
    kept = "".join(c if c.isprintable() else " " if c.isspace() else "" for c in value)
    return " ".join(kept.split()) or None


def _cleaned(value: str) -> str:
    if "\x00" in value:  # as everywhere in the API: a NUL is refused, not cleaned away
        raise ValueError("must not contain NUL characters")
    shown = clean_name(value)
    if shown is None:
        raise ValueError(
            "must contain a visible character (control, bidi, zero-width characters and"
            " surrounding whitespace are removed)"
        )
    return shown


DisplayName = Annotated[str, StringConstraints(max_length=128), AfterValidator(_cleaned)]
"""A person's or agent's display name as given to this instance, stored cleaned
(:func:`clean_name`); a value with nothing left after cleaning is invalid (422)."""

GroupName = Annotated[str, StringConstraints(max_length=255), AfterValidator(_cleaned)]
"""A group's name as given to this instance, stored cleaned (:func:`clean_name`); a value with
nothing left after cleaning is invalid (422)."""


KeyName = Annotated[str, StringConstraints(min_length=1, max_length=128), AfterValidator(_cleaned)]
"""The name a user gives one of their API keys, stored cleaned (:func:`clean_name`) since it
is shown back in lists; a value with nothing left after cleaning is invalid (422)."""


Timestamp = AwareDatetime
"""A ``TIMESTAMPTZ``: a datetime with a time zone (naive datetimes are rejected)."""

_TIMESTAMP = TypeAdapter(AwareDatetime)


def wire_timestamp(value: datetime) -> str:
    """``value`` as every model writes a :data:`Timestamp` in JSON: RFC 3339 with ``Z`` for
    UTC (``2026-11-30T06:38:24.123456Z``), not ``datetime.isoformat``'s ``+00:00``. For event
    bodies built by hand."""
    return str(_TIMESTAMP.dump_python(value, mode="json"))


MAX_JSON_DEPTH = 32
_SURROGATE = re.compile("[\ud800-\udfff]")


def unstorable(value: Any, depth: int = 0) -> str | None:
    """Why PostgreSQL could not store the JSON ``value`` (``jsonb``/``text``), or None: nested
    deeper than :data:`MAX_JSON_DEPTH`, a non-finite number (JSON has none, RFC 8259 §6; ``1e400``
    parses as infinity), or a string or key holding U+0000 or a lone surrogate."""
    if depth > MAX_JSON_DEPTH:
        return f"is nested deeper than {MAX_JSON_DEPTH} levels"
    if isinstance(value, float) and not math.isfinite(value):
        return "holds a number that is not finite (NaN, infinity)"
    if isinstance(value, str):
        if "\x00" in value:
            return "contains a NUL character"
        if _SURROGATE.search(value):
            return "contains a lone surrogate"
    elif isinstance(value, list):
        return next((r for item in value if (r := unstorable(item, depth + 1))), None)
    elif isinstance(value, dict):
        return next(
            (
                r
                for key, item in value.items()
                if (r := unstorable(key, depth + 1) or unstorable(item, depth + 1))
            ),
            None,
        )
    return None


def _check_storable(value: Any) -> Any:
    reason = unstorable(value)
    if reason is not None:
        raise ValueError(f"the value {reason}")
    return value


StoredJson = Annotated[JsonValue, AfterValidator(_check_storable)]
"""Free-form JSON that PostgreSQL ``jsonb`` can hold (see :func:`unstorable`)."""


_DECIMAL_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")


def _decimal_integer(value: Any) -> Any:
    if isinstance(value, str) and not _DECIMAL_INTEGER.fullmatch(value):
        raise ValueError("must be a whole number in decimal digits")
    return value


def _true_or_false(value: Any) -> Any:
    if isinstance(value, str) and value not in ("true", "false"):
        raise ValueError("must be true or false")
    return value


DIGITS_ONLY = BeforeValidator(_decimal_integer)
"""Metadata for an integer query parameter: ``Annotated[int, Query(ge=…), DIGITS_ONLY]``.

A query value is always text, so a strict integer cannot apply; this refuses what the lax one
would take (``1.0``, ``true``, ``1e3``, spaces) with 422 and keeps only decimal digits. Put it
after ``Query(…)`` so the bounds stay ``minimum``/``maximum`` in the OpenAPI schema."""

TRUE_OR_FALSE = BeforeValidator(_true_or_false)
"""Metadata for a boolean query parameter: only ``true`` and ``false`` (not ``1``, ``0``,
``yes``, ``on``, which the lax boolean takes), the JSON spelling the schema's ``boolean``
implies."""


class ConferModel(BaseModel):
    """Base of every model: unknown fields are errors, wire names are the spec's names.

    Python attributes that cannot carry the spec's name (``model_config``, ``from``) take a
    trailing underscore and the spec's name as alias; both names are accepted on input and the
    alias is always used on output (``model_dump()`` / ``model_dump_json()``).
    """

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )
