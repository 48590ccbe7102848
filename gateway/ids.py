"""ULID identifiers (26-character Crockford base32, time ordered), as the data model requires."""

from __future__ import annotations

import re

from ulid import ULID

from models.base import ULID_PATTERN

_CANONICAL = re.compile(ULID_PATTERN.removeprefix("^").removesuffix("$"))

_last = 0


def new_id() -> str:
    """Return a new ULID string, strictly greater than every id this process made before.

    Within one millisecond (or when the wall clock steps back) the previous value is
    incremented, so ids from one process sort in creation order (ULID spec, monotonicity).
    """
    global _last
    candidate = int(ULID())
    if candidate <= _last:
        candidate = _last + 1
    _last = candidate
    return str(ULID.from_int(candidate))


def next_after(value: str) -> str:
    """The ULID right after ``value`` (its 128-bit integer plus one)."""
    return str(ULID.from_int(int(ULID.from_str(value)) + 1))


def is_ulid(value: str) -> bool:
    """True when ``value`` is a ULID in its canonical text form (:data:`models.base.ULID_PATTERN`:
    26 upper-case Crockford base32 characters, the form every id Confer issues has). A
    lower-case spelling is not: it would miss every lookup and compare wrongly as a cursor."""
    return _CANONICAL.fullmatch(value) is not None


def floor_at(seconds: float) -> str:
    """The smallest ULID of the millisecond at ``seconds`` (UNIX time, wall clock).

    Every id :func:`new_id` makes at or after that instant sorts above it (ULID spec: the
    first 48 bits are the millisecond timestamp).
    """
    return str(ULID.from_int(int(seconds * 1000) << 80))
