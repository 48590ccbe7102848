"""The base class and shared field types of every Confer model.

Source: seed 002 ("Confer — Modelo de datos"): "all identifiers are ULIDs", stored as
``CHAR(26)``; timestamps are ``TIMESTAMPTZ``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    JsonValue,
    StringConstraints,
)

Ulid = Annotated[str, StringConstraints(pattern=r"^[0-9A-HJKMNP-TV-Z]{26}$")]
"""A ULID in its canonical text form: 26 upper-case Crockford base32 characters (``CHAR(26)``)."""

Timestamp = AwareDatetime
"""A ``TIMESTAMPTZ``: a datetime with a time zone (naive datetimes are rejected)."""


def _storable(value: Any, depth: int = 0) -> None:
    if depth > 32:
        raise ValueError("JSON nested deeper than 32 levels")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("numbers must be finite (no NaN or infinity)")
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("text must not contain the NUL character (U+0000)")
        if any("\ud800" <= ch <= "\udfff" for ch in value):
            raise ValueError("text contains a lone surrogate")
    elif isinstance(value, list):
        for item in value:
            _storable(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            _storable(key, depth + 1)
            _storable(item, depth + 1)


def _check_storable(value: Any) -> Any:
    _storable(value)
    return value


StoredJson = Annotated[JsonValue, AfterValidator(_check_storable)]
"""Free-form JSON that PostgreSQL ``jsonb`` can hold: finite numbers only (JSON has no NaN or
infinity, RFC 8259 §6; ``1e400`` parses as infinity), no U+0000 and no lone surrogates in any
string or key (``jsonb`` rejects both), at most 32 levels deep."""


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
