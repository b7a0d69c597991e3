"""Embedder tests of the rules models break most: ``model_id`` changes
whenever outputs would, duplicates and blank texts inside one call, several
different calls in flight at once. Each names the rules it checks."""

from __future__ import annotations

import asyncio

import numpy as np

from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.models import BLANKS, arrays_same, check_model_id_identifies_outputs


class EmbedderEdgeCaseTests:
    @checks("embedder.model-id.identifies-outputs")
    async def test_model_id_changes_when_vectors_do(self, adapter):
        """Instances whose options differ in one numeric or boolean field and
        give different vectors have different ``model_id``s.

        Troubleshoot: put dimension, normalisation, truncation into model_id.
        """
        texts = ["Solar panels convert sunlight into electricity. " * 8, "wind"]
        await check_model_id_identifies_outputs(adapter, lambda m: m.embed(texts), arrays_same)

    @checks("embedder.embed.duplicates")
    async def test_duplicate_texts_in_one_call(self, adapter):
        """A text repeated in one call gets the same row at each position, and
        the rows around the repeats are the rows of their own texts.

        Troubleshoot: de-duplicating before the provider call is fine; mapping
        the answers back must restore every position.
        """
        texts = ["alpha beta", "gamma", "alpha beta", "delta epsilon", "gamma", "alpha beta"]
        out = await adapter.embed(texts)
        assert out.shape == (len(texts), adapter.dimension)
        alone = {t: (await adapter.embed([t]))[0] for t in set(texts)}
        for i, t in enumerate(texts):
            assert np.allclose(out[i], alone[t], atol=1e-5, rtol=0), f"row {i} ({t!r}) is not that text's vector"

    @checks("embedder.embed.blank-nonzero")
    async def test_blank_texts_get_non_zero_vectors(self, adapter):
        """Blank texts (empty, spaces, newlines) get finite, non-zero rows,
        alone and between other texts.

        Troubleshoot: a provider refusing empty input, or a model returning zeros
        for it, must be answered with a usable vector (embed a placeholder),
        since every vector store rejects zero vectors.
        """
        texts = ["before", *BLANKS, "after"]
        out = await adapter.embed(texts)
        assert out.shape == (len(texts), adapter.dimension)
        assert np.isfinite(out).all()
        norms = np.linalg.norm(out.astype(np.float64), axis=1)
        zero = [repr(t) for t, n in zip(texts, norms) if not n > 0]
        assert not zero, f"zero vectors for {zero}: vector stores reject them"

    @checks("embedder.embed.concurrent")
    async def test_different_concurrent_calls_get_their_own_rows(self, adapter):
        """Six different ``embed`` calls awaited together each get the rows
        they get alone.

        Troubleshoot: no shared per-call buffers; match answers to calls.
        """
        calls = [[f"text {i} {w}", f"second {w} {i}"] for i, w in enumerate(["red", "blue", "green", "sun", "moon", "sea"])]
        alone = [await adapter.embed(c) for c in calls]
        together = await asyncio.gather(*(adapter.embed(c) for c in calls))
        for c, a, t in zip(calls, alone, together):
            assert np.allclose(a, t, atol=1e-5, rtol=0), f"embed({c!r}) awaited with others gave other rows"
