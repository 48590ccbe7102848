"""Confer metadata in A2A messages: tolerant reading, strict changes, the SendMessage builder."""

from __future__ import annotations

import re
from typing import Any

import pytest

from a2a.confer import (
    CITATIONS_MEDIA_TYPE,
    CONTENT_MEDIA_TYPE,
    ConferChange,
    ConferMetadata,
    message_parts,
    read_parts,
    send_message_params,
)
from a2a.protocol import InvalidParamsError, SendMessageParams

SENDER = "did:web:a.example:users:alice"


def test_reads_the_members_confer_writes() -> None:
    confer = ConferMetadata.of(
        {
            "confer": {
                "sender": SENDER,
                "recipient": "did:web:b.example:users:bob",
                "createdAt": "2025-01-01T12:00:00+00:00",
                "senderName": "Alice",
                "inReplyTo": "01J9Z8Q6X3V5N2K7M4R1T0W8YC",
                "action": "share",
                "taskId": "t1",
                "decision": "allow_once",
            },
            "other": {"sender": "ignored"},
        }
    )
    assert confer.sender == SENDER and confer.senderName == "Alice"
    assert confer.recipient == "did:web:b.example:users:bob" and confer.action == "share"
    assert confer.inReplyTo == "01J9Z8Q6X3V5N2K7M4R1T0W8YC"
    assert (confer.taskId, confer.decision) == ("t1", "allow_once")
    assert confer.change() is None


@pytest.mark.parametrize("metadata", [None, {}, {"confer": None}, {"confer": "x"}, {"confer": []}])
def test_no_confer_object_reads_as_empty(metadata: Any) -> None:
    assert ConferMetadata.of(metadata) == ConferMetadata()
    assert ConferMetadata.of(metadata).change() is None


def test_wrong_types_read_as_absent_and_unknown_members_are_ignored() -> None:
    confer = ConferMetadata.of(
        {
            "confer": {
                "sender": 42,
                "inReplyTo": ["01J9Z8Q6X3V5N2K7M4R1T0W8YC"],
                "action": {"level": "L3"},
                "heldUntilOwnerReturns": "yes",
                "recipient": "did:web:b.example:users:bob",
                "future": {"anything": True},
            }
        }
    )
    assert confer.sender is None and confer.inReplyTo is None and confer.action is None
    assert confer.heldUntilOwnerReturns is None
    assert confer.recipient == "did:web:b.example:users:bob"  # the well-typed rest survives
    assert confer.metadata() == {"confer": {"recipient": "did:web:b.example:users:bob"}}


def test_an_edit_and_a_delete() -> None:
    edit = ConferMetadata.of({"confer": {"edit": {"messageId": "m1", "version": 3, "x": 1}}})
    assert edit.change() == ("edit", ConferChange(messageId="m1", version=3))
    delete = ConferMetadata.of({"confer": {"delete": {"messageId": "m1"}}})
    assert delete.change() == ("delete", ConferChange(messageId="m1"))
    both = ConferMetadata.of({"confer": {"delete": {"messageId": "d"}, "edit": {"messageId": "e"}}})
    assert both.change() == ("edit", ConferChange(messageId="e"))


def test_an_edit_with_a_bad_version_is_an_edit_that_changes_nothing() -> None:
    for version in ("9", 2.5, True, None):
        confer = ConferMetadata.of({"confer": {"edit": {"messageId": "m1", "version": version}}})
        assert confer.change() == ("edit", ConferChange(messageId="m1", version=None))


@pytest.mark.parametrize("kind", ["edit", "delete"])
@pytest.mark.parametrize("value", [None, "m1", [], {}, {"messageId": 7}, {"version": 2}])
def test_a_malformed_change_is_invalid_params(kind: str, value: Any) -> None:
    confer = ConferMetadata.of({"confer": {"sender": SENDER, kind: value}})
    assert confer.sender == SENDER  # reading stays tolerant; only asking for the change fails
    where = re.escape(f"message.metadata.confer.{kind}")
    with pytest.raises(InvalidParamsError, match=where) as caught:
        confer.change()
    assert caught.value.code == -32602


def test_a_malformed_edit_wins_over_a_valid_delete() -> None:
    confer = ConferMetadata.of({"confer": {"edit": {}, "delete": {"messageId": "m1"}}})
    with pytest.raises(InvalidParamsError, match=re.escape("confer.edit")):
        confer.change()


def test_a_valid_edit_wins_over_a_malformed_delete() -> None:
    confer = ConferMetadata.of({"confer": {"edit": {"messageId": "m1"}, "delete": 5}})
    assert confer.change() == ("edit", ConferChange(messageId="m1"))


def test_builder_produces_send_message_params_that_read_back() -> None:
    confer = ConferMetadata(
        sender=SENDER,
        recipient="did:web:b.example:users:bob",
        createdAt="2025-01-01T12:00:00+00:00",
        senderName="Alice",
        taskId="t1",
    )
    params = send_message_params(message_id="m1", context_id="c1", text="hi", confer=confer)
    assert params == {
        "message": {
            "messageId": "m1",
            "contextId": "c1",
            "role": "ROLE_USER",
            "parts": [{"text": "hi"}],
            "metadata": {
                "confer": {
                    "sender": SENDER,
                    "recipient": "did:web:b.example:users:bob",
                    "createdAt": "2025-01-01T12:00:00+00:00",
                    "senderName": "Alice",
                    "taskId": "t1",
                }
            },
        },
        "configuration": {"returnImmediately": True},
    }
    parsed = SendMessageParams.model_validate(params)  # what the receiving side parses
    assert ConferMetadata.of(parsed.message.metadata) == confer


def test_builder_carries_a_change() -> None:
    delete = ConferMetadata(sender=SENDER, delete=ConferChange(messageId="m1"))
    params = send_message_params(message_id="m2", context_id="c1", text="(deleted)", confer=delete)
    assert params["message"]["metadata"] == {
        "confer": {"sender": SENDER, "delete": {"messageId": "m1"}}
    }
    read = ConferMetadata.of(params["message"]["metadata"]).change()
    assert read == ("delete", ConferChange(messageId="m1"))
    edit = ConferMetadata(edit=ConferChange(messageId="m1", version=2))
    assert edit.metadata() == {"confer": {"edit": {"messageId": "m1", "version": 2}}}


def test_task_metadata_held_for_owner() -> None:
    held = ConferMetadata(heldUntilOwnerReturns=True).metadata()
    assert held == {"confer": {"heldUntilOwnerReturns": True}}
    assert ConferMetadata.of(held).heldUntilOwnerReturns is True


def test_content_members_read_and_malformed_ones_are_named() -> None:
    confer = ConferMetadata.of(
        {
            "confer": {
                "contentType": "code",
                "language": "en",
                "via": "web",
                "citations": [{"source": "s", "trust_level": "verified"}],
                "translation": {"from": "de", "to": "en", "provider": "p"},
            }
        }
    )
    assert (confer.contentType, confer.language, confer.via) == ("code", "en", "web")
    assert confer.citations == [{"source": "s", "trust_level": "verified"}]
    assert confer.translation == {"from": "de", "to": "en", "provider": "p"}
    assert confer.malformed == frozenset()
    bad = ConferMetadata.of({"confer": {"contentType": 3, "citations": "s", "via": "web"}})
    assert bad.contentType is None and bad.citations is None and bad.via == "web"
    assert bad.malformed == {"contentType", "citations"}


@pytest.mark.parametrize(
    ("content", "content_json", "citations", "parts"),
    [
        ("hi", None, None, [{"text": "hi"}]),
        ("x = 1", {"language": "python"}, None,
         [{"text": "x = 1"}, {"data": {"language": "python"}, "mediaType": CONTENT_MEDIA_TYPE}]),
        (None, {"call_id": "c"}, None,
         [{"data": {"call_id": "c"}, "mediaType": "application/json"}]),
        (None, None, [{"source": "s"}],
         [{"data": [{"source": "s"}], "mediaType": CITATIONS_MEDIA_TYPE}]),
        (None, None, None, [{"text": ""}]),
    ],
)  # fmt: skip
def test_content_maps_onto_parts_and_back(
    content: str | None, content_json: Any, citations: Any, parts: list[dict[str, Any]]
) -> None:
    assert message_parts(content, content_json, citations) == parts
    message = SendMessageParams.model_validate(
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": parts}}
    ).message
    assert read_parts(message.parts) == (content or "", content_json)
