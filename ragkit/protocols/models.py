"""Model protocols: LLM, embedder, reranker, tokenizer.

Structural (``typing.Protocol``): any object with these members works, no base
class needed. ``ModelAdapter`` is an optional base that parses options the same
way stores do.

Rules across protocols (checked by ``CrossProtocolContract``):

- [cross.embedder-vector.accepted] Every row an embedder returns, for any text
  including blank ones, is accepted by every vector store of its dimension and
  found again by a query with that row.
- [cross.reranker.order] Sorting documents by a reranker's scores gives one
  order whatever order the documents were given in.
- [cross.llm.stream-concatenates] An LLM's stream joined is the text its
  ``complete`` gives (for a deterministic model), for answers of many pieces
  separated by whitespace.
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

Role = Literal["extraction", "summary", "keywords", "answer", "aliases", "other"]


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

    - [llm.model-id.stable] ``model_id`` is a non-empty str, stable across reads,
      instances and processes built from the same options.
    - [llm.model-id.identifies-outputs] ``model_id`` changes whenever outputs
      would: two instances whose answers to the same request differ (another
      model, temperature, any output-relevant option) have different
      ``model_id``s, since it is part of cache keys. Options forwarded to the
      provider unread (``extra_body``, ``model_options``: a ``dict[str, Any]``)
      are part of it, since the adapter cannot know they leave outputs alone.
      Endpoints, secrets, timeouts and concurrency limits stay out of it.
    - [llm.complete.completion] ``complete`` returns a ``Completion`` with the
      whole text, for every field of ``ChatRequest``.
    - [llm.concurrent.distinct] Several *different* requests in flight at once
      each get their own answer: a ``DETERMINISTIC`` model answers each
      exactly as when called alone (no answer crossed, dropped or merged).
    - [llm.stream.concatenates] ``stream`` yields str pieces whose concatenation
      equals what ``complete`` returns for a deterministic model, whitespace
      between and inside pieces included (no piece stripped, no separator
      added), however many pieces the answer takes.
    - Failures raise ``ragkit.errors.ModelError`` naming the endpoint and the fix.
    """

    model_id: str
    capabilities: frozenset[Capability]

    async def complete(self, request: ChatRequest) -> Completion: ...

    def stream(self, request: ChatRequest) -> AsyncIterator[str]: ...


@runtime_checkable
class Embedder(Protocol):
    """Texts to vectors.

    - [embedder.embed.shape] ``embed(texts)`` returns a C-contiguous ``float32``
      array of shape ``(len(texts), dimension)``, finite; an empty list gives
      shape ``(0, dimension)``. The input list is not changed.
    - [embedder.embed.batch-independent] Embedding texts in one call or one by
      one gives the same rows (within 1e-5), and so do repeated calls.
    - [embedder.embed.duplicates] A text repeated inside one call gets the
      same row at every position (no de-duplication that shifts rows).
    - [embedder.embed.blank-nonzero] Every text, blank ones (``""``, spaces,
      newlines) included, gets a finite *non-zero* row: every vector store
      rejects zero vectors, so an embedder returning one for blank text breaks
      the pipeline ([cross.embedder-vector.accepted]).
    - [embedder.embed.concurrent] Several different ``embed`` calls in flight at
      once each get their own rows, as when called alone.
    - [embedder.model-id.stable] ``model_id`` is a non-empty str, stable across
      reads and instances built from the same options.
    - [embedder.model-id.identifies-outputs] ``model_id`` changes whenever the
      vectors would (another model, ``dimension``, any output-relevant option,
      options forwarded to the provider unread), as for LLMs.
    - [embedder.declares] ``dimension`` and ``max_batch_size`` are ints >= 1;
      the core splits work into batches of at most ``max_batch_size``.
    """

    model_id: str
    dimension: int
    max_batch_size: int
    capabilities: frozenset[Capability]

    async def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class Reranker(Protocol):
    """Relevance of each document to the query.

    - [reranker.scores.shape] One finite float per document, in order, higher
      is more relevant; an empty list gives ``[]``.
    - [reranker.scores.relevance] A document sharing the query's subject scores
      higher than an unrelated one.
    - [reranker.scores.independent] A document's score depends only on the
      query and that document: scoring in one call or one by one, in any order
      of the documents, gives the same scores (within 1e-5), so sorting by
      score gives one order however the list was built.
    - [reranker.scores.duplicates] A document repeated inside one call gets the
      same score at every position.
    - [reranker.scores.blank] Blank documents (``""``, spaces) get a finite
      score, like any other.
    - [reranker.scores.concurrent] Several different ``scores`` calls in flight
      at once each get their own scores, as when called alone.
    - [reranker.model-id.stable] ``model_id`` is a non-empty str, stable across
      reads and instances built from the same options;
      [reranker.model-id.identifies-outputs] it changes whenever scores would
      (options forwarded to the provider unread included), as for LLMs.
    """

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
