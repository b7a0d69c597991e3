"""``EmbedderContract``: what every ``Embedder`` adapter must do (see
``ragkit.protocols.models.Embedder``). The ``adapter`` fixture yields a ready
model instance (``cls(options)``)."""

from __future__ import annotations

import numpy as np

from ragkit.protocols.base import Capability
from ragkit.protocols.models import Embedder
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import ModelContractBase, contract, needs
from ragkit.testing.contracts.base.models import check_capabilities, check_model_id
from ragkit.testing.contracts.embedder.edge_cases import EmbedderEdgeCaseTests

TEXTS = [
    "Solar panels convert sunlight into electricity.",
    "太阳能电池板将阳光转化为电能。",
    "Wind turbines 🌬️ generate power from moving air.",
    "The quick brown fox jumps over the lazy dog.",
    "",
    "x" * 2000,
]


class EmbedderIdentityTests:
    @checks("embedder.model-id.stable")
    async def test_model_id_is_a_stable_str(self, adapter):
        """``model_id`` is a non-empty str, unchanged across reads, calls and a
        second instance with the same options.

        Troubleshoot: derive it from provider, model and dimension only.
        """
        check_model_id(adapter)
        await adapter.embed(TEXTS[:1])
        check_model_id(adapter)

    @checks("embedder.declares")
    async def test_declares_dimension_batch_size_and_capabilities(self, adapter):
        """``dimension`` and ``max_batch_size`` are positive ints and
        ``capabilities`` a set of ``Capability`` members.

        Troubleshoot: set them in ``__init__`` from the options/model card.
        """
        assert isinstance(adapter, Embedder)
        assert isinstance(adapter.dimension, int) and adapter.dimension >= 1
        assert isinstance(adapter.max_batch_size, int) and adapter.max_batch_size >= 1
        check_capabilities(adapter)


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
