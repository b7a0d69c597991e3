"""``CrossEncoderReranker``: a local sentence-transformers cross-encoder.

```toml
[reranker]
name = "cross-encoder"
[reranker.options]
model = "/models/ms-marco-MiniLM-L6-v2"   # a local folder, or a Hub name in the local cache
```

Each (query, document) pair is scored by the model on its own: no normalisation
across the batch, so scoring documents together or one by one agrees. Same
offline rules, model cache and worker thread as the embedder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ragkit.errors import ConfigError, ModelError
from ragkit.protocols.base import Capability
from ragkit.protocols.models import ModelAdapter
from ragkit_sentence_transformers import _loading


class CrossEncoderOptions(BaseModel):
    """``[reranker.options]`` accepted by ``cross-encoder``."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    """A local folder or a Hugging Face Hub name in the local cache. No cross-encoder
    ships with this plugin: there is no default."""
    device: str = Field(default="cpu", min_length=1)
    batch_size: int = Field(default=32, ge=1)
    """Pairs per forward pass."""
    max_length: int | None = Field(default=None, ge=1)
    """Truncate each query+document pair to this many tokens (default: the model's limit)."""


class CrossEncoderReranker(ModelAdapter):
    """Relevance of documents to a query with a ``sentence_transformers.CrossEncoder``
    (one score per document, higher is more relevant: the model's own activation)."""

    name: ClassVar[str] = "cross-encoder"
    Options: ClassVar[type[BaseModel]] = CrossEncoderOptions
    capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.DETERMINISTIC})

    options: CrossEncoderOptions

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.source = _loading.resolve(self.options.model)
        suffix = f":max_length={self.options.max_length}" if self.options.max_length else ""
        self.model_id = f"cross-encoder:{self.source.label}{suffix}"

    def _loaded(self) -> _loading.Loaded:
        return _loading.load("CrossEncoder", self.source, self.options.device, _load_model)

    def loaded_model(self) -> Any:
        """The CrossEncoder model this adapter runs, loaded on first use (a blocking load);
        adapters with the same model and device share one."""
        return self._loaded().model

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        if not documents:
            return []
        pairs = [(query, doc) for doc in documents]
        return await asyncio.to_thread(self._predict, pairs)

    def _predict(self, pairs: list[tuple[str, str]]) -> list[float]:
        loaded = self._loaded()
        with loaded.lock:
            model = loaded.model
            attr = loaded.defaults["max_length_attr"]
            setattr(model, attr, self.options.max_length or loaded.defaults["max_length"])
            try:
                out = model.predict(pairs, batch_size=self.options.batch_size, show_progress_bar=False)
            except Exception as exc:
                raise ModelError(
                    f"cross-encoder model {self.source.name!r} failed to score {len(pairs)} documents: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        return np.asarray(out).ravel().tolist()  # Python floats, one per pair (num_labels is 1)


def _load_model(path: str, device: str) -> _loading.Loaded:
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(path, device=device, local_files_only=True)
    model.eval()
    if model.num_labels != 1:
        raise ConfigError(
            f"cross-encoder model {path!r} has {model.num_labels} output labels; a reranker needs a "
            "model with one relevance score per pair (num_labels=1)"
        )
    attr = max_length_attr(type(model))
    return _loading.Loaded(model, defaults={"max_length": getattr(model, attr), "max_length_attr": attr})


def max_length_attr(model_class: type) -> str:
    """The CrossEncoder attribute that holds the pairs' token limit:
    sentence-transformers 6 renamed ``max_length`` (5.x) to ``max_seq_length``
    and made the old name warn on every use."""
    return "max_seq_length" if hasattr(model_class, "max_seq_length") else "max_length"

