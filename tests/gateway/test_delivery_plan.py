"""Packing claimed lanes into requests: a lane never spans two requests, order holds."""

from __future__ import annotations

from gateway.store.federation import OutboxRow
from gateway.store.outbox_batches import Claimed
from gateway.workers.delivery_plan import batch_elements, plan


def _row(
    n: int,
    *,
    destination: str = "b.example",
    sender: str = "did:web:a:users:alice",
    endpoint: str = "https://b.example/users/bob/a2a",
) -> OutboxRow:
    return OutboxRow(
        id=f"{n:026d}",
        destination=destination,
        endpoint=endpoint,
        sender_did=sender,
        peer_id="p" * 26,
        message_id=None,
        payload_json={"message": {"text": "x" * 100}},
        attempts=1,
    )


def test_lanes_are_packed_whole_and_what_does_not_fit_is_released() -> None:
    claimed = [
        Claimed(_row(1), "c1", 2, 65536),
        Claimed(_row(2), "c2", 2, 65536),
        Claimed(_row(3), "c1", 2, 65536),
        Claimed(_row(4), "c2", 2, 65536),
        Claimed(_row(5), "c3", 2, 65536),
        Claimed(_row(6, sender="did:web:a:users:dave"), "c1", 2, 65536),  # another signer
    ]
    batches, released = plan(claimed, free_slots={"b.example": 2})
    assert [[r.id[-1] for r in b.rows] for b in batches] == [["1", "3"], ["2", "4"]]
    # c3 found no room (two requests, two rows each at most); row 6 is signed by another
    # sender, so c1's prefix stops before it.
    assert sorted(r[-1] for r in released) == ["5", "6"]


def test_a_single_slot_still_sends_the_first_lane() -> None:
    claimed = [Claimed(_row(1), "c1", 1, None), Claimed(_row(2), "c2", 1, None)]
    batches, released = plan(claimed, free_slots={"b.example": 1})
    assert [[r.id[-1] for r in b.rows] for b in batches] == [["1"]]
    assert [r[-1] for r in released] == ["2"]


def test_a_batch_body_keeps_to_its_byte_limit() -> None:
    rows = [_row(n) for n in range(1, 6)]
    one, _ = batch_elements(rows[:1], "https://a.example", 4096)
    size = len(one[0]) + 1
    elements, sent = batch_elements(rows, "https://a.example", 1 + size * 3)
    assert len(sent) == 3 and len(elements) == 3
    alone, first = batch_elements(rows, "https://a.example", 10)  # the first goes anyway
    assert len(first) == 1 and len(alone) == 1
