"""Message translations: stored as linked variants of a message, never as edits (docs/agents.md).

``MessageTranslation.translation`` is the data model's ``Translation`` shape (``from``, ``to``,
``provider``) as kept in ``message_translations.translation_json``, with ``model`` and ``text``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints

from .base import ConferModel, Timestamp, Ulid


def canonical_case(tag: str) -> str:
    """RFC 5646 §2.1.1 case: language lower, script title (``Hant``), region upper (``BR``),
    the rest lower — so ``DE`` and ``de``, ``PT-br`` and ``pt-BR`` are one language."""
    head, *rest = tag.split("-")
    subtags = [head.lower()]
    for subtag in rest:
        if len(subtag) == 4 and subtag.isalpha():
            subtags.append(subtag.title())
        elif len(subtag) == 2 and subtag.isalpha():
            subtags.append(subtag.upper())
        else:
            subtags.append(subtag.lower())
    return "-".join(subtags)


LANGUAGE_TAG_PATTERN = r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,2}$"
"""A BCP 47 language tag, simplified: language plus up to two subtags (RFC 5646 §2.1)."""

LanguageCode = Annotated[
    str,
    StringConstraints(pattern=LANGUAGE_TAG_PATTERN, max_length=16),
    AfterValidator(canonical_case),
]
"""A BCP 47 language tag such as ``de``, ``pt-BR`` or ``zh-Hant``, in canonical case; at most
16 characters (``message_translations.target_language``)."""

MessageLanguage = Annotated[
    str,
    StringConstraints(pattern=LANGUAGE_TAG_PATTERN, max_length=8),
    AfterValidator(canonical_case),
]
"""A message's BCP 47 language tag, in canonical case; at most 8 characters because the data
model keeps it in ``messages.language VARCHAR(8)`` (``zh-Hant``, but not ``zh-Hant-TW``)."""


class TranslationCreate(ConferModel):
    """``POST /v1/conversations/{id}/messages/{mid}/translation``: the target language."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"to": "de"}]})

    to: LanguageCode


class TranslationDetail(ConferModel):
    """``translation_json``: source and target language, the provider and model, the text.

    ``from`` is the message's ``language``, or ``und`` (BCP 47: undetermined) when unknown.
    """

    from_: str = Field(alias="from")
    to: str
    provider: str
    model: str
    text: str


class MessageTranslation(ConferModel):
    """A stored translation of one message. ``reused`` is true when it was already stored (no
    model call was made for this request)."""

    id: Ulid
    message_id: Ulid
    translation: TranslationDetail
    requested_by: Ulid | None = None
    created_at: Timestamp
    reused: bool = False


class AutoTranslationSetting(ConferModel):
    """``/v1/conversations/{id}/auto-translation``: your automatic translation language in the
    conversation (``language`` None: off) and since when (messages from then on)."""

    conversation_id: Ulid
    language: str | None = None
    since: Timestamp | None = None
