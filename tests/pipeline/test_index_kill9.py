"""Acceptance: ``kill -9`` at any point of indexing, then a restart, gives what
an uninterrupted run gives, and the redo asks the model nothing it already
answered.

Each case runs ``kill_worker.py`` (insert, a second insert, a delete, a changed
file replacing its old version) in a child that SIGKILLs itself at one point,
restarts it with ``--resume``, and compares every store with the stores of one
uninterrupted run of the same worker.

Troubleshooting: run the worker by hand, e.g.
``python tests/pipeline/kill_worker.py /tmp/k /tmp/k.json --kill 0/graph.flush/3/after``
then ``--resume``, and diff ``full_snapshot`` of /tmp/k against a clean run.
A snapshot difference names the store; an extraction call on restart for a
chunk already cached means the cache entry was not durable or not used.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragkit.schema import LEGACY_DELETING_FLAG, DocStatus
from ragkit.settings import Settings
from ragkit.testing.snapshot import folder_snapshot

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

WORKER = Path(__file__).with_name("kill_worker.py")
REPO = Path(__file__).resolve().parents[2]

KILL_POINTS = {
    # step 0: first insert
    "extracting, nothing committed": "0/llm/3/after",
    "first commit about to write": "0/chunks.upsert/1/before",
    "mid-flush: vectors on disk, graph not": "0/entity_vectors.flush/2/after",
    "graph flushed, status not processed": "0/graph.flush/3/after",
    "right after a full flush": "0/stores.flush/5/after",
    # the end of step 0's insert: 14 commits, then the deferred summaries' pass
    "alias links written, blocks not": "0/aliases.upsert/3/after",
    "summary pass, before its graph writes": "0/graph.upsert_nodes/15/before",
    "summary pass flushed, marks not cleared": "0/stores.flush/15/after",
    # step 1: a second insert over a workspace that already holds documents
    "second run, mid-commit": "1/extractions.upsert/2/after",
    "second run, extracting": "1/llm/10/after",
    # step 2: delete (the documents are left "deleting")
    "delete, contribution removed": "2/graph.flush/1/after",
    # SQLite writes at once, the graph at its flush: found by the fault campaign
    "delete, extractions gone, graph not flushed": "2/extractions.delete/1/after",
    "delete, before status removed": "2/full_docs.delete/1/after",
    "delete, alias links of gone entities half removed": "2/aliases.upsert/1/after",
    # step 3: a changed file replaces its old version
    "new version flushed, old one untouched": "3/stores.flush/1/after",
    "replacing the old version": "3/graph.flush/2/after",
    "old version deleted, path not repointed": "3/doc_paths.upsert/1/before",
}


def run_worker(workdir: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, str(WORKER), str(workdir), str(workdir / "calls.json"), *args],
        capture_output=True, text=True, timeout=timeout, env=env,
    )


def finished(proc: subprocess.CompletedProcess | subprocess.Popen, stderr: str) -> None:
    assert proc.returncode == 0, f"worker failed ({proc.returncode}):\n{stderr}"


async def full_snapshot(workdir: Path, settings: Settings | None = None) -> dict:
    """``ragkit.testing.snapshot.full_snapshot`` of the embedded stores in
    ``workdir``, unless ``settings`` name others."""
    return await folder_snapshot(workdir, 32, settings)


def extraction_keys(snap: dict) -> set[str]:
    return {k for k, role in snap["llm_cache"].items() if role == "extraction"}


def without_cache(snap: dict) -> dict:
    return {k: v for k, v in snap.items() if k != "llm_cache"}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """One uninterrupted run of the worker, computed once per module."""
    workdir = tmp_path_factory.mktemp("uninterrupted")
    proc = run_worker(workdir)
    finished(proc, proc.stderr)
    snap = asyncio.run(full_snapshot(workdir))
    calls = json.loads((workdir / "calls.json").read_text())
    assert calls["unknown_prompts"] == 0
    # One call per chunk, and several chunks per passage.
    assert calls["roles"].count("extraction") == len(extraction_keys(snap)) > 62
    assert snap["check_problems"] == [] and len(snap["nodes"]) > 100
    assert set(snap["doc_status"]) == set(snap["full_docs"]) and all(
        s[0] == DocStatus.PROCESSED.value for s in snap["doc_status"].values()
    )
    return snap


async def restart_and_compare(workdir: Path, reference: dict) -> None:
    before = await full_snapshot(workdir)
    cached = extraction_keys(before)
    proc = run_worker(workdir, "--resume")
    finished(proc, proc.stderr)
    calls = json.loads((workdir / "calls.json").read_text())
    after = await full_snapshot(workdir)

    # Summary calls depend on how documents fell into batches; compare the
    # cache on extraction entries only (one per chunk ever indexed).
    expected = extraction_keys(reference)
    assert extraction_keys(after) == expected
    assert without_cache(after) == without_cache(reference)

    # No chunk extracted (and cached) before the kill is asked again, and each
    # missing one is asked exactly once.
    redone = [k for k, role in zip(calls["keys"], calls["roles"]) if role == "extraction"]
    assert not set(redone) & cached, "restart re-extracted chunks that were cached"
    assert len(redone) == len(set(redone)) == len(expected) - len(cached)


@pytest.mark.parametrize("point", list(KILL_POINTS.values()), ids=list(KILL_POINTS))
async def test_kill_9_then_restart_equals_uninterrupted_run(tmp_path, reference, point):
    """Failure here: the restart left the stores different from a clean run
    (the diff names the store), or re-asked the model for cached chunks."""
    proc = run_worker(tmp_path, "--kill", point)
    assert proc.returncode == -signal.SIGKILL, f"worker was not killed at {point}:\n{proc.stderr}"
    if point.startswith("2/"):
        await deletes_marked_by_status(tmp_path)
    await restart_and_compare(tmp_path, reference)


async def deletes_marked_by_status(workdir: Path) -> None:
    """Killed mid-delete: the documents being deleted are found by their status
    (not by a metadata flag), and ``check`` reports them."""
    snap = await full_snapshot(workdir)
    deleting = {i: meta for i, (status, _, meta, _) in snap["doc_status"].items() if status == DocStatus.DELETING.value}
    assert len(deleting) == 3 and not any(LEGACY_DELETING_FLAG in meta for meta in deleting.values())
    assert sorted(item for kind, item in snap["check_problems"] if kind == "interrupted delete") == sorted(deleting)


async def test_kill_9_at_a_random_moment(tmp_path, reference):
    """The parent kills the child at a moment of its own choosing (seeded)."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    child = subprocess.Popen(
        [sys.executable, str(WORKER), str(tmp_path), str(tmp_path / "calls.json")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "STEP 0"
        time.sleep(random.Random(9).uniform(0.05, 0.5))
    finally:
        os.kill(child.pid, signal.SIGKILL)
        _, stderr = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, stderr
    await restart_and_compare(tmp_path, reference)
