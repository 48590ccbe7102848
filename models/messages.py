"""Messages, citations and attachments.

Source: the data model spec, tables ``messages``, ``attachments``; interfaces ``Message``,
``Citation``.
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, JsonValue, StrictInt

from .base import ConferModel, Timestamp, Ulid

SenderType = Literal["user", "own_agent", "peer_agent", "system"]
"""``messages.sender_type`` / ``Message.sender_type`` (CHECK ``ck_messages_sender_type``)."""

ContentType = Literal[
    "text",
    "code",
    "permission_request",
    "tool_call",
    "tool_result",
    "file",
    "citation",
    "system_notice",
]
"""``messages.content_type`` / ``Message.content_type``, default ``'text'`` (CHECK
``ck_messages_content_type``)."""

Via = Literal["claude-code", "web", "mobile", "api"]
"""``Message.via``: the client a message was sent from."""

CitationTrustLevel = Literal["authoritative", "verified", "unverified"]
"""``Citation.trust_level``."""


class Citation(ConferModel):
    """Interface ``Citation``: a source an agent's message relies on (``messages.citations_json``).

    ``page`` is a page number in the source; ``passage`` the quoted text.
    """

    source: str
    url: str | None = None
    page: StrictInt | None = None
    passage: str | None = None
    trust_level: CitationTrustLevel


def _web_url(value: str) -> str:
    # A citation's url is shown as a link: only a web address may be one (a javascript: or
    # data: URL would run or render in the reader's browser when clicked).
    try:
        parts = urlsplit(value.strip())
        scheme, host = parts.scheme.lower(), parts.hostname
    except ValueError:  # e.g. an unclosed IPv6 bracket
        scheme, host = "", None
    if scheme not in ("http", "https") or not host:
        raise ValueError("must be an http or https URL with a host")
    return value


CitationUrl = Annotated[
    str,
    AfterValidator(_web_url),
    Field(max_length=2048, description="An http or https URL (any other scheme is refused)."),
]
"""``Citation.url`` as accepted from a client or a peer: an absolute http(s) URL with a host."""


class CitationCreate(Citation):
    """A :class:`Citation` as a client or a peer sends it: ``url``, when given, must be an
    http or https URL (422 ``validation_failed`` on REST, -32602 from a peer). Stored citations
    are read back as :class:`Citation`."""

    url: CitationUrl | None = None


class Translation(ConferModel):
    """``Message.translation``: the message was machine-translated (``messages.translation_json``).

    ``from`` and ``to`` are language codes, ``provider`` the translating provider id. The attribute
    is ``from_`` (``from`` is a Python keyword); on the wire it is ``from``.
    """

    from_: str = Field(alias="from")
    to: str
    provider: str


class Message(ConferModel):
    """Interface ``Message``: one message in a conversation (table ``messages``).

    ``citations`` and ``translation`` are the ``citations_json`` and ``translation_json`` columns;
    ``content_json`` is any JSON value whose shape depends on ``content_type``.

    ``position`` (an addition to the interface) is the message's place in its conversation:
    messages are shown in ``position`` order. It is the ``id``, except in a replica of a group
    homed on another instance, where it is the home's id of the message, so every instance
    shows the group in the home's one order (``gateway.services.group_order``).
    """

    id: Ulid
    conversation_id: Ulid
    sender_type: SenderType
    sender_id: Ulid
    sender_did: str | None = None
    content_type: ContentType
    content: str | None = None
    content_json: JsonValue = None
    in_reply_to: Ulid | None = None
    thread_root: Ulid | None = None
    citations: list[Citation] | None = None
    language: str | None = None
    translation: Translation | None = None
    via: Via | None = None
    created_at: Timestamp
    position: Ulid | None = None


class AttachmentRow(ConferModel):
    """Table ``attachments``: a file uploaded by ``user_id``, optionally attached to a message.

    ``content_type`` is the file's MIME type (not a message content type); ``size_bytes`` its
    size; ``sha256`` its digest as 64 hex characters; ``storage_url`` where the bytes live.

    A file a peer sent (its ``file`` message's copy here) has ``storage_url`` None until its
    bytes are here; where a query joins its ``attachment_fetches`` row, ``source_url``,
    ``origin_did`` and ``fetch_state`` (``pending`` → ``fetched`` | ``failed``, with
    ``fetch_error``) come from there. Local uploads have no ``fetch_state``.
    """

    id: Ulid
    message_id: Ulid | None = None
    user_id: Ulid
    filename: str
    content_type: str | None = None
    size_bytes: int | None = None
    storage_url: str | None = None
    sha256: str | None = None
    created_at: Timestamp
    source_url: str | None = None
    origin_did: str | None = None
    fetch_state: str | None = None
    fetch_attempts: int | None = None
    fetch_next_at: Timestamp | None = None
    fetch_error: str | None = None
