"""Where the runtime gets a user's provider API key.

The data model stores keys encrypted (AES-256-GCM, ``users.llm_keys_json``); decrypting them is
the accounts service's job. The runtime only needs :data:`LLMKeyLookup`: an async function
``(user_id, provider) -> plaintext key | None`` called right before each provider call, so the
plaintext lives only for that call. Until encrypted keys exist, :func:`no_llm_key` answers None
(local OpenAI-compatible servers need no key; hosted ones then answer 401, which becomes a
clear system notice).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

LLMKeyLookup = Callable[[str, str], Awaitable[str | None]]


async def no_llm_key(user_id: str, provider: str) -> str | None:
    """The placeholder lookup: no stored keys yet."""
    return None
