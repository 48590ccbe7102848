"""Confer's extension data in A2A metadata: ``metadata.confer`` and the ``SendMessage`` it rides.

A2A 1.0 leaves ``Message.metadata`` (and ``Task.metadata``) to extensions (A2A §4.5,
``google.protobuf.Struct``); Confer puts everything it adds under one key, ``"confer"``::

    {"confer": {"sender": "did:web:a.example:users:alice", "recipient": "did:web:b.example:…",
                "recipients": ["did:web:b.example:users:bob", "…"],
                "createdAt": "2025-01-01T12:00:00+00:00", "senderName": "Alice",
                "inReplyTo": "01J…", "action": "ask",
                "taskId": "01J…", "decision": "allow_once",
                "edit": {"messageId": "01J…", "version": 2}, "delete": {"messageId": "01J…"},
                "read": {"messageId": "01J…"},
                "heldUntilOwnerReturns": true,
                "contentType": "code", "language": "en", "via": "web",
                "citations": [{"source": "RFC 9421", "trust_level": "authoritative"}],
                "translation": {"from": "de", "to": "en", "provider": "openai"},
                "conversation": {"id": "01J…", "type": "group", "name": "launch",
                                 "home": "did:web:a.example",
                                 "members": ["did:web:a.example:users:alice", "…"]},
                "file": {"sizeBytes": 10, "sha256": "<64 hex digits>"},
                "membership": {"event": "kick", "member": "did:web:c.example:users:carol",
                               "by": "did:web:a.example:users:alice"},
                "history": {"remaining": 0, "through": "01J…"}}}

A message's content rides in its parts (:func:`message_parts`, read back with
:func:`read_parts`): ``content`` as one text part, ``content_json`` as one data part
(``mediaType`` :data:`CONTENT_MEDIA_TYPE`), and ``contentType`` names what they are. A
``file`` message adds a file part (:func:`file_part`, read back with :func:`read_file_part`):
A2A 1.0's ``url`` + ``mediaType`` + ``filename``, the URL on the sender's instance that only
the receiving instance may fetch (an RFC 9421 signed GET); ``confer.file`` declares the
file's size and SHA-256 for the receiver to check.

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
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from a2a.protocol import InvalidParamsError, JSONRPCError, Part

CONFER_KEY = "confer"
"""The member of ``metadata`` that holds Confer's extension data."""

CONTENT_MEDIA_TYPE = "application/json"
"""``mediaType`` of the data part that carries a message's ``content_json``."""

CITATIONS_MEDIA_TYPE = "application/vnd.confer.citations+json"
"""``mediaType`` of the data part a message with neither text nor ``content_json`` (a citation
message without text) carries instead, since A2A requires non-empty ``parts``; it repeats
``confer.citations`` for readers that do not know Confer, and Confer receivers skip it."""

CONTENT_MEMBERS = frozenset({"contentType", "citations", "language", "translation", "via", "file"})
"""Members that describe the message's content: malformed, the message cannot be stored as
sent (:attr:`ConferMetadata.malformed`)."""

ChangeKind = Literal["edit", "delete"]

MembershipEvent = Literal["create", "join", "leave", "kick", "role", "rename", "archive"]
"""What a membership event (or a replica's request to the home) does to a group."""

GROUP_ACTION_REFUSED = -32060
"""JSON-RPC error code (JSON-RPC 2.0 §5.1: -32000 to -32099 are the server's own) of a home
instance refusing a replica member's membership request; its ``ErrorInfo.metadata.code`` is
the problem code a local client would have got (``not_conversation_admin`` …)."""


class ConferFile(BaseModel):
    """``confer.file``: what the sender declares of the file its file part points at — its
    size in bytes and its SHA-256 as 64 lowercase hex digits — for the receiver to check."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    sizeBytes: StrictInt = Field(ge=0)
    sha256: StrictStr = Field(pattern=r"^[0-9a-f]{64}$")


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


class ConferConversation(BaseModel):
    """``confer.conversation``: the group a message belongs to, in its home instance's terms.

    A group has one home instance (``home``, its instance DID, ``did:web:<host>``), which
    owns its name and member list; ``id`` is the home's conversation id and is also the
    message's ``contextId``. ``members`` are the DIDs of every member (users and agents, on
    any instance). Every other instance with members keeps a replica keyed by
    ``(home, id)``. A membership event from the home adds ``roles`` (member DID → role; a
    member not named is a ``member``), ``archived`` and ``version``, the number of changes
    the home made to the group's state so far (a replica takes a state only when its
    version is newer than the one it holds); a message's claim leaves them out.
    A message without this member is never stored in a group, and a message
    with it never in a direct conversation.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)
    id: StrictStr
    type: Literal["group"] = "group"
    home: StrictStr
    name: StrictStr | None = None
    members: list[StrictStr] = []
    roles: dict[StrictStr, Literal["admin", "member", "observer"]] | None = None
    archived: StrictBool | None = None
    version: StrictInt | None = Field(default=None, ge=0)


class ConferHistory(BaseModel):
    """``confer.history``: the message is part of a group's history, which the group's home
    sends an instance when one of its users or agents joins (the home's id of the message is
    its ``messageId``, so its position). ``remaining`` is how many history messages of the
    same backfill follow this one (0 on the last): the receiver tells its members once, when
    the last one arrives. ``through`` is the home's id of the group's latest message when
    the member joined: everything up to it is history, read for the joining members."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    remaining: StrictInt = Field(default=0, ge=0)
    through: StrictStr | None = None


class ConferMembership(BaseModel):
    """``confer.membership``: a membership change of a group.

    From the group's home instance (signed by the instance DID itself) it is an event that
    already happened: ``confer.conversation`` then carries the group's whole state after it
    (name, members, roles, archived), which the replica takes. From a replica member (signed
    by that member) to the home it is a request: the home applies its local rules and answers
    with the new state, or refuses with :data:`GROUP_ACTION_REFUSED`.

    - ``event``: :data:`MembershipEvent` (``rename`` and ``archive`` change the group itself;
      ``leave`` is the sender leaving; ``kick`` removes ``member``; ``role`` gives ``member``
      the ``role``; ``join`` adds ``member`` with ``role``).
    - ``member``: the DID the change is about; ``role``: ``admin | member | observer``.
    - ``name`` / ``archived``: a ``rename`` / ``archive`` request's new name / archived flag.
    - ``by``: on an event, the DID of the member who made the change.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)
    event: MembershipEvent
    member: StrictStr | None = None
    role: Literal["admin", "member", "observer"] | None = None
    name: StrictStr | None = Field(default=None, max_length=255)
    archived: StrictBool | None = None
    by: StrictStr | None = None


class ConferMetadata(BaseModel):
    """The members of ``metadata.confer`` Confer writes and reads; all optional.

    - ``sender`` / ``senderName``: the sending user's or agent's DID and display name (a signed
      message may only claim the DID that signed it).
    - ``recipient``: the local DID addressed (routes a call to the shared ``/a2a`` endpoint).
    - ``recipients``: on a group message sent once to an instance, every member of that
      instance it is for (``recipient`` is the first of them).
    - ``createdAt``: when the sender stored the message (ISO 8601, as the sender wrote it).
    - ``inReplyTo``: the replied message, by the receiver's id or by the id the receiver
      gave it when it sent it.
    - ``action``: the policy action the message asks for (``read | ask | share | commit``).
    - ``taskId`` / ``decision``: on an agent's answer to a held request, the requester's task
      and the owner's decision.
    - ``edit`` / ``delete``: this message changes an earlier one (:class:`ConferChange`).
    - ``read``: a read receipt — the sender read the conversation up to the receiver's message
      ``messageId`` (the receiver's own id: it sent that message); nothing else is stored.
    - ``heldUntilOwnerReturns``: on a ``Task``, the request was delivered and the agent's
      answer waits for its offline owner.
    - ``position``: on the ``Task`` a group's home answers a member's post with, the home's
      id of the stored message — its place in the group's one order (:func:`answered_position`).
    - ``contentType``: the Confer content type of the parts (``text`` when absent; ``code``,
      ``tool_call``, ``tool_result``, ``citation``, ``file`` …); ``citations``, ``language``
      (the human language of the text), ``translation`` (``{"from", "to", "provider"}``) and
      ``via`` (the client it was sent from) as the sender stored them. Their inner shape is the
      receiver's to check, by the rules it applies to its own clients.
    - ``conversation``: the group the message belongs to (:class:`ConferConversation`);
      absent on a direct message.
    - ``file``: on a ``file`` message, the declared size and SHA-256 (:class:`ConferFile`).
    - ``membership``: a group membership event or request (:class:`ConferMembership`).
    - ``typing`` / ``presence``: an ephemeral signal — the sender is typing, or came
      ``online`` / went ``offline``; nothing is stored.
    - ``history``: a group message its home sends as history to an instance a member joined
      from (:class:`ConferHistory`): stored in the replica without notifying anyone.

    Build one with keyword arguments to send; read a peer's with :meth:`of`.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)
    sender: StrictStr | None = None
    recipient: StrictStr | None = None
    recipients: list[StrictStr] | None = Field(default=None, max_length=1024)
    createdAt: StrictStr | None = None
    senderName: StrictStr | None = None
    inReplyTo: StrictStr | None = None
    action: StrictStr | None = None
    taskId: StrictStr | None = None
    decision: StrictStr | None = None
    edit: ConferChange | None = None
    delete: ConferChange | None = None
    read: ConferChange | None = None
    heldUntilOwnerReturns: StrictBool | None = None
    position: StrictStr | None = None
    contentType: StrictStr | None = None
    citations: list[dict[str, Any]] | None = None
    language: StrictStr | None = None
    translation: dict[str, Any] | None = None
    via: StrictStr | None = None
    conversation: ConferConversation | None = None
    file: ConferFile | None = None
    membership: ConferMembership | None = None
    typing: StrictBool | None = None
    presence: StrictStr | None = None
    history: ConferHistory | None = None

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

    @property
    def malformed(self) -> frozenset[str]:
        """Members present in the peer's metadata that did not fit their type (read as absent)."""
        return self._malformed

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


class GroupActionRefusedError(JSONRPCError):
    """The home instance refused a replica member's membership request (JSON-RPC error
    :data:`GROUP_ACTION_REFUSED`); ``problem`` is the problem code a local client would have
    got, carried in ``ErrorInfo.metadata.code``."""

    code, reason = GROUP_ACTION_REFUSED, "GROUP_ACTION_REFUSED"

    def __init__(self, message: str, problem: str) -> None:
        super().__init__(message)
        self.problem = problem

    def to_json(self) -> dict[str, Any]:
        """The error object, its ``ErrorInfo`` with ``metadata.code``."""
        body = super().to_json()
        body["data"][0]["metadata"] = {"code": self.problem}
        return body


def refused_problem(error: Mapping[str, Any]) -> str | None:
    """The problem code of a JSON-RPC ``error`` object that is a :class:`GroupActionRefusedError`,
    else None (another error, or a malformed one)."""
    if error.get("code") != GROUP_ACTION_REFUSED or not isinstance(error.get("data"), list):
        return None
    for info in error["data"]:
        meta = info.get("metadata") if isinstance(info, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("code"), str):
            return str(meta["code"])[:64]
    return None


CONTROL_MEDIA_TYPE = "application/vnd.confer.control+json"
"""``mediaType`` of the only part of a message that carries no content — a membership event
or request, a typing or presence signal: a data part, so that a receiver that does not know
the Confer member it rides on refuses it (a plain message needs a text part) instead of
storing it as text."""


def control_parts(what: str) -> list[dict[str, Any]]:
    """The ``parts`` of a message that carries no content (:data:`CONTROL_MEDIA_TYPE`)."""
    return [{"data": {"confer": what}, "mediaType": CONTROL_MEDIA_TYPE}]


def message_parts(
    content: str | None, content_json: Any = None, citations: list[Any] | None = None
) -> list[dict[str, Any]]:
    """A2A ``parts`` (A2A §4.5 ``Part``) for a message's content.

    ``content`` (when not empty) is a text part; ``content_json`` (when not None) a data part
    with ``mediaType`` :data:`CONTENT_MEDIA_TYPE`. With neither, a data part of
    ``citations`` (:data:`CITATIONS_MEDIA_TYPE`), else an empty text part: ``parts`` is never
    empty.
    """
    parts: list[dict[str, Any]] = []
    if content:
        parts.append({"text": content})
    if content_json is not None:
        parts.append({"data": content_json, "mediaType": CONTENT_MEDIA_TYPE})
    if not parts and citations:
        parts.append({"data": citations, "mediaType": CITATIONS_MEDIA_TYPE})
    return parts or [{"text": ""}]


def read_parts(parts: list[Part]) -> tuple[str, Any]:
    """``(text, content_json)`` of a message's parts: the text parts joined by newlines (``""``
    when there are none) and the ``data`` of the first data part that is not the citations
    stand-in (None when there is none). Inverse of :func:`message_parts`."""
    text = "\n".join(p.text for p in parts if p.text)
    data = next(
        (
            p.data
            for p in parts
            if p.text is None
            and p.data is not None
            and (p.model_extra or {}).get("mediaType") != CITATIONS_MEDIA_TYPE
        ),
        None,
    )
    return text, data


def file_part(url: str, media_type: str | None, filename: str) -> dict[str, Any]:
    """An A2A 1.0 file ``Part`` (A2A §4.5: ``url`` with ``mediaType`` and ``filename``)."""
    return {"url": url, "mediaType": media_type or "application/octet-stream", "filename": filename}


def read_file_part(parts: list[Part]) -> tuple[str, str | None, str | None] | None:
    """``(url, mediaType, filename)`` of the first part with a string ``url``, or None; a
    ``mediaType`` or ``filename`` that is not a string reads as None."""
    for part in parts:
        extra = part.model_extra or {}
        url = extra.get("url")
        if isinstance(url, str) and part.text is None and part.data is None:
            media_type, filename = extra.get("mediaType"), extra.get("filename")
            return (
                url,
                media_type if isinstance(media_type, str) else None,
                filename if isinstance(filename, str) else None,
            )
    return None


def absolute_file_urls(params: dict[str, Any], base_url: str) -> dict[str, Any]:
    """``params`` with every file part's path-only ``url`` (``/…``) made absolute on
    ``base_url`` (the sender's public origin, known where the request is signed and sent)."""
    parts = params.get("message", {}).get("parts")
    if not isinstance(parts, list) or not any(_relative(p) for p in parts):
        return params
    resolved = [{**p, "url": base_url + p["url"]} if _relative(p) else p for p in parts]
    return {**params, "message": {**params["message"], "parts": resolved}}


def _relative(part: Any) -> bool:
    url = part.get("url") if isinstance(part, dict) else None
    return isinstance(url, str) and url.startswith("/")


def send_message_params(
    *,
    message_id: str,
    context_id: str,
    text: str,
    confer: ConferMetadata,
    parts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A2A 1.0 ``SendMessageRequest`` params (A2A §4.5, §9) for one Confer message.

    A ``ROLE_USER`` message with ``parts`` (default: one text part of ``text``) and
    ``confer`` as its metadata, sent with ``configuration.returnImmediately`` (the peer
    answers with the task at once instead of blocking until it ends; delivery is asynchronous
    anyway).
    """
    return {
        "message": {
            "messageId": message_id,
            "contextId": context_id,
            "role": "ROLE_USER",
            "parts": parts if parts is not None else [{"text": text}],
            "metadata": confer.metadata(),
        },
        "configuration": {"returnImmediately": True},
    }


def answered_position(result: Any) -> str | None:
    """The ``metadata.confer.position`` of the ``Task`` in a ``SendMessage`` result (A2A 1.0
    ``SendMessageResponse``: ``{"task": Task}``), or None: no task, no position, or a value
    that is no string. The caller checks the value's syntax. Never raises: it is a peer's
    answer."""
    task = result.get("task") if isinstance(result, dict) else None
    metadata = task.get("metadata") if isinstance(task, dict) else None
    if not isinstance(metadata, dict):
        return None
    return ConferMetadata.of(metadata).position
