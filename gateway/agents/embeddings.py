"""Embeddings from an OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

Request ``{"model": m, "input": [text, …]}``; response ``{"data": [{"index": i,
"embedding": [float, …]}, …]}`` (OpenAI Embeddings API; served alike by vLLM, Ollama,
llama.cpp's server and most of the provider catalog).
"""

from __future__ import annotations

import httpx


class EmbeddingError(Exception):
    """The embeddings endpoint could not be reached or answered something unusable."""


class Embedder:
    """Turns texts into vectors with one model; ``enabled`` is False when no URL is configured."""

    def __init__(
        self, http: httpx.AsyncClient, base_url: str | None, model: str, api_key: str | None
    ) -> None:
        self._http = http
        self._base_url = base_url.rstrip("/") if base_url else None
        self.model = model
        self._api_key = api_key

    @property
    def enabled(self) -> bool:
        """True when an embeddings endpoint is configured."""
        return self._base_url is not None

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order. Raises EmbeddingError on any transport or shape error."""
        if self._base_url is None:
            raise EmbeddingError("no embeddings endpoint is configured")
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            response = await self._http.post(
                f"{self._base_url}/embeddings",
                json={"model": self.model, "input": texts},
                headers=headers,
            )
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"embeddings endpoint unreachable: {exc}") from exc
        if response.status_code != 200:
            raise EmbeddingError(f"embeddings endpoint answered {response.status_code}")
        try:
            items = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in items]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"unusable embeddings response: {exc}") from exc
        if len(vectors) != len(texts) or any(not v for v in vectors):
            raise EmbeddingError("the embeddings response does not match the input")
        return vectors
