"""The id parameters of the HTTP routes: one rule for every path and query parameter that holds
an id.

Every id Confer issues is a ULID in its canonical text form (:data:`models.base.ULID_PATTERN`:
26 upper-case Crockford base32 characters); body fields use :data:`models.base.Ulid`, the same
pattern. Anything else where an id is expected — lower case, wrong length, a letter outside the
alphabet — is 422 ``validation_failed`` naming the parameter (``errors[].loc``, e.g.
``["path", "conversation_id"]`` or ``["query", "before"]``), never looked up (a 404) and never
compared as a string (a page of the wrong rows).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query

from models.base import ULID_PATTERN

_DESCRIPTION = "A ULID: 26 upper-case Crockford base32 characters."

Id = Annotated[str, Path(pattern=ULID_PATTERN, description=_DESCRIPTION)]
"""A path parameter holding an id (a conversation, message, agent, …)."""


def id_query(description: str) -> Any:
    """A query parameter holding an id or nothing (a paging cursor, a filter), described by
    ``description``; use as ``before: Annotated[str | None, id_query("…")] = None``."""
    return Query(pattern=ULID_PATTERN, description=f"{description} ({_DESCRIPTION})")
