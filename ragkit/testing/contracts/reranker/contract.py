"""``RerankerContract``: what every ``Reranker`` adapter must do (see
``ragkit.protocols.models.Reranker``). The ``adapter`` fixture yields a ready
model instance (``cls(options)``)."""

from __future__ import annotations

import math

import numpy as np

from ragkit.protocols.base import Capability
from ragkit.protocols.models import Reranker
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import ModelContractBase, contract, needs
from ragkit.testing.contracts.base.models import check_capabilities, check_model_id
from ragkit.testing.contracts.reranker.edge_cases import RerankerEdgeCaseTests

QUERY = "how do solar panels make electricity"
DOCS = [
    "Recipes for chocolate cake and cookies.",
    "Solar panels make electricity from sunlight using photovoltaic cells.",
    "A history of medieval castles.",
    "太阳能电池板 🌞 发电",
]


class RerankerIdentityTests:
    @checks("reranker.model-id.stable")
    async def test_model_id_is_a_stable_str(self, adapter):
        """``model_id`` is a non-empty str, unchanged across reads, calls and a
        second instance with the same options.

        Troubleshoot: derive it from provider and model only.
        """
        check_model_id(adapter)
        await adapter.scores(QUERY, DOCS[:1])
        check_model_id(adapter)

    async def test_declares_capabilities(self, adapter):
        """``capabilities`` is a set of ``Capability`` members.

        Troubleshoot: ``capabilities = frozenset()`` if nothing applies.
        """
        assert isinstance(adapter, Reranker)
        check_capabilities(adapter)


class RerankerScoreTests:
    @checks("reranker.scores.shape")
    async def test_one_float_per_document_in_order(self, adapter):
        """``scores`` returns one finite float per document, in document order
        (reversing the documents reverses the scores).

        Troubleshoot: providers return results sorted by relevance with an
        index; put each score back at its document's position.
        """
        scores = await adapter.scores(QUERY, DOCS)
        assert isinstance(scores, list) and len(scores) == len(DOCS)
        assert all(isinstance(s, float) and math.isfinite(s) for s in scores), scores
        backwards = await adapter.scores(QUERY, DOCS[::-1])
        assert np.allclose(backwards[::-1], scores, atol=1e-5)

    @checks("reranker.scores.relevance")
    async def test_relevant_document_scores_higher(self, adapter):
        """The document that answers the query scores higher than unrelated ones
        (higher means more relevant).

        Troubleshoot: return relevance, not a distance (negate or invert it).
        """
        scores = await adapter.scores(QUERY, DOCS)
        assert scores[1] > scores[0] and scores[1] > scores[2], scores

    @checks("reranker.scores.shape")
    async def test_empty_documents(self, adapter):
        """``scores(query, [])`` returns ``[]`` without calling the provider.

        Troubleshoot: return early on an empty list.
        """
        assert await adapter.scores(QUERY, []) == []

    @checks("reranker.scores.independent")
    async def test_batch_equals_single_calls(self, adapter):
        """Scoring documents together gives the same scores as one at a time,
        within 1e-5 (scores must not be normalised across the batch).

        Troubleshoot: no softmax/min-max over the batch; score each document
        against the query alone.
        """
        together = await adapter.scores(QUERY, DOCS)
        alone = [(await adapter.scores(QUERY, [d]))[0] for d in DOCS]
        assert np.allclose(together, alone, atol=1e-5, rtol=0), (together, alone)

    @needs(Capability.DETERMINISTIC)
    async def test_same_input_same_scores(self, adapter):
        """(DETERMINISTIC) The same query and documents give identical scores.

        Troubleshoot: declare DETERMINISTIC only for reproducible rerankers.
        """
        assert await adapter.scores(QUERY, DOCS) == await adapter.scores(QUERY, DOCS)


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


@contract("reranker", Reranker)
class RerankerContract(RerankerEdgeCaseTests, RerankerOrderTests, RerankerScoreTests, RerankerIdentityTests, ModelContractBase):
    """The reranker contract. Subclass it and override one fixture::

        class TestMyReranker(RerankerContract):
            @pytest.fixture
            def adapter(self):
                return MyReranker({})
    """
