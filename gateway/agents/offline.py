"""The built-in offline provider: deterministic answers from the assembled context, no network.

It lets ``make run`` work with no keys. A reply quotes the memory or knowledge passage that
shares the most words with the user's last message (ties: the order of the context, i.e.
importance then priority) and says plainly that it is the offline provider. A ``summarize``
call returns the previous summary followed by one line per turn, each cut to 120 characters.
A ``translate`` call cannot translate: it returns the original text, marked as untranslated by
the offline provider and naming the target language (deterministic, for ``make run`` and tests).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from gateway.agents.providers import ChatCall, Source

NAME = "offline"
MODEL = "confer-offline"
_WORD = re.compile(r"\w{3,}", re.UNICODE)


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def best_source(call: ChatCall) -> Source | None:
    """The passage sharing the most words with the last user turn, or None when none shares any."""
    last = next((t.content for t in reversed(call.turns) if t.role == "user"), "")
    wanted = _words(last)
    best: Source | None = None
    best_score = 0
    for source in call.sources:
        score = len(wanted & _words(source.text))
        if score > best_score:
            best, best_score = source, score
    return best


def reply_text(call: ChatCall) -> str:
    """The deterministic reply for ``call``."""
    if call.purpose == "summarize":
        previous = [s.text for s in call.sources if s.kind == "summary"]
        lines = [f"- {t.content[:120]}{'…' if len(t.content) > 120 else ''}" for t in call.turns]
        return "\n".join(previous + lines)
    if call.purpose == "translate":
        original = next((t.content for t in reversed(call.turns) if t.role == "user"), "")
        return (
            f"[Confer's offline provider cannot translate into {call.language}; "
            f"the original text follows] {original}"
        )
    source = best_source(call)
    intro = "This is Confer's offline provider (no language model is configured for this agent)."
    if source is not None:
        label = f"your {source.kind}" + (f" “{source.title}”" if source.title else "")
        return f"{intro} From {label}: “{source.text}”"
    last = next((t.content for t in reversed(call.turns) if t.role == "user"), "")
    return (
        f"{intro} I received: “{last[:200]}”. Nothing I remember matches it; "
        f"I had {len(call.sources)} memories and knowledge entries in context."
    )


class OfflineProvider:
    """Streams :func:`reply_text` word by word."""

    name = NAME

    async def stream(self, call: ChatCall) -> AsyncIterator[str]:
        """Yield the reply in word-sized pieces (never fails)."""
        words = reply_text(call).split(" ")
        for index, word in enumerate(words):
            yield word if index == len(words) - 1 else word + " "
