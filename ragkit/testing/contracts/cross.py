"""Rules across protocols (stated in ``ragkit.protocols.models``' docstring):
an adapter pair that each passes its own contract must still work together.

- ``CrossProtocolContract``: an embedder's rows, blank texts included, are
  accepted by a vector store of its dimension and found again. Override the
  ``embedder`` fixture (a model instance) and the ``vector_store`` fixture (a
  fresh opened store of ``embedder.dimension``, dropped after); ragkit's
  ``tests/contract`` runs it for every embedder x vector store pair.
- ``RerankerOrderTests`` and ``LLMStreamJoinTests`` are part of
  ``RerankerContract`` and ``LLMContract``.
"""

from __future__ import annotations

import numpy as np
import pytest

from ragkit.protocols.base import Capability
from ragkit.protocols.models import ChatRequest
from ragkit.testing.contracts._base import declared, needs
from ragkit.testing.contracts.models_edge import BLANKS, WHITESPACE_PROMPT
from ragkit.testing.contracts.rules import checks

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


class RerankerOrderTests:
    @checks("cross.reranker.order", "reranker.scores.independent")
    async def test_order_by_score_is_the_same_for_any_input_order(self, adapter):
        """Sorting documents by their scores gives one ranking whatever order
        they were given in (rotations and reversal of the list).

        Troubleshoot: score each document against the query alone; no
        position bias, no normalisation across the batch.
        """
        query = "which energy source uses sunlight"
        docs = ["solar panels use sunlight", "wind turbines", "coal plants burn coal",
                "sunlight on solar farms", "cake", "hydro dams use water"]

        async def ranking(order):
            got = await adapter.scores(query, [docs[i] for i in order])
            by_doc = {docs[i]: s for i, s in zip(order, got)}
            return [round(by_doc[d], 5) for d in docs]

        base = await ranking(list(range(len(docs))))
        for order in (list(reversed(range(len(docs)))), [2, 4, 0, 5, 1, 3]):
            other = await ranking(order)
            assert np.allclose(base, other, atol=1e-5), f"scores by document {base} vs {other} in order {order}"


class LLMStreamJoinTests:
    @needs(Capability.STREAMING)
    @checks("cross.llm.stream-concatenates", "llm.stream.concatenates")
    async def test_streams_join_to_the_full_answer(self, adapter):
        """(STREAMING) For several requests, the joined stream is ``complete``'s
        text (whenever ``complete`` answers twice the same: always for
        DETERMINISTIC models), and no piece is empty of meaning by being None.

        Troubleshoot: yield provider deltas unchanged, skip None, keep whitespace.
        """
        for prompt in (WHITESPACE_PROMPT, "one", "  leading and trailing  ", "line\n\nbreaks\n"):
            request = ChatRequest(prompt=prompt, temperature=0)
            a = (await adapter.complete(request)).text
            joined = "".join([p async for p in adapter.stream(request)])
            b = (await adapter.complete(request)).text
            if a == b:
                assert joined == a, f"stream joins to {joined!r}; complete gives {a!r}"
            else:
                assert Capability.DETERMINISTIC not in declared(adapter)
