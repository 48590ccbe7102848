"""A Confer message's content on the A2A wire, both ways, under the local content rules.

Sending (:func:`outbound_parts`): ``content`` becomes a text part, ``content_json`` a data
part (:func:`a2a.confer.message_parts`); ``content_type``, ``citations``, ``language``,
``translation`` and ``via`` travel in ``metadata.confer`` (:func:`outbound_metadata`).

Receiving (:func:`received_content`): the parts and metadata become the
:class:`models.api.MessageCreate` a local client would have posted, checked by the same
:func:`gateway.services.content.validate_message`: what a local client may not post (a
``system_notice``, a ``tool_call`` without its ``call_id``, an unknown content type, text
PostgreSQL cannot store), a peer may not either — InvalidParamsError (-32602). A message
without ``metadata.confer.contentType`` is plain text, as from any A2A client: it needs a text
part (ContentTypeNotSupportedError, -32005) and its data parts are not kept.

Files: a ``file`` message carries its metadata in ``content_json`` (the sender's
``attachment_id``, ``filename``, ``mime_type``, ``size_bytes``) and, when the sender holds the
bytes, a file part (:func:`outbound_file`): a path-only URL of ``GET
/federation/attachments/{id}`` (made absolute on the sender's public URL when the delivery is
signed) and ``confer.file`` with the stored size and SHA-256. The receiver checks the part
(:func:`received_file`: the URL must be on the sending peer's own host), stores the message
at once and fetches the bytes afterwards (:mod:`gateway.workers.attachment_fetch`). A ``file``
message without a file part (a peer that does not send one) and without text gets
:data:`FILE_NOT_FETCHED` (with the file name) as its text, so its reader knows why there is
nothing to open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import asyncpg
from pydantic import ValidationError

from a2a.confer import (
    CONTENT_MEMBERS,
    ConferFile,
    ConferMetadata,
    file_part,
    message_parts,
    read_file_part,
    read_parts,
)
from a2a.protocol import ContentTypeNotSupportedError, InvalidParamsError, JSONRPCError, Message
from did.errors import DIDError
from did.web import did_to_url, instance_did
from gateway.errors import PayloadTooLargeError, ValidationFailedError
from gateway.ids import new_id
from gateway.services.content import validate_message
from gateway.store import attachments as attachments_store
from models import AttachmentRow
from models import Message as StoredMessage
from models.api import MessageCreate

FILE_NOT_FETCHED = "{filename} (the file stays on the sender's instance: it is not fetched yet)"
"""Text of a received ``file`` message that came without text or a file part of its own."""

ATTACHMENT_PATH = "/federation/attachments/"
"""Path prefix of the signed-GET endpoint that serves a file to the receiving instance."""


@dataclass(frozen=True)
class IncomingFile:
    """A peer's file part, checked: where to fetch it and what it must be."""

    url: str
    media_type: str | None
    filename: str | None
    size_bytes: int
    sha256: str


def outbound_file(attachment: AttachmentRow) -> tuple[dict[str, Any], ConferFile] | None:
    """The file part (path-only URL) and ``confer.file`` of a stored attachment, or None when
    its bytes are not here (a peer's file still pending, or one that failed)."""
    if attachment.storage_url is None or attachment.sha256 is None:
        return None
    part = file_part(ATTACHMENT_PATH + attachment.id, attachment.content_type, attachment.filename)
    return part, ConferFile(sizeBytes=attachment.size_bytes or 0, sha256=attachment.sha256)


def received_file(message: Message, sender_did: str, max_bytes: int | None) -> IncomingFile | None:
    """The file part of a peer's ``file`` message, or None when it has none.

    Raises InvalidParamsError (-32602) when the part's URL is not http(s) on the host of the
    sending peer's own DID (we would sign a fetch to wherever it points) or ``confer.file``
    is missing; PayloadTooLargeError (``payload_too_large``, as a local upload over the cap)
    when ``confer.file.sizeBytes`` is over ``max_bytes`` (``CONFER_ATTACHMENT_MAX_BYTES``;
    None only for a message already accepted, whose fetch checks the cap again): refused on
    arrival, not stored to fail at the fetch.
    """
    found = read_file_part(message.parts)
    confer = ConferMetadata.of(message.metadata)
    if found is None or confer.contentType != "file":
        return None
    url, media_type, filename = found
    try:
        origin = urlsplit(did_to_url(instance_did(sender_did)))
    except DIDError as exc:
        raise InvalidParamsError(f"Invalid params: the sender {sender_did} is not did:web") from exc
    target = urlsplit(url)
    if target.scheme not in ("http", "https") or target.netloc.lower() != origin.netloc.lower():
        raise InvalidParamsError("Invalid params: the file part's url is not on the sender's host")
    if confer.file is None:
        raise InvalidParamsError("Invalid params: a file part needs message.metadata.confer.file")
    if max_bytes is not None and confer.file.sizeBytes > max_bytes:
        raise PayloadTooLargeError(
            f"the file part declares {confer.file.sizeBytes} bytes; files of at most"
            f" {max_bytes} bytes are accepted"
        )
    return IncomingFile(url, media_type, filename, confer.file.sizeBytes, confer.file.sha256)


def held_file(history_message: dict[str, Any], sender_did: str) -> IncomingFile | None:
    """:func:`received_file` of a request held for consent (its task's ``history[0]``, checked
    when it arrived); None when it has no usable file part (or its history was erased)."""
    try:
        return received_file(Message.model_validate(history_message), sender_did, None)
    except (ValidationError, JSONRPCError):
        return None


def with_attachment(
    fields: dict[str, Any], file: IncomingFile | None
) -> tuple[dict[str, Any], str | None]:
    """``fields`` (of :func:`stored_fields`) whose ``content_json.attachment_id`` names a new
    attachment of ours for ``file``, and that attachment's id; unchanged and None without a
    file (or a ``content_json`` that is no object)."""
    content_json = fields.get("content_json")
    if file is None or not isinstance(content_json, dict):
        return fields, None
    attachment_id = new_id()
    return {**fields, "content_json": {**content_json, "attachment_id": attachment_id}}, (
        attachment_id
    )


async def record_received_file(
    conn: asyncpg.Connection,
    *,
    attachment_id: str,
    message: StoredMessage,
    user_id: str,
    file: IncomingFile,
    origin_did: str,
) -> None:
    """Record our pending copy of a peer's ``file`` for the stored ``message`` (owned by
    ``user_id``); the fetch worker brings the bytes (:mod:`gateway.workers.attachment_fetch`)."""
    content_json = message.content_json if isinstance(message.content_json, dict) else {}
    await attachments_store.insert_received_attachment(
        conn,
        id=attachment_id,
        message_id=message.id,
        user_id=user_id,
        filename=str(content_json.get("filename") or file.filename or "file"),
        content_type=(file.media_type or "application/octet-stream")[:128],
        size_bytes=file.size_bytes,
        sha256=file.sha256,
        source_url=file.url,
        origin_did=origin_did,
    )


def outbound_parts(message: StoredMessage) -> list[dict[str, Any]]:
    """The A2A ``parts`` of a stored message (text part, data part for ``content_json``)."""
    citations = _citations(message)
    return message_parts(message.content, message.content_json, citations)


def outbound_metadata(message: StoredMessage) -> dict[str, Any]:
    """The content members of ``metadata.confer`` for a stored message (keyword arguments of
    :class:`a2a.confer.ConferMetadata`); a plain text message adds only what it has."""
    dumped = message.model_dump(mode="json", by_alias=True)
    return {
        "contentType": None if message.content_type == "text" else message.content_type,
        "citations": _citations(message),
        "language": message.language,
        "translation": dumped["translation"],
        "via": message.via,
    }


def _citations(message: StoredMessage) -> list[Any] | None:
    dumped: list[Any] | None = message.model_dump(mode="json")["citations"]
    return dumped


def received_content(message: Message, max_chars: int, *, via: str | None = None) -> MessageCreate:
    """The content of a peer's A2A ``message`` as a local post, validated as one.

    ``via`` overrides ``metadata.confer.via`` (an API-key caller's message is ``api``).
    Raises ContentTypeNotSupportedError (-32005) for a plain message without text, and
    InvalidParamsError (-32602) for content a local client could not post, for text over
    ``max_chars`` characters and for malformed content members of ``metadata.confer``.
    """
    confer = ConferMetadata.of(message.metadata)
    bad = sorted(confer.malformed & CONTENT_MEMBERS)
    if bad:
        raise InvalidParamsError(f"Invalid params: message.metadata.confer.{bad[0]}")
    text, content_json = read_parts(message.parts)
    content_type = confer.contentType or "text"
    if content_type == "text":
        if not text:
            raise ContentTypeNotSupportedError("the message has no text part")
        content_json = None  # a stock client's data parts have no Confer meaning
    if len(text) > max_chars:
        raise InvalidParamsError(f"the message text exceeds {max_chars} characters")
    try:
        data = MessageCreate(
            content=text or None,
            content_type=content_type,  # type: ignore[arg-type]  # checked by pydantic
            content_json=content_json,
            citations=confer.citations,  # type: ignore[arg-type]
            language=confer.language,
            translation=confer.translation,  # type: ignore[arg-type]
            via=via or confer.via,  # type: ignore[arg-type]
        )
    except ValidationError as exc:
        fields = ", ".join(".".join(str(p) for p in e["loc"]) or "." for e in exc.errors())
        raise InvalidParamsError(f"Invalid params: the message does not fit: {fields}") from exc
    try:
        validate_message(data)
    except ValidationFailedError as exc:
        raise InvalidParamsError(f"Invalid params: {exc.detail}") from exc
    has_part = read_file_part(message.parts) is not None and via is None
    if (
        data.content_type == "file"
        and not data.content
        and isinstance(content_json, dict)
        and (not has_part)
    ):
        note = FILE_NOT_FETCHED.format(filename=content_json.get("filename", "a file"))
        data = data.model_copy(update={"content": note})
    return data


def policy_text(data: MessageCreate) -> str:
    """The text a policy rule and a consent request see: the message's text, else its content
    type and the name it carries (a tool's, a file's), e.g. ``tool_call: search``."""
    if data.content:
        return data.content
    named = data.content_json if isinstance(data.content_json, dict) else {}
    name = named.get("name") or named.get("filename") or named.get("call_id")
    return f"{data.content_type}: {name}" if name else data.content_type


def held_fields(history_message: dict[str, Any], *, via: str | None = None) -> dict[str, Any]:
    """:func:`stored_fields` of a request held for consent, from the A2A message its task keeps
    (``history[0]``, checked when it arrived); an erased or edited history gives its text."""
    try:
        message = Message.model_validate(history_message)
        return stored_fields(received_content(message, _NO_LIMIT, via=via))
    except (ValidationError, JSONRPCError):
        parts = history_message.get("parts") or []
        text = "\n".join(p["text"] for p in parts if isinstance(p, dict) and p.get("text"))
        return {"content": text, "via": via}


_NO_LIMIT = 1 << 30  # a held message was measured when it arrived


def stored_fields(data: MessageCreate) -> dict[str, Any]:
    """Keyword arguments of :func:`gateway.store.messages.insert_message` for ``data``."""
    return {
        "content": data.content,
        "content_type": data.content_type,
        "content_json": data.content_json,
        "via": data.via,
        "citations": data.model_dump(mode="json")["citations"],
        "language": data.language,
        "translation": data.model_dump(mode="json", by_alias=True)["translation"],
    }
