"""Model protocols: LLM, embedder, reranker, tokenizer.

Structural (``typing.Protocol``): any object with these members works, no base
class needed. ``ModelAdapter`` is an optional base that parses options the same
way stores do.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ragkit.errors import ConfigError, describe_validation_error
from ragkit.ids import digest
from ragkit.protocols.base import Capability, NoOptions

Role = Literal["extraction", "summary", "keywords", "answer", "other"]


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str


class ChatRequest(BaseModel):
    """Everything that determines an LLM's answer, and so its cache key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt: str
    system: str | None = None
    history: tuple[Message, ...] = ()
    json_mode: bool = False
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    role: Role = "other"
    """What the call is for; used for usage accounting, not part of the cache key."""

    def cache_key(self, model_id: str) -> str:
        payload = self.model_dump(mode="json", exclude={"role"})
        return digest(model_id, json.dumps(payload, sort_keys=True, ensure_ascii=False))

    def messages(self) -> list[dict[str, str]]:
        """OpenAI-style message list: system, history, then the prompt."""
        out = [{"role": "system", "content": self.system}] if self.system else []
        out += [m.model_dump() for m in self.history]
        out.append({"role": "user", "content": self.prompt})
        return out


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0


class Completion(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str
    usage: Usage = Usage()


@runtime_checkable
class LLM(Protocol):
    """A chat model.

    - ``model_id`` is stable across processes and identifies everything that
      changes outputs (provider, model, relevant options); it is part of cache keys.
    - ``complete`` returns the whole text; ``stream`` yields pieces whose
      concatenation equals what ``complete`` would return for a deterministic model.
    - Failures raise ``ragkit.errors.ModelError`` naming the endpoint and the fix.
    """

    model_id: str
    capabilities: frozenset[Capability]

    async def complete(self, request: ChatRequest) -> Completion: ...

    def stream(self, request: ChatRequest) -> AsyncIterator[str]: ...


@runtime_checkable
class Embedder(Protocol):
    """Texts to vectors.

    ``embed(texts)`` returns a C-contiguous ``float32`` array of shape
    ``(len(texts), dimension)``; an empty list gives shape ``(0, dimension)``.
    Embedding texts in one call or one by one gives the same rows (within 1e-5).
    The core splits work into batches of at most ``max_batch_size``.
    """

    model_id: str
    dimension: int
    max_batch_size: int
    capabilities: frozenset[Capability]

    async def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class Reranker(Protocol):
    """Relevance of each document to the query: one float per document, in
    order, higher is more relevant. An empty list gives ``[]``."""

    model_id: str
    capabilities: frozenset[Capability]

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]: ...


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens for budgets and chunking. ``decode(encode(t)) == t``."""

    name: str

    def encode(self, text: str) -> list[int]: ...

    def decode(self, tokens: Sequence[int]) -> str: ...

    def count(self, text: str) -> int: ...


class ModelAdapter:
    """Optional base for model adapters: options parsed by the adapter's own model."""

    name: ClassVar[str] = ""
    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    Options: ClassVar[type[BaseModel]] = NoOptions

    def __init__(self, options: Mapping[str, Any] | BaseModel | None = None) -> None:
        if isinstance(options, BaseModel):
            options = options.model_dump()
        try:
            self.options = self.Options.model_validate(dict(options or {}))
        except Exception as exc:
            raise ConfigError(f"invalid options for {type(self).__name__}: {describe_validation_error(exc)}") from exc
