"""Deterministic test doubles: no network, no model files, same output every run.

They are real adapters (registered as the ``hash`` embedder, ``scripted`` LLM and
``overlap`` reranker) so tests and adapter authors exercise the same code paths
the pipeline uses with real models.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ragkit.core.pacing import Pacer
from ragkit.ids import digest
from ragkit.protocols.base import Capability
from ragkit.protocols.models import ChatRequest, Completion, ModelAdapter, Usage

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


Script = Mapping[str, str] | Sequence[str] | Callable[[ChatRequest], str]


class ScriptedLLMOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    responses: dict[str, str] = Field(default_factory=dict)
    """Prompt substring -> response; the first matching key (in order) wins."""
    default: str = "OK"
    latency: float = Field(default=0.0, ge=0)
    """Seconds each call sleeps, to simulate a slow remote model."""
    chunk_size: int = Field(default=7, ge=1)
    """Characters per streamed piece."""


class ScriptedLLM(ModelAdapter):
    """Answers from a script: a dict of prompt substrings, a list consumed in
    order, or a function of the request. Records every request in ``requests``."""

    name = "scripted"
    Options = ScriptedLLMOptions
    capabilities = frozenset({Capability.STREAMING, Capability.JSON_MODE, Capability.DETERMINISTIC})

    def __init__(self, options=None, *, script: Script | None = None) -> None:
        super().__init__(options)
        self._script: Script = script if script is not None else dict(self.options.responses)
        self._queue = list(script) if isinstance(script, Sequence) and not isinstance(script, str) else None
        self.model_id = "scripted:" + digest(repr(sorted(self.options.responses.items())), self.options.default)[:12]
        self.requests: list[ChatRequest] = []

    def _answer(self, request: ChatRequest) -> str:
        self.requests.append(request)
        if callable(self._script):
            return self._script(request)
        if self._queue is not None:
            if not self._queue:
                raise AssertionError("ScriptedLLM ran out of scripted responses")
            return self._queue.pop(0)
        for needle, response in self._script.items():
            if needle in request.prompt:
                return response
        return self.options.default

    async def complete(self, request: ChatRequest) -> Completion:
        if self.options.latency:
            await asyncio.sleep(self.options.latency)
        text = self._answer(request)
        return Completion(
            text=text,
            usage=Usage(input_tokens=len(words(request.prompt)), output_tokens=len(words(text))),
        )

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        text = (await self.complete(request)).text
        step = self.options.chunk_size
        for i in range(0, len(text), step):
            yield text[i : i + step]


class OverlapReranker(ModelAdapter):
    """Score = fraction of the query's distinct words found in the document."""

    name = "overlap"
    capabilities = frozenset({Capability.DETERMINISTIC})
    model_id = "overlap"

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        q = set(words(query))
        if not q:
            return [0.0 for _ in documents]
        return [len(q & set(words(d))) / len(q) for d in documents]
