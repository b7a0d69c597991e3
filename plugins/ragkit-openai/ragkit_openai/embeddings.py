"""``OpenAIEmbedder``: the ``openai`` embedder (``/embeddings``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from ragkit.models import check_vectors, embed_in_batches, embedding_dimension, model_identity
from ragkit_openai._base import OpenAIAdapter, OpenAIOptions

KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedderOptions(OpenAIOptions):
    """``[embedder.options]`` of the ``openai`` embedder."""

    model: str = "text-embedding-3-small"
    dimensions: int | None = Field(default=None, ge=1)
    """Vector length. Required for models not in ``KNOWN_DIMENSIONS``; every
    returned vector is checked against it."""
    send_dimensions: bool | None = None
    """Send ``dimensions`` to the API, which then shortens the vectors (only
    ``text-embedding-3-*`` models support it). Default: when ``dimensions`` is
    set and the model name starts with ``text-embedding-3``."""
    batch_size: int = Field(default=128, ge=1, le=2048)
    """Texts per request (OpenAI accepts up to 2048, and 300k tokens)."""


class OpenAIEmbedder(OpenAIAdapter):
    """Vectors from ``/embeddings`` as float32 rows, requests of at most
    ``batch_size`` texts sent concurrently (within ``max_concurrency``).
    Empty texts are sent as one space: OpenAI rejects empty inputs."""

    name: ClassVar[str] = "openai"
    section: ClassVar[str] = "embedder"
    capabilities = frozenset()
    Options = OpenAIEmbedderOptions
    options: OpenAIEmbedderOptions

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        opts = self.options
        self.dimension: int = embedding_dimension("openai", opts.model, opts.dimensions, KNOWN_DIMENSIONS)
        self.max_batch_size: int = opts.batch_size
        # extra_body is forwarded unread (it may set truncation or dimensions on
        # OpenAI-compatible servers), so it is part of the id; unset, the id is
        # what it always was and existing caches stay valid.
        self.model_id = model_identity("openai", f"{opts.model}:{self.dimension}", extra_body=opts.extra_body)
        send = opts.send_dimensions
        self._send_dimensions = (
            send if send is not None else bool(opts.dimensions) and opts.model.startswith("text-embedding-3")
        )

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await embed_in_batches(texts, self.max_batch_size, self.dimension, self._embed_batch)

    async def _embed_batch(self, texts: list[str]) -> np.ndarray:
        params: dict[str, Any] = {
            "model": self.options.model,
            "input": [t or " " for t in texts],
            "encoding_format": "float",
        }
        if self._send_dimensions:
            params["dimensions"] = self.dimension
        if self.extra_body():
            params["extra_body"] = self.extra_body()
        response = await self.calls.run(lambda: self.client().embeddings.create(**params))
        rows = [d.embedding for d in sorted(response.data, key=lambda d: d.index)]
        matrix = check_vectors(rows, len(texts), self.dimension, self.calls.service)
        self.usage.record("embedding", getattr(response.usage, "prompt_tokens", 0))
        return matrix
