"""``ragkit index / status / delete / check`` as a user runs them, on a folder
that mixes real passages with files that cannot be indexed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.testing.corpus import write_passages

RAGKIT = shutil.which("ragkit", path=str(Path(sys.executable).parent)) or "ragkit"


def ragkit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k == "RAGKIT_MUSIQUE_DIR"}
    env["RAGKIT_LLM"] = "replay"
    return subprocess.run([RAGKIT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def folder(tmp_path) -> Path:
    corpus = tmp_path / "corpus"
    write_passages(corpus, limit=8)
    (corpus / "empty.txt").write_text("  \n\n")
    (corpus / "image.txt").write_bytes(bytes(range(256)) * 4)
    (corpus / "latin1.txt").write_bytes("Caf\xe9 Tacuba is a band from Mexico City.".encode("latin-1"))
    return corpus


def status(cwd: Path) -> dict:
    out = ragkit("status", "--json", cwd=cwd)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_index_reports_each_bad_file_and_indexes_the_rest(tmp_path, folder):
    out = ragkit("index", "corpus", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("corpus/empty.txt: skipped") for line in lines), out.stdout
    assert any(line.startswith("corpus/image.txt: skipped") and "binary" in line for line in lines), out.stdout
    assert any(line.startswith("corpus/latin1.txt") and "replace" in line for line in lines), out.stdout
    assert "indexed 9 documents" in lines[-1]
    before = status(tmp_path)
    assert before["documents"]["processed"] == 9 and before["entities"] > 8

    # Indexing again changes nothing and calls no LLM.
    out = ragkit("index", "corpus", "--json", cwd=tmp_path)
    result = json.loads(out.stdout)
    assert result["processed"] == 0 and result["skipped_unchanged"] == 9
    assert sum(result["llm"]["calls"].values()) == 0
    assert status(tmp_path) == before


def test_changed_file_replaces_its_old_version_then_delete_and_check(tmp_path, folder):
    assert ragkit("index", "corpus", cwd=tmp_path).returncode == 0
    first = folder / "passage-0.txt"
    first.write_text(first.read_text() + "\nIt was updated in 2024.")
    out = ragkit("index", "corpus", "--json", cwd=tmp_path)
    result = json.loads(out.stdout)
    assert result["processed"] == 1 and len(result["replaced"]) == 1
    assert status(tmp_path)["documents"]["processed"] == 9

    old_id = result["replaced"][0]
    out = ragkit("delete", old_id, cwd=tmp_path)  # already replaced
    assert out.returncode == 2 and repr(old_id) in out.stderr and "nothing was deleted" in out.stderr
    new_id = next(i for i in json.loads(ragkit("index", "corpus", "--json", cwd=tmp_path).stdout)["files"]
                  if i["path"] == "corpus/passage-0.txt")["doc_id"]
    out = ragkit("delete", new_id, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert status(tmp_path)["documents"]["processed"] == 8
    out = ragkit("check", cwd=tmp_path)
    assert out.returncode == 0 and "no problems found" in out.stdout, out.stdout + out.stderr


def test_progress_line_on_a_terminal(tmp_path, folder):
    """On a terminal, stderr carries one self-updating line with the counters."""
    import pty

    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k == "RAGKIT_MUSIQUE_DIR"}
    env["RAGKIT_LLM"] = "replay"
    proc = subprocess.run([RAGKIT, "index", "corpus"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=follower, timeout=300)
    os.close(follower)
    written = b""
    while True:
        try:
            piece = os.read(leader, 65536)
        except OSError:
            break
        if not piece:
            break
        written += piece
    os.close(leader)
    assert proc.returncode == 0
    last = [line for line in written.decode().split("\r") if line.strip()][-1]
    for part in ("9/9 documents", "9 chunks", "9 LLM calls", "tokens", "elapsed", "ETA 0s"):
        assert part in last, last
