"""Issue 32 item 2: commands that embed nothing never import a model library,
and a store made by another embedder opens; its vectors meet the configured
embedder only when they are read or written, and the error names the embedder
recorded in the store and the fix.

Troubleshooting: ``python -X importtime -m ragkit status`` with
``RAGKIT_EMBEDDER=sentence-transformers`` shows who imports torch (a top-level
``sentence_transformers`` line: the model was loaded, most often to read its
dimension; ``ragkit_sentence_transformers._loading.declared_dimension`` reads
it from the model's files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.testing.corpus import write_passages

HEAVY = ("sentence_transformers", "torch", "onnxruntime", "transformers")
PROBE = (
    "import atexit, json, runpy, sys\n"
    f"atexit.register(lambda: print('LOADED ' + json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr))\n"
    "sys.argv = ['ragkit', *sys.argv[1:]]\n"
    "runpy.run_module('ragkit', run_name='__main__')\n"
)


def ragkit(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k == "RAGKIT_MUSIQUE_DIR"}
    return subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env={**clean, **env},
                          capture_output=True, text=True, timeout=300)


def loaded(out: subprocess.CompletedProcess) -> list[str]:
    line = next(x for x in out.stderr.splitlines() if x.startswith("LOADED "))
    return json.loads(line.removeprefix("LOADED "))


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> Path:
    """Indexed with 384-dimension hash vectors, MiniLM's dimension (indexing
    with MiniLM itself would load it; these commands read no vector anyway)."""
    root = tmp_path_factory.mktemp("lazy")
    write_passages(root / "corpus", limit=4)
    out = ragkit("index", "corpus", cwd=root, RAGKIT_LLM="replay", RAGKIT_EMBEDDER="hash",
                 RAGKIT_EMBEDDER__DIMENSION="384")
    assert out.returncode == 0, out.stderr
    return root


@pytest.mark.parametrize("command", [
    ["status"], ["documents"], ["check"], ["config"], ["plugins"], ["export", "graph.json"],
    ["delete", "corpus/missing.txt"],
])
def test_commands_that_embed_nothing_import_no_model_library(indexed, command):
    out = ragkit(*command, cwd=indexed, RAGKIT_EMBEDDER="sentence-transformers")
    assert loaded(out) == [], f"ragkit {' '.join(command)} imported model libraries; stderr: {out.stderr[-2000:]}"
    if command[0] != "delete":  # deleting a path that is not indexed is an error of its own
        assert out.returncode == 0, out.stderr


def test_a_query_loads_the_model_when_it_embeds(indexed):
    out = ragkit("query", "Who?", "--context-only", cwd=indexed, RAGKIT_EMBEDDER="sentence-transformers")
    assert out.returncode == 0, out.stderr
    assert "sentence_transformers" in loaded(out)


def test_another_embedders_store_opens_and_its_vectors_name_their_embedder(indexed):
    status = ragkit("status", cwd=indexed, RAGKIT_EMBEDDER="hash")  # 64 dimensions, the store has 384
    assert status.returncode == 0, status.stderr
    assert "processed 4" in " ".join(status.stdout.split()), status.stdout
    query = ragkit("query", "Who?", "--context-only", cwd=indexed, RAGKIT_EMBEDDER="hash")
    assert query.returncode == 2
    error = query.stderr
    assert "dimension 384 made by the embedder hash (hash-384)" in error, error
    assert "hash (hash-64) makes vectors of dimension 64" in error, error
    assert "RAGKIT_EMBEDDER" in error and "re-index" in error and "Traceback" not in error
    index = ragkit("index", "corpus", cwd=indexed, RAGKIT_EMBEDDER="hash", RAGKIT_LLM="replay")
    assert index.returncode == 2 and "made by the embedder hash (hash-384)" in index.stderr, index.stderr
    assert "indexed" not in index.stdout  # refused before any document was read or any model called
