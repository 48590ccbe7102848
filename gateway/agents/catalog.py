"""The provider catalog: every LLM and tool provider Confer knows, in one place.

Nothing else in the code enumerates providers (data model spec, ``LLMKeys``: the list was once
copied elsewhere and froze). Each entry has a stable ``id`` (the key of ``users.llm_keys_json`` and
``ModelChoice.provider``), a display name, its ``kind`` (``llm`` or ``tool``), the wire format
it speaks (``api_style``) and its default base URL (``None``: the operator or user supplies
one). Model names are never listed here: they come from the provider's own ``/models``.

API styles: ``openai`` (OpenAI-compatible chat completions — most providers and local servers
such as llama.cpp, vLLM and Ollama), ``anthropic`` (Anthropic Messages), ``builtin`` (Confer's
offline provider, no network), ``tavily`` and ``brave`` (web search tools).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

ProviderKind = Literal["llm", "tool"]


@dataclass(frozen=True)
class Provider:
    """One catalog entry (see the module docstring for the fields)."""

    id: str
    display_name: str
    kind: ProviderKind
    api_style: str
    base_url: str | None
    requires_key: bool = True


def _llm(id: str, name: str, base_url: str | None, style: str = "openai") -> Provider:
    return Provider(id, name, "llm", style, base_url)


PROVIDERS: tuple[Provider, ...] = (
    _llm("openai", "OpenAI", "https://api.openai.com/v1"),
    _llm("anthropic", "Anthropic", "https://api.anthropic.com/v1", "anthropic"),
    _llm("google", "Google Gemini", "https://generativelanguage.googleapis.com/v1beta/openai"),
    _llm("mistral", "Mistral AI", "https://api.mistral.ai/v1"),
    _llm("deepseek", "DeepSeek", "https://api.deepseek.com/v1"),
    _llm("qwen", "Qwen (Alibaba Cloud)", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"),
    _llm("moonshot", "Moonshot AI (Kimi)", "https://api.moonshot.ai/v1"),
    _llm("zhipu", "Zhipu AI (GLM)", "https://open.bigmodel.cn/api/paas/v4"),
    _llm("groq", "Groq", "https://api.groq.com/openai/v1"),
    _llm("together", "Together AI", "https://api.together.xyz/v1"),
    _llm("fireworks", "Fireworks AI", "https://api.fireworks.ai/inference/v1"),
    _llm("openrouter", "OpenRouter", "https://openrouter.ai/api/v1"),
    _llm("xai", "xAI", "https://api.x.ai/v1"),
    _llm("perplexity", "Perplexity", "https://api.perplexity.ai"),
    _llm("cohere", "Cohere", "https://api.cohere.ai/compatibility/v1"),
    _llm("azure-openai", "Azure OpenAI", None),
    Provider("ollama", "Ollama (local)", "llm", "openai", "http://localhost:11434/v1", False),
    Provider("openai-compatible", "Any OpenAI-compatible server", "llm", "openai", None, False),
    Provider("offline", "Confer offline (built in, no network)", "llm", "builtin", None, False),
    Provider("tavily", "Tavily (web search)", "tool", "tavily", "https://api.tavily.com"),
    Provider("brave", "Brave Search", "tool", "brave", "https://api.search.brave.com/res/v1"),
)

_BY_ID = {p.id: p for p in PROVIDERS}


def get_provider(provider_id: str) -> Provider | None:
    """The catalog entry for ``provider_id``, or None when Confer does not know it."""
    return _BY_ID.get(provider_id)


def configured_providers(extra: Mapping[str, Mapping[str, str]]) -> tuple[Provider, ...]:
    """The catalog with the operator's endpoints (``CONFER_LLM_PROVIDERS``) folded in.

    An extra id that names a catalog provider overrides its wire format and base URL (and
    keeps its name and key requirement); a new id becomes an LLM provider of its own, keys
    optional (local servers need none). Catalog order first, then new ids sorted.
    """
    merged: list[Provider] = []
    for entry in PROVIDERS:
        override = extra.get(entry.id)
        if override is not None:
            entry = replace(
                entry, api_style=override.get("wire", "openai"), base_url=override["base_url"]
            )
        merged.append(entry)
    for provider_id in sorted(set(extra) - set(_BY_ID)):
        endpoint = extra[provider_id]
        merged.append(
            Provider(
                provider_id,
                provider_id,
                "llm",
                endpoint.get("wire", "openai"),
                endpoint["base_url"],
                requires_key=False,
            )
        )
    return tuple(merged)


def find_provider(provider_id: str, extra: Mapping[str, Mapping[str, str]]) -> Provider | None:
    """``provider_id`` in :func:`configured_providers`, or None."""
    return next((p for p in configured_providers(extra) if p.id == provider_id), None)


def llm_providers() -> tuple[Provider, ...]:
    """The providers an agent's ``model_config`` may name (kind ``llm``)."""
    return tuple(p for p in PROVIDERS if p.kind == "llm")


WIRE_FORMATS = ("openai", "anthropic")


def catalog_endpoints() -> dict[str, dict[str, str]]:
    """``{provider id: {"base_url", "wire"[, "stream_usage"]}}`` for every LLM provider with a
    default base URL and a wire format the runtime speaks (OpenAI-compatible chat completions,
    Anthropic); ``stream_usage: "true"`` asks an OpenAI-compatible endpoint for token usage."""
    endpoints = {
        p.id: {"base_url": p.base_url, "wire": p.api_style}
        for p in llm_providers()
        if p.base_url and p.api_style in WIRE_FORMATS
    }
    endpoints["openai"]["stream_usage"] = "true"  # OpenAI's own API reports streamed usage
    return endpoints
