"""An injectable clock, so every time window (tokens, signatures, caches) can be tested."""

from __future__ import annotations

import time
from datetime import UTC, datetime


class Clock:
    """Wall-clock time. Tests substitute a subclass with a settable ``offset`` in seconds."""

    offset: float = 0.0

    def time(self) -> float:
        """Seconds since the UNIX epoch, as a float."""
        return time.time() + self.offset

    def now(self) -> datetime:
        """The current time as an aware UTC datetime."""
        return datetime.fromtimestamp(self.time(), tz=UTC)
