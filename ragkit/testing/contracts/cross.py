"""Rules across protocols (stated in ``ragkit.protocols.models``' docstring):
an adapter pair that each passes its own contract must still work together.

- ``CrossProtocolContract``: an embedder's rows, blank texts included, are
  accepted by a vector store of its dimension and found again. Override the
  ``embedder`` fixture (a model instance) and the ``vector_store`` fixture (a
  fresh opened store of ``embedder.dimension``, dropped after); ragkit's
  ``tests/contract`` runs it for every embedder x vector store pair.
- the cross rules one model states about its own outputs
  (``RerankerOrderTests``, ``LLMStreamJoinTests``) are part of
  ``RerankerContract`` and ``LLMContract`` (``reranker/``, ``llm/``).
"""

from __future__ import annotations

import numpy as np
import pytest

from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.models import BLANKS

TEXTS = [
    "Solar panels convert sunlight into electricity.",
    "太阳能电池板将阳光转化为电能。",
    *BLANKS,
    "Solar panels convert sunlight into electricity.",
    "🙂",
    "x" * 3000,
]


class CrossProtocolContract:
    """An embedder and a vector store together; see the module docstring."""

    @pytest.fixture
    def embedder(self):
        pytest.fail("override the `embedder` fixture: yield an embedder instance")

    @pytest.fixture
    def vector_store(self, embedder):
        pytest.fail("override the `vector_store` fixture: yield a fresh opened store of embedder.dimension")

    @checks("cross.embedder-vector.accepted", "embedder.embed.blank-nonzero")
    @pytest.mark.asyncio
    async def test_embedder_rows_are_accepted_by_the_vector_store(self, embedder, vector_store):
        """Every row of the embedder, for blank, duplicate, CJK, emoji and long
        texts, is accepted by the vector store, and a query with a row finds a
        record of that row first (score ~1).

        Troubleshoot: an embedder must never return a zero or non-finite row
        (blank text included); a vector store must accept every finite
        non-zero float32 row of its dimension.
        """
        assert vector_store.dimension == embedder.dimension
        rows = await embedder.embed(TEXTS)
        ids = [f"t{i}" for i in range(len(TEXTS))]
        await vector_store.upsert(ids, rows, [{"text": t[:50]} for t in TEXTS])
        assert await vector_store.count() == len(ids)
        for i, row in enumerate(rows):
            hits = await vector_store.query(row, 1)
            assert hits and hits[0].score > 1 - 1e-3, f"query with the row of {TEXTS[i]!r} found {hits}"
            same = {ids[j] for j in range(len(rows)) if np.allclose(rows[j], row, atol=1e-6)}
            assert hits[0].id in same, f"query with the row of {TEXTS[i]!r} found {hits[0].id}, not one of {sorted(same)}"


