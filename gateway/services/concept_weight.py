"""The concept memory's weight schedule, name folding and fracture severity (pure functions).

Weight schedule (documented in docs/agents.md, "Concept memory"):

- **Use**: every recorded occurrence first decays the weight to now, then adds
  :data:`USE_INCREMENT` (1.0), capped at :data:`MAX_WEIGHT` (10.0); a dormant concept seen
  again becomes active (an archived one stays archived until promoted).
- **Disuse**: the weight halves every :data:`HALF_LIFE` (30 days) without use:
  ``w(t) = w(t0) * 0.5 ** ((t - t0) / HALF_LIFE)``. Each use applies it to that concept first;
  the decay worker (:mod:`gateway.workers.concept_decay`, every
  ``concept_decay_interval_seconds``) applies it to every concept with
  :func:`gateway.store.concepts.update_decay` (exponential decay composes, so how often it runs
  does not change the weights). A concept whose weight falls below :data:`DORMANT_BELOW` (0.5)
  turns dormant; a dormant one below :data:`ARCHIVE_BELOW` (0.1) is archived. ``peak_weight``
  keeps the highest weight reached.
- **Promotion** to active lifts the weight to at least :data:`USE_INCREMENT` as of now.

Fracture severity (semantic-memory MCP spec, ``cs_get_alerts``): **critical** when the weakened
concept weighed more than 1.0 before it decayed (``peak_weight``) or a dependent weighs more than
1.0; **low** when every dependent has fewer than :data:`FEW_OCCURRENCES` occurrences (a likely
false positive); **moderate** otherwise (active dependents of weight <= 1.0).
"""

from __future__ import annotations

import unicodedata
from datetime import timedelta
from typing import Any

USE_INCREMENT = 1.0
MAX_WEIGHT = 10.0
HALF_LIFE = timedelta(days=30)
DORMANT_BELOW = 0.5
ARCHIVE_BELOW = 0.1
CRITICAL_ABOVE = 1.0
FEW_OCCURRENCES = 2


def fold(text: str) -> str:
    """``text`` in lower case without accents (NFKD, combining marks dropped), for matching
    that is accent- and case-insensitive: ``fold("Caché Ñandú") == "cache nandu"``."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).strip()


def decayed(weight: float, elapsed: timedelta) -> float:
    """The weight after ``elapsed`` without use (half-life :data:`HALF_LIFE`)."""
    return float(weight * 0.5 ** (max(elapsed.total_seconds(), 0) / HALF_LIFE.total_seconds()))


def severity(peak_weight: float, dependents: list[dict[str, Any]]) -> str:
    """``critical`` | ``moderate`` | ``low`` of a fracture (rules in the module docstring)."""
    if peak_weight > CRITICAL_ABOVE or any(d["weight"] > CRITICAL_ABOVE for d in dependents):
        return "critical"
    if all(d["occurrence_count"] < FEW_OCCURRENCES for d in dependents):
        return "low"
    return "moderate"
