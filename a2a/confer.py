"""Confer's extension data in A2A metadata: ``metadata.confer`` and the ``SendMessage`` it rides.

A2A 1.0 leaves ``Message.metadata`` (and ``Task.metadata``) to extensions (A2A §4.5,
``google.protobuf.Struct``); Confer puts everything it adds under one key, ``"confer"``::

    {"confer": {"sender": "did:web:a.example:users:alice", "recipient": "did:web:b.example:…",
                "createdAt": "2025-01-01T12:00:00+00:00", "senderName": "Alice",
                "inReplyTo": "01J…", "action": "ask",
                "taskId": "01J…", "decision": "allow_once",
                "edit": {"messageId": "01J…", "version": 2}, "delete": {"messageId": "01J…"},
                "heldUntilOwnerReturns": true}}

Member names are the wire names (camelCase, like the rest of ProtoJSON). Reading a peer's
metadata is tolerant, as A2A §4.5 asks of unknown fields: unknown members are ignored and a
member of the wrong type is treated as absent — except ``edit`` / ``delete``, which change
stored data: present but malformed, they are an error (:meth:`ConferMetadata.change`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from a2a.protocol import InvalidParamsError

CONFER_KEY = "confer"
"""The member of ``metadata`` that holds Confer's extension data."""

ChangeKind = Literal["edit", "delete"]


class ConferChange(BaseModel):
    """``confer.edit`` / ``confer.delete``: which earlier message changes (by the id the sender
    gave it) and, for an edit, the new version number (a non-integer reads as absent: the edit
    then changes nothing)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    messageId: StrictStr
    version: StrictInt | None = None

    @field_validator("version", mode="wrap")
    @classmethod
    def _absent_when_malformed(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            return None


class ConferMetadata(BaseModel):
    """The members of ``metadata.confer`` Confer writes and reads; all optional.

    - ``sender`` / ``senderName``: the sending user's or agent's DID and display name (a signed
      message may only claim the DID that signed it).
    - ``recipient``: the local DID addressed (routes a call to the shared ``/a2a`` endpoint).
    - ``createdAt``: when the sender stored the message (ISO 8601, as the sender wrote it).
    - ``inReplyTo``: the replied message, by the receiver's id or by the id the receiver
      gave it when it sent it.
    - ``action``: the policy action the message asks for (``read | ask | share | commit``).
    - ``taskId`` / ``decision``: on an agent's answer to a held request, the requester's task
      and the owner's decision.
    - ``edit`` / ``delete``: this message changes an earlier one (:class:`ConferChange`).
    - ``heldUntilOwnerReturns``: on a ``Task``, the request was delivered and the agent's
      answer waits for its offline owner.

    Build one with keyword arguments to send; read a peer's with :meth:`of`.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)
    sender: StrictStr | None = None
    recipient: StrictStr | None = None
    createdAt: StrictStr | None = None
    senderName: StrictStr | None = None
    inReplyTo: StrictStr | None = None
    action: StrictStr | None = None
    taskId: StrictStr | None = None
    decision: StrictStr | None = None
    edit: ConferChange | None = None
    delete: ConferChange | None = None
    heldUntilOwnerReturns: StrictBool | None = None

    # Members that were present in the peer's metadata but did not fit their type.
    _malformed: frozenset[str] = PrivateAttr(default_factory=frozenset)

    @classmethod
    def of(cls, metadata: Mapping[str, Any] | None) -> ConferMetadata:
        """The ``confer`` member of a message's or task's ``metadata``, read tolerantly.

        Never raises: no ``confer`` object gives an empty model, unknown members are dropped,
        and members of the wrong type read as absent (remembered for :meth:`change`).
        """
        raw = (metadata or {}).get(CONFER_KEY)
        if not isinstance(raw, dict):
            return cls()
        # "edit": null is a malformed change, not an absent one
        bad = frozenset(k for k in ("edit", "delete") if k in raw and raw[k] is None)
        try:
            parsed = cls.model_validate({k: v for k, v in raw.items() if k not in bad})
        except ValidationError as exc:
            bad |= {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
            # Members validate independently: the rest is valid once the bad ones are gone.
            parsed = cls.model_validate({k: v for k, v in raw.items() if k not in bad})
        parsed._malformed = bad
        return parsed

    def change(self) -> tuple[ChangeKind, ConferChange] | None:
        """``("edit" | "delete", change)`` when the message changes an earlier one, else None.

        ``edit`` wins when both are present. Raises InvalidParamsError (-32602) when the first
        of them present is malformed (not an object with a string ``messageId``).
        """
        kinds: tuple[ChangeKind, ...] = ("edit", "delete")
        for kind in kinds:
            if kind in self._malformed:
                raise InvalidParamsError(f"Invalid params: message.metadata.confer.{kind}")
            found = self.edit if kind == "edit" else self.delete
            if found is not None:
                return kind, found
        return None

    def metadata(self) -> dict[str, Any]:
        """``{"confer": {…}}`` with the members that are set, ready for ``metadata``."""
        return {CONFER_KEY: self.model_dump(exclude_none=True)}


def send_message_params(
    *, message_id: str, context_id: str, text: str, confer: ConferMetadata
) -> dict[str, Any]:
    """A2A 1.0 ``SendMessageRequest`` params (A2A §4.5, §9) for one Confer message.

    A ``ROLE_USER`` message with one text part and ``confer`` as its metadata, sent with
    ``configuration.returnImmediately`` (the peer answers with the task at once instead of
    blocking until it ends; delivery is asynchronous anyway).
    """
    return {
        "message": {
            "messageId": message_id,
            "contextId": context_id,
            "role": "ROLE_USER",
            "parts": [{"text": text}],
            "metadata": confer.metadata(),
        },
        "configuration": {"returnImmediately": True},
    }
