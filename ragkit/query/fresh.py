"""Embeddings of recomputed descriptions, kept across queries.

A scoped search scores every visible item whose description its scope
recomputed against that text embedded fresh (``query/scoped.py``), and a
scope recomputes the same texts query after query. So each text is embedded
once per embedder object and its vector kept in an LRU keyed by the text
itself, bounded by the floats it holds. A vector depends only on its text and
the embedder, so a kept one is never stale: a changed description is another
text. Unscoped queries never come here.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from ragkit.protocols import Embedder
from ragkit.query.counting import kept_for

MAX_FLOATS = 1 << 24
"""Floats kept per embedder (64 MiB as float32: 43,000 vectors of 384
dimensions, 16,000 of 1,024)."""

_BY_EMBEDDER: weakref.WeakKeyDictionary[Embedder, FreshVectors] = weakref.WeakKeyDictionary()


class FreshVectors:
    """Text -> its embedding by one embedder, the most recently used kept."""

    def __init__(self, embedder: Embedder, max_floats: int = MAX_FLOATS) -> None:
        self.embedder = embedder
        self.max_floats = max_floats
        self.floats = 0
        self.embedded = 0
        """Texts this cache had to embed (misses)."""
        self._kept: OrderedDict[str, np.ndarray] = OrderedDict()

    @classmethod
    def of(cls, embedder: Embedder) -> FreshVectors:
        """The vectors kept for this embedder object, for as long as it lives
        (a ``RAG`` keeps its embedder, so its queries share them)."""
        return kept_for(_BY_EMBEDDER, embedder, cls)

    async def vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's vector (float32), embedding the ones not kept in
        batches of the embedder's ``max_batch_size``."""
        found = {t: self._kept[t] for t in dict.fromkeys(texts) if t in self._kept}
        for t in found:
            self._kept.move_to_end(t)
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        step = max(1, self.embedder.max_batch_size)
        for start in range(0, len(missing), step):
            batch = missing[start:start + step]
            for text, row in zip(batch, await self.embedder.embed(batch), strict=True):
                found[text] = np.asarray(row, dtype=np.float32)
                self._keep(text, found[text])
        return [found[t] for t in texts]

    def _keep(self, text: str, vector: np.ndarray) -> None:
        if text in self._kept:  # embedded meanwhile by a concurrent query
            return
        self._kept[text] = vector
        self.embedded += 1
        self.floats += vector.size
        while self.floats > self.max_floats and len(self._kept) > 1:
            self.floats -= self._kept.popitem(last=False)[1].size
