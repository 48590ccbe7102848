"""Where the runtime gets a user's provider API key.

The data model stores keys encrypted (AES-256-GCM, ``users.llm_keys_json``; see
:mod:`gateway.services.llm_keys`). The runtime only needs :data:`LLMKeyLookup`: an async function
``(user_id, provider) -> plaintext key | None`` that the provider registry calls right before
each provider call, so the plaintext lives only in that call's client object. :func:`stored_key`
builds the lookup over the database and the instance's keyring; :func:`no_llm_key` answers None
(local OpenAI-compatible servers need no key; a hosted one then answers 401, which becomes a
clear system notice).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import asyncpg

from gateway.agents.providers import ProviderError
from gateway.errors import ConferError
from gateway.services.encryption import Keyring

LLMKeyLookup = Callable[[str, str], Awaitable[str | None]]


async def no_llm_key(user_id: str, provider: str) -> str | None:
    """A lookup that never has a key."""
    return None


def stored_key(pool: asyncpg.Pool, keyring: Keyring) -> LLMKeyLookup:
    """The lookup that decrypts the user's stored key for ``provider`` (None when none is set).

    A key that cannot be decrypted (key id missing from ``CONFER_ENCRYPTION_KEYS``, tampered
    envelope) raises ProviderError(``key_unavailable``), which the runtime stores as a system
    notice; the key itself never appears in errors or logs.
    """
    from gateway.services.llm_keys import decrypt_llm_key  # the accounts service owns decryption

    async def lookup(user_id: str, provider: str) -> str | None:
        try:
            return await decrypt_llm_key(pool, keyring, user_id=user_id, provider=provider)
        except (ConferError, ValueError) as exc:
            raise ProviderError(
                "key_unavailable", f"your stored {provider} key cannot be decrypted"
            ) from exc

    return lookup
