"""Counts and progress of real ``ragkit index`` runs:
a run ``kill -9``-ed mid-way, then run again, reports counts that add up to
the documents given (its own summary and its progress line), and the progress
line says ``ETA estimating…`` until a rate is known, never ``ETA 0s`` with
work left.

Each run is a real ``ragkit index`` child (offline LLM, hash embedder,
embedded stores, ``RAGKIT_PROGRESS=plain``); small batches
(``max_batch_docs = 4``) so a kill falls between commits.

Troubleshooting: run ``RAGKIT_PROGRESS=plain ragkit index corpus`` by hand and
kill it; the progress events are in ``ragkit/pipeline/index.py``, the line in
``ragkit/cli/progress.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.rag import RAG
from ragkit.settings import Settings
from ragkit.testing.corpus import write_passages
from ragkit.testing.replay import load_musique

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

DOCS = 40
LINE = re.compile(r"(\d+)/(\d+) documents(?: \((\d+) unchanged\))?  (\d+) chunks")


def env(root: Path, **more: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k == "RAGKIT_MUSIQUE_DIR"}
    out.update(RAGKIT_LLM="offline", RAGKIT_EMBEDDER="hash", RAGKIT_PROGRESS="plain",
               RAGKIT_WORKING_DIR=str(root / "data"), RAGKIT_INDEX__MAX_BATCH_DOCS="4", **more)
    return out


def index(root: Path, *args: str, **more: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ragkit", "index", *args], cwd=root, env=env(root, **more),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def processed(root: Path) -> int:
    async def go():
        async with RAG(Settings(working_dir=root / "data"), llm="offline", embedder="hash") as rag:
            return (await rag.astatus()).get("processed", 0)

    return asyncio.run(go())


def kill_when(proc: subprocess.Popen, committed: int | None) -> None:
    """SIGKILL ``proc`` at its first progress line (``committed`` None) or once
    its line shows at least ``committed`` documents."""
    assert proc.stderr is not None
    for line in proc.stderr:
        match = LINE.match(line)
        if match and (committed is None or int(match.group(1)) >= committed):
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("committed", [None, 8], ids=["killed before any commit", "killed after 8 of 40"])
def test_counts_after_an_interrupted_run_add_up(tmp_path, committed):
    write_passages(tmp_path / "corpus", limit=DOCS)
    kill_when(index(tmp_path, "corpus"), committed)
    before = processed(tmp_path)
    assert before < DOCS, "the first run finished before it was killed"
    if committed:
        assert before >= committed

    proc = index(tmp_path, "corpus", "--json")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["processed"] + result["skipped_unchanged"] == DOCS, result
    assert (result["processed"], result["skipped_unchanged"]) == (DOCS - before, before)
    last = [m for m in map(LINE.match, err.splitlines()) if m][-1]
    unchanged = f" ({before} unchanged)" if before else ""
    assert last.group(0).startswith(f"{DOCS}/{DOCS} documents{unchanged}"), err[-2000:]


def test_eta_is_estimating_until_known_and_never_zero_with_work_left(tmp_path):
    """One file of ~200 chunks indexed window by window (``window_chunks`` 32)."""
    passages = load_musique()[0]
    text = "\n\n".join(f"{p['title']}\n{p['text']}" for p in passages[:400])
    (tmp_path / "big.txt").write_text(text)
    proc = index(tmp_path, "big.txt", RAGKIT_INDEX__WINDOW_CHUNKS="32", RAGKIT_INDEX__CHUNK_SIZE="300")
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    lines = [line for line in err.splitlines() if " documents" in line and "ETA" in line]
    first_extracted = next(i for i, line in enumerate(lines) if int(LINE.match(line).group(4)) > 0)
    assert first_extracted > 0 and all(line.rstrip().endswith("ETA estimating…") for line in lines[:first_extracted])
    for line in lines[first_extracted:]:
        committed = re.search(r"large documents: (\d+)/(\d+) chunks committed", line)
        extracted = int(LINE.match(line).group(4))
        if committed and int(committed.group(2)) - extracted >= 10:
            assert not line.rstrip().endswith(("ETA 0s", "ETA ≥0s")) and "estimating" not in line, line
            # A lower bound (≥) until the first window is merged, a figure with merging after.
            assert ("ETA ≥" in line) == (int(committed.group(1)) == 0), line
