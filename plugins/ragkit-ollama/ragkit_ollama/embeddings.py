"""``OllamaEmbedder``: the ``ollama`` embedder (``/api/embed``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from ragkit.models import check_vectors, embed_in_batches, embedding_dimension, model_identity
from ragkit_ollama._base import OllamaAdapter, OllamaOptions

KNOWN_DIMENSIONS = {
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "bge-m3": 1024,
    "all-minilm": 384,
    "snowflake-arctic-embed": 1024,
}


class OllamaEmbedderOptions(OllamaOptions):
    """``[embedder.options]`` of the ``ollama`` embedder."""

    model: str = "nomic-embed-text"
    dimensions: int | None = Field(default=None, ge=1)
    """Vector length; required for models not in ``KNOWN_DIMENSIONS``. Every
    returned vector is checked against it."""
    batch_size: int = Field(default=32, ge=1)
    """Texts per ``/api/embed`` request."""
    truncate: bool = True
    """Cut texts longer than the model's context instead of failing."""


class OllamaEmbedder(OllamaAdapter):
    """Vectors from ``/api/embed`` as float32 rows, requests of at most
    ``batch_size`` texts sent concurrently (within ``max_concurrency``)."""

    name: ClassVar[str] = "ollama"
    section: ClassVar[str] = "embedder"
    capabilities = frozenset()
    Options = OllamaEmbedderOptions
    options: OllamaEmbedderOptions

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        opts = self.options
        self.dimension: int = embedding_dimension("ollama", opts.model, opts.dimensions, KNOWN_DIMENSIONS)
        self.max_batch_size: int = opts.batch_size
        # model_options go to /api/embed as "options" (num_ctx changes long
        # texts' vectors), so they are part of the id; unset, the id is unchanged.
        self.model_id = model_identity("ollama", f"{opts.model}:{self.dimension}", model_options=opts.model_options)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await embed_in_batches(texts, self.max_batch_size, self.dimension, self._embed_batch)

    async def _embed_batch(self, texts: list[str]) -> np.ndarray:
        params: dict[str, Any] = {
            "model": self.options.model,
            "input": texts,
            "truncate": self.options.truncate,
        }
        if self.model_options():
            params["options"] = self.model_options()
        if self.options.keep_alive is not None:
            params["keep_alive"] = self.options.keep_alive
        response = await self.calls.run(lambda: self.client().embed(**params))
        matrix = check_vectors(response.embeddings, len(texts), self.dimension, self.calls.service)
        self.usage.record("embedding", response.prompt_eval_count)
        return matrix
