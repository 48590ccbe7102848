"""A real LLM provider on loopback for tests: OpenAI-compatible and Anthropic wire formats.

Endpoints (served by uvicorn on 127.0.0.1, reached over real TCP by the code under test):

- ``POST /v1/embeddings`` (OpenAI): a deterministic 64-dimension bag-of-words vector per input;
  a few synonyms share a dimension, so "automobile" is near "car" although the words differ.
- ``POST /v1/chat/completions`` (OpenAI): with ``stream: true`` an SSE stream of
  ``chat.completion.chunk`` objects ending with ``data: [DONE]``; otherwise one completion.
- ``POST /v1/messages`` (Anthropic Messages): with ``stream: true`` the event sequence
  ``message_start``, ``content_block_start``, ``content_block_delta``…, ``content_block_stop``,
  ``message_delta``, ``message_stop``; otherwise one message.

The reply text is ``reply_prefix`` + the last user message, split into word chunks. Every
request body is recorded in ``requests``. ``fail_with`` makes the next chat calls answer that
HTTP status (for error paths); ``hang`` makes them wait until the client goes away; ``delay``
(seconds) makes each chat call wait that long first (a slow model), counting the calls in
flight (``in_flight``, the most at once in ``max_in_flight``). Token
usage (whitespace words) is reported as the real APIs do: Anthropic in ``message_start`` and
``message_delta``, OpenAI in a last chunk when ``stream_options.include_usage`` is asked for.
``embeddings_fail_with`` makes every embeddings call answer that status, and
``embeddings_refuse`` makes a call whose input contains that word answer 400.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

SYNONYMS = {"automobile": "car", "vehicle": "car", "cars": "car", "coffee": "espresso"}
DIMS = 64


def embed(text: str) -> list[float]:
    """Deterministic unit vector: one hashed dimension per (synonym-folded) lower-case word."""
    vector = [0.0] * DIMS
    for raw in text.lower().split():
        word = "".join(ch for ch in raw if ch.isalnum())
        if not word:
            continue
        word = SYNONYMS.get(word, word)
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMS] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class FakeLLM:
    """The server's state: recorded requests, the reply prefix, and an optional failure."""

    def __init__(self, reply_prefix: str = "echo: ") -> None:
        self.reply_prefix = reply_prefix
        self.requests: list[dict[str, Any]] = []
        self.fail_with: int | None = None
        self.hang = False
        self.delay = 0.0
        self.in_flight = 0
        self.max_in_flight = 0
        self.embeddings_fail_with: int | None = None
        self.embeddings_refuse: str | None = None

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/embeddings", self.embeddings, methods=["POST"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/messages", self.messages, methods=["POST"]),
            ]
        )

    async def _body(self, request: Request) -> dict[str, Any]:
        body = dict(await request.json())
        body["_path"] = request.url.path
        body["_auth"] = request.headers.get("authorization") or request.headers.get("x-api-key")
        self.requests.append(body)
        return body

    def _reply(self, messages: list[dict[str, Any]]) -> str:
        last = next((m for m in reversed(messages) if m.get("role") == "user"), {})
        content = last.get("content", "")
        if isinstance(content, list):
            content = " ".join(part.get("text", "") for part in content)
        return f"{self.reply_prefix}{content}"

    async def embeddings(self, request: Request) -> Response:
        body = await self._body(request)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if self.embeddings_fail_with:
            return JSONResponse({"error": {"message": "unavailable"}}, self.embeddings_fail_with)
        if self.embeddings_refuse and any(self.embeddings_refuse in t for t in inputs):
            return JSONResponse({"error": {"message": "input refused"}}, 400)
        data = [
            {"object": "embedding", "index": i, "embedding": embed(t)} for i, t in enumerate(inputs)
        ]
        return JSONResponse({"object": "list", "data": data, "model": body["model"]})

    async def chat(self, request: Request) -> Response:
        body = await self._body(request)
        if self.delay:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                await asyncio.sleep(self.delay)
            finally:
                self.in_flight -= 1
        while self.hang and not await request.is_disconnected():  # noqa: ASYNC110 - polls the client connection
            await asyncio.sleep(0.05)
        if self.fail_with:
            return JSONResponse({"error": {"message": "quota exceeded"}}, self.fail_with)
        text = self._reply(body["messages"])
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                }
            )

        async def stream() -> AsyncIterator[bytes]:
            for piece in _chunks(text):
                chunk = {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "model": body["model"],
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                }
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            done = {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "model": body["model"],
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
            yield f"data: {json.dumps(done)}\n\n".encode()
            if (body.get("stream_options") or {}).get("include_usage"):
                prompt, completion = count_words(body["messages"]), count_words(text)
                usage = {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "model": body["model"],
                    "choices": [],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": completion,
                        "total_tokens": prompt + completion,
                    },
                }
                yield f"data: {json.dumps(usage)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def messages(self, request: Request) -> Response:
        body = await self._body(request)
        if self.fail_with:
            return JSONResponse(
                {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
                self.fail_with,
            )
        text = self._reply(body["messages"])
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                }
            )

        async def stream() -> AsyncIterator[bytes]:
            def event(name: str, data: dict[str, Any]) -> bytes:
                return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

            yield event(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_1",
                        "type": "message",
                        "role": "assistant",
                        "model": body["model"],
                        "content": [],
                        "stop_reason": None,
                        "usage": {
                            "input_tokens": count_words([body.get("system", "")])
                            + count_words(body["messages"]),
                            "output_tokens": 1,
                        },
                    },
                },
            )
            yield event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            yield event("ping", {"type": "ping"})
            for piece in _chunks(text):
                yield event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
            yield event("content_block_stop", {"type": "content_block_stop", "index": 0})
            yield event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": count_words(text)},
                },
            )
            yield event("message_stop", {"type": "message_stop"})

        return StreamingResponse(stream(), media_type="text/event-stream")


def count_words(content: Any) -> int:
    """The fake's "tokenizer": whitespace-separated words in a string or in message contents
    (a list of ``{"content"}`` dicts or strings)."""
    if isinstance(content, str):
        return len(content.split())
    total = 0
    for item in content:
        total += count_words(item.get("content", "") if isinstance(item, dict) else item)
    return total


def _chunks(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
