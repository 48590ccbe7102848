"""LLM providers over httpx: OpenAI-compatible chat completions and Anthropic Messages, streaming.

- OpenAI-compatible (OpenAI API "Create chat completion", also vLLM, llama.cpp, Ollama and most
  of the catalog): ``POST {base}/chat/completions`` with ``stream: true``; the response is SSE,
  ``data: {chat.completion.chunk}`` lines whose ``choices[0].delta.content`` carry the text,
  ending with ``data: [DONE]``.
- Anthropic Messages API: ``POST {base}/messages`` with ``x-api-key`` and
  ``anthropic-version: 2023-06-01``, ``system`` at top level, ``max_tokens`` required, turns
  alternating from ``user``; the SSE events ``content_block_delta`` with ``text_delta`` carry
  the text, ``message_stop`` ends it, ``error`` reports a failure mid-stream.

Every failure becomes a :class:`ProviderError` with a ``kind`` the runtime turns into a clear
``system_notice``: ``unreachable``, ``timeout``, ``rate_limited``, ``auth``, ``unavailable``,
``rejected``, ``bad_response``, ``unknown_provider`` or ``key_unavailable`` (the stored key
cannot be decrypted).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from models.context import ChatTurn

ANTHROPIC_VERSION = "2023-06-01"


class ProviderError(Exception):
    """A provider call failed: ``kind`` says how (module docstring), ``status`` the HTTP code."""

    def __init__(self, kind: str, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.status = status


@dataclass
class Source:
    """A passage the model was given (memory or knowledge), for citations and offline answers."""

    kind: str
    id: str
    text: str
    title: str | None = None


@dataclass
class ChatCall:
    """One model call: system text, turns, the model, and the passages behind the system text.

    ``purpose`` is ``reply``, ``summarize`` or ``translate`` (the offline provider answers each
    its own way); ``language`` is the target language code of a ``translate`` call.
    """

    model: str
    system: str
    turns: list[ChatTurn]
    temperature: float | None = None
    max_tokens: int = 1024
    purpose: str = "reply"
    sources: list[Source] = field(default_factory=list)
    language: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    """Filled by the provider when its stream reports token usage: ``input_tokens`` (the
    prompt as the model's tokenizer counted it) and ``output_tokens``."""


class Provider(Protocol):
    """Anything that streams a reply for a :class:`ChatCall` as text deltas."""

    name: str

    def stream(self, call: ChatCall) -> AsyncIterator[str]:
        """Yield the reply in pieces. Raises ProviderError."""
        ...


def _status_error(status: int, body: str) -> ProviderError:
    if status == 429:
        return ProviderError("rate_limited", "the provider is rate limiting us (429)", status)
    if status in (401, 403):
        return ProviderError("auth", f"the provider refused our credentials ({status})", status)
    if status >= 500:
        return ProviderError("unavailable", f"the provider failed ({status})", status)
    return ProviderError(
        "rejected", f"the provider rejected the request ({status}): {body[:200]}", status
    )


async def _sse_data(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str], seconds: float
) -> AsyncIterator[dict[str, Any] | str]:
    """POST ``body`` and yield each SSE ``data:`` payload (parsed JSON, or the raw string)."""
    try:
        async with http.stream(
            "POST", url, json=body, headers=headers, timeout=seconds
        ) as response:
            if response.status_code != 200:
                raise _status_error(
                    response.status_code, (await response.aread()).decode(errors="replace")
                )
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                try:
                    yield json.loads(payload)
                except ValueError:
                    yield payload
    except httpx.TimeoutException as exc:
        raise ProviderError("timeout", f"the provider did not answer within {seconds} s") from exc
    except httpx.HTTPError as exc:
        raise ProviderError("unreachable", f"cannot reach the provider: {exc}") from exc


class OpenAICompatible:
    """``/chat/completions`` streaming client for one base URL and (optional) bearer key.

    With ``stream_usage`` the request asks for ``stream_options: {"include_usage": true}``
    (OpenAI API; not every compatible server accepts it, so it is opt-in per endpoint). A
    ``usage`` object in the stream (``prompt_tokens``, ``completion_tokens``) is recorded in
    ``call.usage`` whether asked for or not.
    """

    def __init__(
        self,
        name: str,
        http: httpx.AsyncClient,
        base_url: str,
        api_key: str | None,
        timeout: float,
        stream_usage: bool = False,
    ) -> None:
        self.name = name
        self._http = http
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        self._timeout = timeout
        self._stream_usage = stream_usage

    async def stream(self, call: ChatCall) -> AsyncIterator[str]:
        """Stream the completion's text deltas. Raises ProviderError."""
        messages = [{"role": "system", "content": call.system}] + [
            {"role": t.role, "content": t.content} for t in call.turns
        ]
        body: dict[str, Any] = {
            "model": call.model,
            "messages": messages,
            "stream": True,
            "max_tokens": call.max_tokens,
        }
        if call.temperature is not None:
            body["temperature"] = call.temperature
        if self._stream_usage:
            body["stream_options"] = {"include_usage": True}
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        async for data in _sse_data(self._http, self._url, body, headers, self._timeout):
            if data == "[DONE]":
                return
            if not isinstance(data, dict):
                raise ProviderError("bad_response", f"unexpected stream line: {str(data)[:100]}")
            if "error" in data:
                raise ProviderError("rejected", f"the provider reported: {data['error']}")
            _record_usage(call, data.get("usage"), "prompt_tokens", "completion_tokens")
            for choice in data.get("choices") or []:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    yield text


def _record_usage(call: ChatCall, usage: Any, input_key: str, output_key: str) -> None:
    """Copy the provider's integer token counts (when present) into ``call.usage``."""
    if not isinstance(usage, dict):
        return
    for key, ours in ((input_key, "input_tokens"), (output_key, "output_tokens")):
        value = usage.get(key) if key else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            call.usage[ours] = value


def anthropic_turns(turns: list[ChatTurn]) -> list[dict[str, str]]:
    """Turns as the Messages API wants them: alternating, starting with ``user``."""
    merged: list[dict[str, str]] = []
    for turn in turns:
        if merged and merged[-1]["role"] == turn.role:
            merged[-1]["content"] += "\n\n" + turn.content
        else:
            merged.append({"role": turn.role, "content": turn.content})
    if not merged or merged[0]["role"] != "user":
        merged.insert(0, {"role": "user", "content": "(the conversation so far)"})
    return merged


class Anthropic:
    """Anthropic Messages streaming client."""

    def __init__(
        self, name: str, http: httpx.AsyncClient, base_url: str, api_key: str | None, timeout: float
    ) -> None:
        self.name = name
        self._http = http
        self._url = base_url.rstrip("/") + "/messages"
        self._api_key = api_key
        self._timeout = timeout

    async def stream(self, call: ChatCall) -> AsyncIterator[str]:
        """Stream the message's text deltas. Raises ProviderError."""
        body: dict[str, Any] = {
            "model": call.model,
            "system": call.system,
            "stream": True,
            "max_tokens": call.max_tokens,
            "messages": anthropic_turns(call.turns),
        }
        if call.temperature is not None:
            body["temperature"] = call.temperature
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        async for data in _sse_data(self._http, self._url, body, headers, self._timeout):
            if not isinstance(data, dict):
                continue
            kind = data.get("type")
            if kind == "message_start":
                _record_usage(call, (data.get("message") or {}).get("usage"), "input_tokens", "")
            elif kind == "message_delta":
                _record_usage(call, data.get("usage"), "", "output_tokens")
            if kind == "error":
                raise ProviderError("rejected", f"the provider reported: {data.get('error')}")
            if kind == "content_block_delta" and data["delta"].get("type") == "text_delta":
                yield data["delta"]["text"]
            elif kind == "message_stop":
                return
