"""Helpers for embedders that call a service: the vector length, batches
sent together, and a check of the vectors that come back."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ragkit.errors import ConfigError
from ragkit.models.failures import Service


def embedding_dimension(provider: str, model: str, dimensions: int | None, known: Mapping[str, int]) -> int:
    """``dimensions`` if set, else the known length of ``model`` (a ``:tag`` ignored)."""
    dimension = dimensions or known.get(model) or known.get(model.split(":")[0])
    if dimension is None:
        raise ConfigError(
            f"the {provider} embedder does not know the vector length of model {model!r}: "
            "set dimensions in [embedder.options] (RAGKIT_EMBEDDER__DIMENSIONS)"
        )
    return dimension


async def embed_in_batches(
    texts: Sequence[str],
    batch_size: int,
    dimension: int,
    embed_batch: Callable[[list[str]], Awaitable[np.ndarray]],
) -> np.ndarray:
    """``embed_batch`` on slices of at most ``batch_size`` texts, run together
    (the adapter's ``ModelCalls`` limits how many are in flight), as one
    C-contiguous float32 matrix; no call at all for no texts."""
    texts = list(texts)
    if not texts:
        return np.zeros((0, dimension), dtype=np.float32)
    slices = [texts[i : i + batch_size] for i in range(0, len(texts), batch_size)]
    parts = await asyncio.gather(*(embed_batch(s) for s in slices))
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)


def check_vectors(rows: Any, expected: int, dimension: int, service: Service) -> np.ndarray:
    """The service's vectors as a float32 matrix, or a ``ModelError`` saying
    what is wrong with them (count, length, non-finite values)."""
    matrix = np.asarray(rows, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != expected:
        raise service.bad_response(f"returned {len(matrix)} vectors for {expected} texts", "check the server")
    if matrix.shape[1] != dimension:
        raise service.bad_response(
            f"returned vectors of length {matrix.shape[1]}, but dimensions = {dimension}",
            f"set dimensions = {matrix.shape[1]} in [embedder.options] (a vector store built "
            "with another length must be rebuilt)",
        )
    if not np.isfinite(matrix).all():
        raise service.bad_response("returned vectors with NaN or infinite values")
    return matrix
