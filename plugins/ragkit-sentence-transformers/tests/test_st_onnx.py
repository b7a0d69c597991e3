"""``backend = "onnx"``: the same MiniLM through ONNX Runtime. Same vectors as
torch, one export per weights kept in a cache, a model's own ONNX file used
as shipped, and clear errors for what it cannot run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ragkit.errors import ConfigError, ModelError
from ragkit.testing import EmbedderContract
from ragkit_sentence_transformers import SentenceTransformerEmbedder, onnx_backend

EDGE_TEXTS = [
    "  Solar panels convert sunlight into electricity.  ",  # sentence-transformers strips
    "",
    "a",
    "太阳能电池板 🌞 发电",
    "word " * 600,  # past max_seq_length (256): truncated
    "The Danube flows through ten countries before reaching the Black Sea.",
]


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory) -> Path:
    """One export cache for the session: the first ONNX embedder exports MiniLM (~6 s)."""
    return tmp_path_factory.mktemp("onnx-cache")


def onnx_embedder(cache: Path, **options) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder({"backend": "onnx", "onnx_cache_dir": str(cache), **options})


async def test_vectors_equal_torchs(onnx_cache, passages):
    """Edge texts and 64 real passages, in one call and in small batches: torch's
    vectors to 1e-5, in the caller's order, and the same model_id."""
    texts = EDGE_TEXTS + passages[:64]
    torch_embedder = SentenceTransformerEmbedder()
    expected = await torch_embedder.embed(texts)
    onnx = onnx_embedder(onnx_cache)
    whole = await onnx.embed(texts)
    small = await onnx_embedder(onnx_cache, batch_size=5).embed(texts)
    assert whole.dtype == np.float32 and whole.shape == (len(texts), 384)
    for got in (whole, small):
        assert np.allclose(got, expected, atol=1e-5, rtol=0), float(np.abs(got - expected).max())
    assert onnx.model_id == torch_embedder.model_id
    assert onnx.dimension == 384


async def test_normalize_and_max_seq_length_as_with_torch(onnx_cache, minilm_folder):
    """A folder without a Normalize module: ``normalize = false`` gives torch's raw
    vectors, and ``max_seq_length`` truncates as torch's does."""
    texts = ["Paris is the capital of France.", "word " * 100]
    for options in ({"normalize": False}, {"max_seq_length": 16}):
        got = await onnx_embedder(onnx_cache, model=str(minilm_folder), **options).embed(texts)
        want = await SentenceTransformerEmbedder({"model": str(minilm_folder), **options}).embed(texts)
        assert np.allclose(got, want, atol=1e-5, rtol=0), (options, float(np.abs(got - want).max()))
    raw = await onnx_embedder(onnx_cache, model=str(minilm_folder), normalize=False).embed(texts)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-3)


async def test_the_export_is_made_once_and_reused(onnx_cache, minilm_folder):
    """Same weights, same export: loading again finds the file and does not rewrite
    it; no temporary file is left in the cache."""
    await onnx_embedder(onnx_cache).embed(["x"])
    folder = SentenceTransformerEmbedder().source.path
    target = onnx_backend.cached_export(Path(folder), onnx_cache)
    before = target.stat()
    encoder = onnx_backend.load_encoder(Path(folder), onnx_cache)
    assert encoder.session is not None
    after = target.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not [p for p in onnx_cache.rglob(".export-*")]
    # Other weights (the copy without Normalize has the same weights, at another path) get their own export.
    assert onnx_backend.cached_export(minilm_folder, onnx_cache) != target


async def test_a_damaged_cached_export_is_made_again(tmp_path, minilm_folder):
    cache = tmp_path / "cache"
    target = onnx_backend.cached_export(minilm_folder, cache)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"not an onnx model")
    encoder = onnx_backend.load_encoder(minilm_folder, cache)
    assert target.stat().st_size > 1_000_000
    assert encoder.encode(["a"], 8, 256, True).shape == (1, 384)


async def test_a_models_own_onnx_file_is_used_as_shipped(tmp_path, onnx_cache, minilm_folder):
    """A folder with ``onnx/model.onnx`` (the Hugging Face layout) needs no export:
    the cache stays empty and the vectors are the folder's."""
    await onnx_embedder(onnx_cache, model=str(minilm_folder)).embed(["x"])
    folder = tmp_path / "with-onnx"
    shutil.copytree(minilm_folder, folder)
    (folder / "onnx").mkdir()
    shutil.copy(onnx_backend.cached_export(minilm_folder, onnx_cache), folder / "onnx" / "model.onnx")
    empty_cache = tmp_path / "unused-cache"
    texts = ["Photosynthesis needs light.", "Mount Everest is in the Himalayas."]
    got = await onnx_embedder(empty_cache, model=str(folder)).embed(texts)
    want = await SentenceTransformerEmbedder({"model": str(minilm_folder)}).embed(texts)
    assert np.allclose(got, want, atol=1e-5, rtol=0)
    assert not empty_cache.exists()


async def test_a_layout_it_cannot_run_says_to_use_torch(tmp_path, minilm_folder):
    folder = tmp_path / "dense"
    shutil.copytree(minilm_folder, folder)
    modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"'Dense'.*use backend = \"torch\""):
        await onnx_embedder(tmp_path / "cache", model=str(folder)).embed(["x"])
    assert not (tmp_path / "cache").exists()


async def test_a_config_that_disagrees_with_the_weights_is_a_model_error(tmp_path, misdeclared_folder):
    """As with torch: the Pooling config's 512 against the weights' 384 is refused by name
    (it was a numpy broadcasting error)."""
    embedder = onnx_embedder(tmp_path / "cache", model=str(misdeclared_folder))
    with pytest.raises(ModelError, match=r"shape \(1, 384\).*declare dimension 512"):
        await embedder.embed(["x"])


async def test_a_cache_dir_under_home_is_expanded(tmp_path, monkeypatch, minilm_folder):
    """``onnx_cache_dir = "~/..."`` is the user's home, as in a config file it would be."""
    from ragkit_sentence_transformers import _loading

    _loading.forget_models()  # an earlier test's load of this folder would be reused, exporting nothing
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    await onnx_embedder(Path("~/onnx-exports"), model=str(minilm_folder)).embed(["x"])
    assert onnx_backend.cached_export(minilm_folder, tmp_path / "onnx-exports").is_file()
    assert not Path("~").exists()  # no folder literally named "~" in the working directory


def test_onnx_runs_on_the_cpu_only():
    with pytest.raises(ConfigError, match=r"runs on the CPU only, not on device 'cuda': "
                                          r'set device = "cpu" or use backend = "torch"$'):
        SentenceTransformerEmbedder({"backend": "onnx", "device": "cuda"})
    with pytest.raises(ConfigError, match="backend"):
        SentenceTransformerEmbedder({"backend": "tensorflow"})


def test_without_onnxruntime_the_error_names_the_install(tmp_path):
    """Run where ``onnxruntime`` cannot be imported: the first embed says what to install."""
    code = textwrap.dedent(f"""
        import asyncio, sys
        sys.modules["onnxruntime"] = None  # as if not installed
        from ragkit.errors import ConfigError, ModelError
        from ragkit_sentence_transformers import SentenceTransformerEmbedder
        e = SentenceTransformerEmbedder({{"backend": "onnx", "onnx_cache_dir": {str(tmp_path)!r}}})
        try:
            asyncio.run(e.embed(["x"]))
        except ConfigError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "'onnxruntime'" in out.stdout and onnx_backend.INSTALL_HINT in out.stdout
    assert list(tmp_path.iterdir()) == []  # nothing exported


class TestOnnxEmbedderContract(EmbedderContract):
    @pytest.fixture
    def adapter(self, onnx_cache):
        return onnx_embedder(onnx_cache)


async def test_without_a_cache_dir_exports_are_kept_under_xdg_cache_home(tmp_path, monkeypatch, onnx_cache, minilm_folder):
    """No ``onnx_cache_dir``: the export is looked for (and kept) in
    ``$XDG_CACHE_HOME/ragkit/onnx``, here seeded with the session's export."""
    from ragkit_sentence_transformers import _loading

    await onnx_embedder(onnx_cache, model=str(minilm_folder)).embed(["x"])
    seeded = onnx_backend.cached_export(minilm_folder, tmp_path / "xdg" / "ragkit" / "onnx")
    seeded.parent.mkdir(parents=True)
    shutil.copy(onnx_backend.cached_export(minilm_folder, onnx_cache), seeded)
    _loading.forget_models()  # the load above would be reused, reading no cache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    embedder = SentenceTransformerEmbedder({"backend": "onnx", "model": str(minilm_folder)})
    assert (await embedder.embed(["x"])).shape == (1, 384)
    assert not (tmp_path / "home").exists()  # nothing exported to ~/.cache instead
    assert [p.name for p in seeded.parent.parent.iterdir()] == [seeded.parent.name]


async def test_a_damaged_onnx_file_shipped_with_the_model_is_a_config_error_naming_it(tmp_path, minilm_folder):
    """A folder's own ``onnx/model.onnx`` is used as shipped, never replaced by an
    export: when ONNX Runtime cannot read it, the error names the model, the
    backend and the device."""
    folder = tmp_path / "broken-onnx"
    shutil.copytree(minilm_folder, folder)
    (folder / "onnx").mkdir()
    (folder / "onnx" / "model.onnx").write_bytes(b"not an onnx model")
    with pytest.raises(ConfigError) as info:
        await onnx_embedder(tmp_path / "cache", model=str(folder)).embed(["x"])
    assert str(info.value).startswith(
        f"cannot load SentenceTransformer-onnx model {str(folder)!r} ({folder}) on device 'cpu': InvalidProtobuf: "
    )
    assert not (tmp_path / "cache").exists()
