"""``LLMContract``, ``EmbedderContract`` and ``RerankerContract``: what every
model adapter must do (see ``ragkit.protocols.models``).

The ``adapter`` fixture yields a ready model instance (``cls(options)``);
models have no lifecycle, so nothing needs closing unless the adapter holds
a client.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from ragkit.protocols.base import Capability
from ragkit.protocols.models import LLM, ChatRequest, Completion, Embedder, Message, Reranker
from ragkit.testing.contracts._base import ModelContractBase, contract, declared, needs
from ragkit.testing.contracts.cross import LLMStreamJoinTests, RerankerOrderTests
from ragkit.testing.contracts.models_edge import EmbedderEdgeCaseTests, LLMEdgeCaseTests, RerankerEdgeCaseTests
from ragkit.testing.contracts.rules import checks

TEXTS = [
    "Solar panels convert sunlight into electricity.",
    "太阳能电池板将阳光转化为电能。",
    "Wind turbines 🌬️ generate power from moving air.",
    "The quick brown fox jumps over the lazy dog.",
    "",
    "x" * 2000,
]
REQUEST = ChatRequest(prompt="Name one renewable energy source in one word.", max_tokens=20, temperature=0)


def _same_instance_options(adapter):
    """A second instance built the way the core builds models, when possible."""
    options = getattr(adapter, "options", None)
    if options is None:
        return None
    try:
        return type(adapter)(options)
    except TypeError:
        return None


def _check_model_id(adapter) -> None:
    model_id = adapter.model_id
    assert isinstance(model_id, str) and model_id.strip(), f"model_id must be a non-empty str, got {model_id!r}"
    assert adapter.model_id == model_id, "model_id changed between two reads"
    twin = _same_instance_options(adapter)
    if twin is not None:
        assert twin.model_id == model_id, (
            f"a second instance with the same options has model_id {twin.model_id!r} != {model_id!r}: "
            "derive model_id only from provider, model and output-relevant options"
        )


def _check_capabilities(adapter) -> None:
    caps = declared(adapter)
    assert all(isinstance(c, Capability) for c in caps), f"capabilities must be Capability members: {caps}"


# -- LLM ------------------------------------------------------------------------------


class LLMIdentityTests:
    @checks("llm.model-id.stable")
    async def test_model_id_is_a_stable_str(self, adapter):
        """``model_id`` is a non-empty str, unchanged across reads, calls and a
        second instance built from the same options (it is part of cache keys).

        Troubleshoot: build model_id from provider, model name and the options
        that change outputs; never include object ids, times or secrets.
        """
        _check_model_id(adapter)
        await adapter.complete(REQUEST)
        _check_model_id(adapter)

    async def test_declares_capabilities(self, adapter):
        """``capabilities`` is a frozenset of ``Capability`` members (an
        LLM may declare STREAMING, JSON_MODE, DETERMINISTIC).

        Troubleshoot: ``capabilities = frozenset({Capability.STREAMING})`` on the class.
        """
        _check_capabilities(adapter)
        assert isinstance(adapter, LLM)


class LLMCompleteTests:
    @checks("llm.complete.completion")
    async def test_complete_returns_a_completion(self, adapter):
        """``complete`` returns a ``Completion`` whose text is a str and whose
        usage counts are non-negative ints.

        Troubleshoot: wrap the provider response in ``Completion(text=..., usage=Usage(...))``.
        """
        out = await adapter.complete(REQUEST)
        assert isinstance(out, Completion), f"complete() returned {type(out).__name__}"
        assert isinstance(out.text, str)
        assert out.usage.input_tokens >= 0 and out.usage.output_tokens >= 0

    @checks("llm.complete.completion")
    async def test_complete_accepts_every_request_field(self, adapter):
        """A request with a system prompt, history, json_mode, max_tokens,
        temperature and a role is accepted (also CJK/emoji text).

        Troubleshoot: map ``ChatRequest.messages()`` to the provider's format;
        ignore json_mode if JSON_MODE is not declared rather than failing.
        """
        req = ChatRequest(
            prompt="继续 🙂: answer with {\"ok\": true}",
            system="You are terse.",
            history=(Message(role="user", content="hi"), Message(role="assistant", content="hello")),
            json_mode=Capability.JSON_MODE in declared(adapter),
            max_tokens=30,
            temperature=0.0,
            role="keywords",
        )
        out = await adapter.complete(req)
        assert isinstance(out, Completion) and isinstance(out.text, str)

    async def test_concurrent_calls(self, adapter):
        """Several ``complete`` calls awaited together all succeed (the pipeline
        runs LLM calls concurrently).

        Troubleshoot: do not share per-call state on the adapter; use a client
        that supports concurrent requests.
        """
        outs = await asyncio.gather(*(adapter.complete(REQUEST) for _ in range(4)))
        assert all(isinstance(o, Completion) for o in outs)

    @needs(Capability.DETERMINISTIC)
    async def test_same_request_same_text(self, adapter):
        """(DETERMINISTIC) The same request gives the same text every call.

        Troubleshoot: declare DETERMINISTIC only if outputs are reproducible
        (temperature 0 is usually not enough for hosted models).
        """
        first = await adapter.complete(REQUEST)
        second = await adapter.complete(REQUEST)
        assert first.text == second.text


class LLMStreamTests:
    @needs(Capability.STREAMING)
    async def test_stream_yields_str_pieces(self, adapter):
        """(STREAMING) ``stream`` is an async iterator of str pieces.

        Troubleshoot: ``stream`` is an ``async def`` generator yielding text deltas
        (skip empty/None deltas from the provider).
        """
        pieces = [p async for p in adapter.stream(REQUEST)]
        assert all(isinstance(p, str) for p in pieces), [type(p).__name__ for p in pieces]

    @needs(Capability.STREAMING)
    @checks("llm.stream.concatenates")
    async def test_stream_concatenates_to_complete_text(self, adapter):
        """(STREAMING) Joined, the streamed pieces equal ``complete``'s text for
        the same request (checked when DETERMINISTIC is declared too).

        Troubleshoot: do not drop the first/last delta or add separators.
        """
        streamed = "".join([p async for p in adapter.stream(REQUEST)])
        if Capability.DETERMINISTIC in declared(adapter):
            assert streamed == (await adapter.complete(REQUEST)).text
        else:
            assert isinstance(streamed, str)


@contract("llm", LLM)
class LLMContract(LLMEdgeCaseTests, LLMStreamJoinTests, LLMStreamTests, LLMCompleteTests, LLMIdentityTests, ModelContractBase):
    """The LLM contract. Subclass it and override one fixture::

        class TestMyLLM(LLMContract):
            @pytest.fixture
            def adapter(self):
                return MyLLM({"model": "small"})
    """


# -- embedder -------------------------------------------------------------------------


class EmbedderIdentityTests:
    @checks("embedder.model-id.stable")
    async def test_model_id_is_a_stable_str(self, adapter):
        """``model_id`` is a non-empty str, unchanged across reads, calls and a
        second instance with the same options.

        Troubleshoot: derive it from provider, model and dimension only.
        """
        _check_model_id(adapter)
        await adapter.embed(TEXTS[:1])
        _check_model_id(adapter)

    @checks("embedder.declares")
    async def test_declares_dimension_batch_size_and_capabilities(self, adapter):
        """``dimension`` and ``max_batch_size`` are positive ints and
        ``capabilities`` a set of ``Capability`` members.

        Troubleshoot: set them in ``__init__`` from the options/model card.
        """
        assert isinstance(adapter, Embedder)
        assert isinstance(adapter.dimension, int) and adapter.dimension >= 1
        assert isinstance(adapter.max_batch_size, int) and adapter.max_batch_size >= 1
        _check_capabilities(adapter)


class EmbedderEmbedTests:
    @checks("embedder.embed.shape")
    async def test_shape_dtype_and_values(self, adapter):
        """``embed`` returns a C-contiguous float32 array of shape (n, dimension)
        with finite values (CJK, emoji, empty and long texts included).

        Troubleshoot: ``np.ascontiguousarray(np.asarray(rows), dtype=np.float32)``;
        the provider's float64 lists must be converted.
        """
        texts = TEXTS[: adapter.max_batch_size]
        out = await adapter.embed(texts)
        assert isinstance(out, np.ndarray), f"embed returned {type(out).__name__}, not ndarray"
        assert out.shape == (len(texts), adapter.dimension), out.shape
        assert out.dtype == np.float32, out.dtype
        assert out.flags["C_CONTIGUOUS"]
        assert np.isfinite(out).all(), "embeddings must be finite (no NaN or infinity)"

    @checks("embedder.embed.shape")
    async def test_empty_input(self, adapter):
        """``embed([])`` returns a float32 array of shape (0, dimension) without
        calling the provider.

        Troubleshoot: ``np.zeros((0, self.dimension), dtype=np.float32)``.
        """
        out = await adapter.embed([])
        assert isinstance(out, np.ndarray) and out.shape == (0, adapter.dimension)
        assert out.dtype == np.float32

    @checks("embedder.embed.batch-independent")
    async def test_batch_equals_single_calls(self, adapter):
        """Embedding n texts in one call gives the same rows as n single calls,
        within 1e-5 (so batching never changes retrieval).

        Troubleshoot: padding or batch-dependent normalisation changes rows; embed
        each text independently of its batch mates.
        """
        texts = TEXTS[: min(len(TEXTS), adapter.max_batch_size)]
        batch = await adapter.embed(texts)
        singles = np.concatenate([await adapter.embed([t]) for t in texts])
        assert np.allclose(batch, singles, atol=1e-5, rtol=0), float(np.abs(batch - singles).max())

    @checks("embedder.embed.shape")
    async def test_does_not_mutate_the_input(self, adapter):
        """``embed`` leaves the caller's list unchanged.

        Troubleshoot: do not sort, strip or pop the caller's list in place.
        """
        texts = list(TEXTS[:3])
        before = list(texts)
        await adapter.embed(texts)
        assert texts == before

    @needs(Capability.DETERMINISTIC)
    @checks("embedder.embed.batch-independent")
    async def test_same_texts_same_vectors(self, adapter):
        """(DETERMINISTIC) The same texts give identical vectors every call.

        Troubleshoot: declare DETERMINISTIC only for reproducible embedders.
        """
        texts = TEXTS[:3]
        a = await adapter.embed(texts)
        b = await adapter.embed(texts)
        assert np.array_equal(a, b)


@contract("embedder", Embedder)
class EmbedderContract(EmbedderEdgeCaseTests, EmbedderEmbedTests, EmbedderIdentityTests, ModelContractBase):
    """The embedder contract. Subclass it and override one fixture::

        class TestMyEmbedder(EmbedderContract):
            @pytest.fixture
            def adapter(self):
                return MyEmbedder({"model": "small"})
    """


# -- reranker -------------------------------------------------------------------------

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
        _check_model_id(adapter)
        await adapter.scores(QUERY, DOCS[:1])
        _check_model_id(adapter)

    async def test_declares_capabilities(self, adapter):
        """``capabilities`` is a set of ``Capability`` members.

        Troubleshoot: ``capabilities = frozenset()`` if nothing applies.
        """
        assert isinstance(adapter, Reranker)
        _check_capabilities(adapter)


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


@contract("reranker", Reranker)
class RerankerContract(RerankerEdgeCaseTests, RerankerOrderTests, RerankerScoreTests, RerankerIdentityTests, ModelContractBase):
    """The reranker contract. Subclass it and override one fixture::

        class TestMyReranker(RerankerContract):
            @pytest.fixture
            def adapter(self):
                return MyReranker({})
    """
