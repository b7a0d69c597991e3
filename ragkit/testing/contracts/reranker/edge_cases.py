"""Reranker tests of the rules models break most: ``model_id`` changes
whenever scores would, duplicates and blank documents inside one call,
several different calls in flight at once. Each names the rules it checks."""

from __future__ import annotations

import asyncio

import numpy as np

from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.models import BLANKS, arrays_same, check_model_id_identifies_outputs

QUERY = "how do solar panels make electricity"


class RerankerEdgeCaseTests:
    @checks("reranker.model-id.identifies-outputs")
    async def test_model_id_changes_when_scores_do(self, adapter):
        """Instances whose options differ in one numeric or boolean field and
        give different scores have different ``model_id``s.

        Troubleshoot: put truncation and any score-changing option into model_id.
        """
        docs = ["Solar panels make electricity from sunlight. " * 20, "A cake recipe."]
        await check_model_id_identifies_outputs(adapter, lambda m: m.scores(QUERY, docs), arrays_same)

    @checks("reranker.scores.duplicates", "reranker.scores.independent")
    async def test_duplicate_documents_in_one_call(self, adapter):
        """A document repeated in one call gets the same score at each position,
        equal to its score alone.

        Troubleshoot: providers answering with (index, score) pairs for unique
        documents must be mapped back to every position.
        """
        docs = ["solar panels make electricity", "cake recipe", "solar panels make electricity", "castles", "cake recipe"]
        out = await adapter.scores(QUERY, docs)
        assert len(out) == len(docs)
        alone = {d: (await adapter.scores(QUERY, [d]))[0] for d in set(docs)}
        got = [round(s, 5) for s in out]
        want = [round(alone[d], 5) for d in docs]
        assert np.allclose(out, [alone[d] for d in docs], atol=1e-5), f"scores {got}, alone {want}"

    @checks("reranker.scores.blank")
    async def test_blank_documents_get_finite_scores(self, adapter):
        """Blank documents get a finite float each, in their positions.

        Troubleshoot: providers refusing empty documents: score them locally
        (lowest) instead of failing or dropping them (which shifts the rest).
        """
        docs = ["solar panels", *BLANKS, "electricity"]
        out = await adapter.scores(QUERY, docs)
        assert len(out) == len(docs) and all(isinstance(s, float) and np.isfinite(s) for s in out), out
        alone = [(await adapter.scores(QUERY, [d]))[0] for d in (docs[0], docs[-1])]
        assert np.allclose([out[0], out[-1]], alone, atol=1e-5), "blank documents shifted the other scores"

    @checks("reranker.scores.concurrent")
    async def test_different_concurrent_calls_get_their_own_scores(self, adapter):
        """Five different ``scores`` calls awaited together each get the scores
        they get alone.

        Troubleshoot: no shared per-call state; match answers to calls.
        """
        calls = [(f"{w} power", [f"{w} power plants", "unrelated text", f"about {w}"]) for w in
                 ["solar", "wind", "water", "coal", "nuclear"]]
        alone = [await adapter.scores(q, d) for q, d in calls]
        together = await asyncio.gather(*(adapter.scores(q, d) for q, d in calls))
        for (q, _), a, t in zip(calls, alone, together):
            assert np.allclose(a, t, atol=1e-5), f"scores for {q!r} awaited with others: {t} != {a}"
