"""Confer's JSON-RPC batch extension: many A2A calls to one peer in one signed request.

A2A 1.0's JSON-RPC binding (A2A §9) sends one call per HTTP request; JSON-RPC 2.0 §6 allows
a *batch*, an array of calls answered by an array of responses. A Confer instance declares
that it accepts batches in its Agent Card's ``capabilities.extensions``::

    {"uri": "urn:confer:a2a:ext:jsonrpc-batch:v1", "required": false,
     "params": {"maxItems": 50, "maxBytes": 524288}}

A peer that declares it may receive a batch of at most ``maxItems`` calls in a body of at
most ``maxBytes`` bytes, signed once (RFC 9421 over the whole body, Content-Digest RFC 9530).
Each element is an ordinary call with its own ``id``, answered by the element of the same
``id`` in the response array; the order of the answer is not significant (§6). A peer that
does not declare it gets one call per request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

BATCH_EXTENSION = "urn:confer:a2a:ext:jsonrpc-batch:v1"

MAX_ITEMS_CEILING = 1000
"""The most items Confer ever puts in one batch, whatever a card declares."""

MIN_BYTES = 4096
"""A declared ``maxBytes`` below this is taken as no batch support at all."""

RETRY_RPC_CODES = frozenset({-32603})
"""Per-item JSON-RPC errors after which the item is sent again (the peer's internal error);
any other error code fails the item for good, as for a single request."""


def batch_extension(max_items: int, max_bytes: int) -> dict[str, Any]:
    """The ``AgentExtension`` declaring the batch limits this instance accepts."""
    return {
        "uri": BATCH_EXTENSION,
        "description": "Signed Confer peers may send a JSON-RPC 2.0 batch (an array of A2A "
        "calls, one signature over the whole body); each call gets its own response.",
        "required": False,
        "params": {"maxItems": max_items, "maxBytes": max_bytes},
    }


def batch_capability(card: Any) -> tuple[int, int] | None:
    """``(maxItems, maxBytes)`` a peer's Agent Card declares, or None (no extension, or
    params that are not integers with ``maxItems >= 2`` and ``maxBytes >=`` :data:`MIN_BYTES`).
    Never raises: a card is a stranger's document."""
    capabilities = card.get("capabilities") if isinstance(card, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    if not isinstance(extensions, list):
        return None
    for extension in extensions:
        if not isinstance(extension, dict) or extension.get("uri") != BATCH_EXTENSION:
            continue
        params = extension.get("params")
        if not isinstance(params, dict):
            return None
        items, size = params.get("maxItems"), params.get("maxBytes")
        if not isinstance(items, int) or not isinstance(size, int) or not _integer(items):
            return None
        if not _integer(size) or items < 2 or size < MIN_BYTES:
            return None
        return min(items, MAX_ITEMS_CEILING), size
    return None


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def item_outcomes(answer: Any, ids: Sequence[str]) -> dict[str, tuple[str, str]] | None:
    """Each call's ``("delivered" | "retry" | "failed", reason)`` from a batch answer, by id.

    ``answer`` is the parsed JSON of a 2xx answer. None when it is no JSON array (the peer did
    not treat the request as a batch). An element with ``result`` is delivered; one with an
    ``error`` failed (retried for :data:`RETRY_RPC_CODES`); a call with no element in the
    answer (or only malformed ones) is retried. Never raises.
    """
    if not isinstance(answer, list):
        return None
    wanted = set(ids)
    by_id: dict[str, Mapping[str, Any]] = {}
    for element in answer:
        if isinstance(element, dict) and element.get("id") in wanted:
            by_id.setdefault(element["id"], element)
    out: dict[str, tuple[str, str]] = {}
    for rpc_id in ids:
        element = by_id.get(rpc_id)
        if element is None:
            out[rpc_id] = "retry", "the batch answer has no response for this call"
        elif "result" in element:
            out[rpc_id] = "delivered", "batch item answered"
        elif isinstance(error := element.get("error"), dict):
            code = error.get("code")
            outcome = "retry" if code in RETRY_RPC_CODES else "failed"
            out[rpc_id] = outcome, f"JSON-RPC error: {json.dumps(error)[:300]}"
        else:
            out[rpc_id] = "retry", "the batch answer's response has neither result nor error"
    return out
