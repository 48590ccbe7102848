"""ULID identifiers (26-character Crockford base32, time ordered), as the data model requires."""

from __future__ import annotations

import os
import re
import time

from ulid import ULID

from models.base import ULID_PATTERN

_CANONICAL = re.compile(ULID_PATTERN.removeprefix("^").removesuffix("$"))

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]
"""Every 10-bit value as its two Crockford base32 characters."""
_SHIFTS = tuple(range(120, -10, -10))

_last = 0


def new_id() -> str:
    """Return a new ULID string, strictly greater than every id this process made before.

    The 48-bit millisecond timestamp, then 80 random bits; within the millisecond of the
    previous id (or when the wall clock steps back) the previous value is incremented
    instead, so ids from one process sort in creation order (ULID spec, monotonicity).
    """
    global _last
    millisecond = time.time_ns() // 1_000_000
    if millisecond <= _last >> 80:
        candidate = _last + 1
    else:
        candidate = millisecond << 80 | int.from_bytes(os.urandom(10))
    _last = candidate
    return ulid_text(candidate)


def ulid_text(value: int) -> str:
    """The canonical text of the 128-bit ULID ``value``: 26 Crockford base32 characters, the
    first holding the top 3 bits (a tenth of what building a ``ulid.ULID`` for it costs)."""
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in _SHIFTS])


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
