"""Deliberately broken embedders, the embedder contract's test subjects: each adds
exactly one defect, named by its ``defect``, to the reference adapter (how
the self-test runs ``DEFECTS`` and ``RULE_BREAKERS``: ``base.broken``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ragkit.testing.doubles import HashEmbedder


class DimensionBlindIdEmbedder(HashEmbedder):
    """``model_id`` leaves out the dimension."""

    violates: ClassVar[str] = "embedder.model-id.identifies-outputs"
    defect: ClassVar[str] = "model_id ignores the dimension"

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.model_id = "hash"


class ShiftingDedupEmbedder(HashEmbedder):
    """De-duplicates texts before embedding, then maps rows back by position."""

    violates: ClassVar[str] = "embedder.embed.duplicates"
    defect: ClassVar[str] = "repeated texts shift the rows after them"

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        unique = list(dict.fromkeys(texts))
        rows = await super().embed(unique)
        if not len(texts):
            return rows
        return np.ascontiguousarray(rows[[min(i, len(unique) - 1) for i in range(len(texts))]])


class ZeroBlankEmbedder(HashEmbedder):
    """Returns a zero vector for blank text (what bag-of-words models do)."""

    violates: ClassVar[str] = "embedder.embed.blank-nonzero"
    defect: ClassVar[str] = "blank texts get zero vectors"

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = await super().embed(texts)
        for i, t in enumerate(texts):
            if not t.strip():
                out[i] = 0.0
        return out


class ZeroBlankPairEmbedder(ZeroBlankEmbedder):
    """``ZeroBlankEmbedder`` as the embedder of an embedder x vector store pair:
    the vector store rightly rejects its zero rows, so the pair fails."""

    violates: ClassVar[str] = "cross.embedder-vector.accepted"
    defect: ClassVar[str] = "blank texts get zero vectors, which vector stores reject"


class SharedBatchEmbedder(HashEmbedder):
    """Collects texts in one buffer on the adapter: calls in flight together
    read each other's texts."""

    violates: ClassVar[str] = "embedder.embed.concurrent"
    defect: ClassVar[str] = "concurrent calls get another call's rows"

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self._buffer = list(texts)
        await asyncio.sleep(0.01)
        mine = self._buffer if len(self._buffer) == len(texts) else list(texts)
        return await super().embed(mine)


DEFECTS: tuple[type, ...] = ()

RULE_BREAKERS: dict[str, tuple[type, ...]] = {
    "EmbedderContract": (DimensionBlindIdEmbedder, ShiftingDedupEmbedder, ZeroBlankEmbedder, SharedBatchEmbedder),
    "CrossProtocolContract": (ZeroBlankPairEmbedder,),
}

REFERENCES: dict[str, type] = {"EmbedderContract": HashEmbedder, "CrossProtocolContract": HashEmbedder}
