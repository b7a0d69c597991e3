"""The ``hash`` embedder: ragkit's default when no embedder is configured.

Like the offline LLM it needs no model and no network: feature hashing of
words, so texts sharing words get similar vectors. Crude, but meaningful
enough for retrieval to rank by shared words until a real model is set
(``[embedder] name = "sentence-transformers"``, ``"openai"``, ...). Tests use
it too, for the same reason: the same vectors on every run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ragkit.core.pacing import Pacer
from ragkit.ids import digest
from ragkit.protocols.base import Capability
from ragkit.protocols.models import ModelAdapter

_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-cased word tokens; CJK runs are split into single characters so that
    Chinese text shares features without a segmenter."""
    out: list[str] = []
    for w in _WORD.findall(text.casefold()):
        if any("\u4e00" <= ch <= "\u9fff" for ch in w):
            out.extend(w)
        else:
            out.append(w)
    return out


class HashEmbedderOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dimension: int = Field(default=64, ge=2, le=4096)
    max_batch_size: int = Field(default=64, ge=1)


class HashEmbedder(ModelAdapter):
    """Feature hashing of words: texts sharing words get similar vectors.

    Crude but meaningful, so retrieval tests can assert on rankings."""

    name = "hash"
    Options = HashEmbedderOptions
    capabilities = frozenset({Capability.DETERMINISTIC})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.dimension = self.options.dimension
        self.max_batch_size = self.options.max_batch_size
        self.model_id = f"hash-{self.dimension}"
        self.calls = 0

    def _row(self, text: str) -> np.ndarray:
        row = np.zeros(self.dimension, dtype=np.float32)
        for w in words(text) or [""]:
            h = int(digest(w)[:8], 16)
            row[h % self.dimension] += 1.0 if h & (1 << 31) else -1.0
        norm = float(np.linalg.norm(row))
        if norm == 0.0:  # every feature cancelled out; keep the vector usable
            row[int(digest(text)[:8], 16) % self.dimension] = 1.0
            norm = 1.0
        return row / norm

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # Paced (``ragkit.core.pacing``): hashing a batch of long chunks is
        # hundreds of milliseconds, and a remote embedder, which this stands in
        # for in benchmarks, would leave the loop free while it works.
        pace, rows = Pacer(), []
        for text in texts:
            rows.append(self._row(text))
            await pace()
        return np.ascontiguousarray(np.stack(rows), dtype=np.float32)
