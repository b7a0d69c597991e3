"""Deterministic test doubles: no network, no model files, same output every run.

They are real adapters (registered as the ``scripted`` LLM and the ``overlap``
reranker by ``ragkit.testing.plugin``, in test runs only) so tests and adapter
authors exercise the same code paths the pipeline uses with real models. The
``hash`` embedder tests use is the production default (``ragkit.offline.embedder``),
importable from here too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from ragkit.ids import digest
from ragkit.offline.embedder import HashEmbedder, HashEmbedderOptions, words
from ragkit.protocols.base import Capability
from ragkit.protocols.models import ChatRequest, Completion, ModelAdapter, Usage

__all__ = ["HashEmbedder", "HashEmbedderOptions", "OverlapReranker", "ScriptedLLM", "ScriptedLLMOptions", "words"]


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
