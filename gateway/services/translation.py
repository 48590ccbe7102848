"""Translate a message for a participant, with the requesting user's agent ``translation``
model, and keep the result as a linked variant (docs/agents.md).

The original message is never edited: the translation goes into ``message_translations``
(``translation_json``: ``from``, ``to``, ``provider``, ``model``, ``text``). A second request for
the same message, language and text returns the stored row without calling a model; an edited
message (different text) is translated afresh.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg

from gateway.agents.providers import ChatCall, ProviderError
from gateway.agents.registry import ProviderRegistry
from gateway.db import Transaction, transaction
from gateway.errors import (
    ConversationNotFoundError,
    MessageNotFoundError,
    NothingToTranslateError,
    TranslationFailedError,
    ValidationFailedError,
)
from gateway.ids import new_id
from gateway.store import conversations as conv_store
from gateway.store import messages as messages_store
from gateway.store import translations as store
from gateway.store import users as users_store
from models import Message, ModelChoice, User
from models.context import ChatTurn
from models.translation import MessageTranslation

UNDETERMINED = "und"  # BCP 47 language subtag for "undetermined"


@dataclass(frozen=True)
class Translator:
    """What a translation needs: the pool, the provider registry that calls the user's
    ``translation`` model, and how long (seconds) a model may take to answer."""

    pool: asyncpg.Pool
    registry: ProviderRegistry
    timeout_seconds: float


def translation_call(choice: ModelChoice, text: str, source: str, target: str) -> ChatCall:
    """The model call that translates ``text`` from ``source`` (or ``und``) into ``target``."""
    known = "" if source == UNDETERMINED else f" from the language {source!r}"
    system = (
        f"Translate the user's message{known} into the language with BCP 47 code {target!r}. "
        "Answer with the translation only: no notes, no quotes, no explanations."
    )
    return ChatCall(
        model=choice.model,
        system=system,
        turns=[ChatTurn(role="user", content=text)],
        temperature=0,
        max_tokens=4096,
        purpose="translate",
        language=target,
    )


Announce = Callable[[Transaction, MessageTranslation], Awaitable[None]]
"""Appends the stream event that tells of a translation, in the unit of work that stores it."""


async def translate_message(
    translator: Translator,
    user: User,
    conversation_id: str,
    message_id: str,
    target: str,
    *,
    announce: Announce | None = None,
) -> MessageTranslation:
    """The message in ``target``, stored or reused (``reused`` says which).

    ``announce`` runs in the transaction that stores the translation (so its event commits
    with it), or in one of its own when a stored translation is reused.

    Raises ConversationNotFoundError / MessageNotFoundError (404: not a participant, or no such
    visible message in the conversation), NothingToTranslateError (422), TranslationFailedError
    (502: the provider failed; nothing is stored).
    """
    message, choice = await _load(translator.pool, user, conversation_id, message_id)
    text = message.content or ""
    digest = hashlib.sha256(text.encode()).hexdigest()
    async with transaction(translator.pool) as tx:
        found = await store.find_translation(
            tx.conn, message_id=message.id, target=target, source_sha256=digest
        )
        if found is not None and announce is not None:
            await announce(tx, found)
    if found is not None:
        return found
    source = message.language or UNDETERMINED
    translated = await _call_model(
        translator, user, choice, translation_call(choice, text, source, target)
    )
    detail = {
        "from": source,
        "to": target,
        "provider": choice.provider,
        "model": choice.model,
        "text": translated,
    }
    async with transaction(translator.pool) as tx:
        conn = tx.conn
        stored = await store.insert_translation(
            conn,
            id=new_id(),
            message_id=message.id,
            target=target,
            source_sha256=digest,
            translation=detail,
            requested_by=user.id,
        )
        if stored is None:  # an equal translation was stored concurrently: reuse it
            stored = await store.find_translation(
                conn, message_id=message.id, target=target, source_sha256=digest
            )
        assert stored is not None
        if announce is not None:
            await announce(tx, stored)
    return stored


async def _load(
    pool: asyncpg.Pool, user: User, conversation_id: str, message_id: str
) -> tuple[Message, ModelChoice]:
    async with pool.acquire() as conn:
        conversation = await conv_store.get_conversation_for_user(
            conn, conversation_id=conversation_id, user_id=user.id
        )
        if conversation is None:
            raise ConversationNotFoundError(f"no conversation {conversation_id}")
        message = await messages_store.get_message(conn, id=message_id)
        if message is None or message.conversation_id != conversation_id:
            raise MessageNotFoundError(f"no message {message_id} in this conversation")
        agent = await users_store.get_main_agent(conn, user_id=user.id)
    if not (message.content or "").strip():
        raise NothingToTranslateError(f"message {message_id} has no text")
    if agent is None:
        raise ValidationFailedError("you have no agent to translate with")
    return message, agent.model_config_.translation


async def _call_model(
    translator: Translator, user: User, choice: ModelChoice, call: ChatCall
) -> str:
    try:
        provider = await translator.registry.provider_for(user.id, choice)
        async with asyncio.timeout(translator.timeout_seconds):
            text = "".join([piece async for piece in provider.stream(call)]).strip()
    except TimeoutError as exc:
        raise TranslationFailedError("the translation model took too long to answer") from exc
    except ProviderError as exc:
        raise TranslationFailedError(
            f"{exc.detail} (provider {choice.provider}, model {choice.model}, error {exc.kind})",
            kind=exc.kind,
        ) from exc
    if not text:
        raise TranslationFailedError("the translation model sent an empty answer")
    return text
