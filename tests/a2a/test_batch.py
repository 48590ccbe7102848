"""The batch extension's pure parts: what a card declares, and each call's outcome."""

from __future__ import annotations

from a2a.batch import BATCH_EXTENSION, batch_capability, batch_extension, item_outcomes


def test_a_card_declares_its_limits_or_nothing() -> None:
    card = {"capabilities": {"extensions": [batch_extension(50, 65536)]}}
    assert batch_capability(card) == (50, 65536)
    assert batch_capability({"capabilities": {"extensions": []}}) is None
    for params in (
        {"maxItems": 1, "maxBytes": 65536},  # a batch of one is no batch
        {"maxItems": True, "maxBytes": 65536},
        {"maxItems": "50", "maxBytes": 65536},
        {"maxItems": 50, "maxBytes": 10},
        None,
    ):
        strange = {"capabilities": {"extensions": [{"uri": BATCH_EXTENSION, "params": params}]}}
        assert batch_capability(strange) is None, params
    for junk in (None, [], "card", {"capabilities": "x"}, {"capabilities": {"extensions": 3}}):
        assert batch_capability(junk) is None
    huge = {"capabilities": {"extensions": [batch_extension(10**9, 65536)]}}
    assert batch_capability(huge) == (1000, 65536)


def test_each_call_gets_its_own_outcome() -> None:
    answer = [
        {"jsonrpc": "2.0", "id": "b", "error": {"code": -32602, "message": "too long"}},
        {"jsonrpc": "2.0", "id": "a", "result": {}},
        {"jsonrpc": "2.0", "id": "c", "error": {"code": -32603, "message": "oops"}},
        {"jsonrpc": "2.0", "id": "d"},
        "junk",
        {"jsonrpc": "2.0", "id": "zz", "result": {}},  # not asked for: ignored
    ]
    outcomes = item_outcomes(answer, ["a", "b", "c", "d", "e"])
    assert outcomes is not None
    assert {k: v[0] for k, v in outcomes.items()} == {
        "a": "delivered",
        "b": "failed",
        "c": "retry",
        "d": "retry",
        "e": "retry",  # no answer at all
    }
    assert item_outcomes({"jsonrpc": "2.0", "id": None, "error": {}}, ["a"]) is None
    assert item_outcomes(None, ["a"]) is None
