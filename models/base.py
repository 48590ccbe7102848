"""The base class and shared field types of every Confer model.

Source: seed 002 ("Confer — Modelo de datos"): "all identifiers are ULIDs", stored as
``CHAR(26)``; timestamps are ``TIMESTAMPTZ``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, StringConstraints

Ulid = Annotated[str, StringConstraints(pattern=r"^[0-9A-HJKMNP-TV-Z]{26}$")]
"""A ULID in its canonical text form: 26 upper-case Crockford base32 characters (``CHAR(26)``)."""

Timestamp = AwareDatetime
"""A ``TIMESTAMPTZ``: a datetime with a time zone (naive datetimes are rejected)."""


class ConferModel(BaseModel):
    """Base of every model: unknown fields are errors, wire names are the spec's names.

    Python attributes that cannot carry the spec's name (``model_config``, ``from``) take a
    trailing underscore and the spec's name as alias; both names are accepted on input and the
    alias is always used on output (``model_dump()`` / ``model_dump_json()``).
    """

    model_config = ConfigDict(
        extra="forbid",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )
