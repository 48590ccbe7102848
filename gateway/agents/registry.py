"""Pick the provider client for a ``ModelChoice``.

Provider ids map to an endpoint ``{"base_url", "wire"}`` where ``wire`` is ``openai`` (chat
completions) or ``anthropic`` (Messages). ``CONFER_LLM_PROVIDERS`` (JSON) adds or overrides
entries, e.g. ``{"local": {"base_url": "http://127.0.0.1:8080/v1", "wire": "openai"}}``; the
provider catalog (``gateway.agents.catalog``) supplies the defaults; ``offline`` is always
available.
"""

from __future__ import annotations

import httpx

from gateway.agents.catalog import catalog_endpoints
from gateway.agents.keys import LLMKeyLookup
from gateway.agents.offline import OfflineProvider
from gateway.agents.providers import (
    Anthropic,
    OpenAICompatible,
    Provider,
    ProviderError,
)
from models import ModelChoice


class ProviderRegistry:
    """Builds a provider client per call, fetching the user's key just for that call."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        endpoints: dict[str, dict[str, str]],
        key_lookup: LLMKeyLookup,
        timeout: float,
    ) -> None:
        self._http = http
        self._endpoints = {**catalog_endpoints(), **endpoints}
        self._key_lookup = key_lookup
        self._timeout = timeout

    async def provider_for(self, user_id: str, choice: ModelChoice) -> Provider:
        """The client for ``choice.provider``. Raises ProviderError(``unknown_provider``)."""
        if choice.provider == OfflineProvider.name:
            return OfflineProvider()
        endpoint = self._endpoints.get(choice.provider)
        if endpoint is None:
            raise ProviderError("unknown_provider", f"no endpoint for provider {choice.provider!r}")
        key = await self._key_lookup(user_id, choice.provider)
        if endpoint.get("wire") == "anthropic":
            return Anthropic(choice.provider, self._http, endpoint["base_url"], key, self._timeout)
        return OpenAICompatible(
            choice.provider,
            self._http,
            endpoint["base_url"],
            key,
            self._timeout,
            stream_usage=str(endpoint.get("stream_usage", "")).lower() == "true",
        )
