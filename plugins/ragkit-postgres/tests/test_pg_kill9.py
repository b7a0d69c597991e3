"""Acceptance: ``kill -9`` of the indexer in the middle of a commit leaves
PostgreSQL as it was before the batch (the batch is one transaction across the
four stores), and the restart gives what an uninterrupted run gives.

Troubleshooting: run the worker by hand, e.g.
``python plugins/ragkit-postgres/tests/pg_kill_worker.py $RAGKIT_POSTGRES_URL w1 /tmp/k --kill graph.upsert_edges/2/after``
and read /tmp/k/killed.json: ``inside`` (the batch's own view) holding more
than ``outside`` shows the kill fell inside the transaction; ``outside``
differing from /tmp/k/before.json means a store wrote outside the batch
transaction (its ``transaction_scope()`` or the ``Stores.atomic()`` around
the commit).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ragkit.backends import build_stores

sys.path.insert(0, str(Path(__file__).parent))
from pg_kill_worker import DIMENSION, REPO, pg_settings  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "pipeline"))
from test_index_kill9 import extraction_keys, without_cache  # noqa: E402
from test_index_kill9 import full_snapshot as snapshot_of  # noqa: E402


WORKER = Path(__file__).with_name("pg_kill_worker.py")
KILL_POINTS = {
    "graph written, vectors not": "graph.upsert_edges/2/after",
    "chunk vectors written, status not": "chunk_vectors.upsert/3/after",
    "status written, transaction not committed": "doc_status.upsert/3/after",
}


def run_worker(dsn: str, workspace: str, out: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, str(WORKER), dsn, workspace, str(out), *args],
                          capture_output=True, text=True, timeout=300, env=env)


async def full_snapshot(dsn: str, workspace: str, out: Path) -> dict:
    """Everything the workspace holds (the embedded kill test's snapshot, of PostgreSQL)."""
    return await snapshot_of(out, pg_settings(dsn, workspace, out))


async def drop(dsn: str, workspace: str, out: Path) -> None:
    stores = build_stores(pg_settings(dsn, workspace, out), DIMENSION)
    await stores.open()
    try:
        for store in stores.all():
            await store.drop()
    finally:
        await stores.close()


@pytest.fixture(scope="module")
def reference(postgres_url, tmp_path_factory) -> dict:
    """One uninterrupted run, once per module."""
    out, workspace = tmp_path_factory.mktemp("uninterrupted"), f"k{uuid.uuid4().hex[:10]}"
    proc = run_worker(postgres_url, workspace, out)
    assert proc.returncode == 0, proc.stderr
    try:
        snap = asyncio.run(full_snapshot(postgres_url, workspace, out))
    finally:
        asyncio.run(drop(postgres_url, workspace, out))
    assert snap["check_problems"] == [] and len(snap["nodes"]) > 50
    assert {s[0] for s in snap["doc_status"].values()} == {"processed"} and len(snap["doc_status"]) == 30
    return snap


@pytest.mark.parametrize("point", list(KILL_POINTS.values()), ids=list(KILL_POINTS))
def test_kill_9_mid_commit_leaves_the_batch_out_and_the_restart_equals_a_clean_run(
    postgres_url, tmp_path, reference, point
):
    """Failure: ``outside`` after the kill is not the state before the batch
    (a store wrote outside the transaction), or the restart differs from the
    uninterrupted run (the diff names the store)."""
    workspace = f"k{uuid.uuid4().hex[:10]}"
    try:
        proc = run_worker(postgres_url, workspace, tmp_path, "--kill", point)
        assert proc.returncode == -signal.SIGKILL, f"the worker was not killed at {point}:\n{proc.stderr}"
        killed = json.loads((tmp_path / "killed.json").read_text())
        before = json.loads((tmp_path / "before.json").read_text())
        # The kill fell inside the batch: its transaction had written chunks others did not see.
        assert set(killed["inside"]["chunks"]) > set(killed["outside"]["chunks"])
        assert killed["outside"] == before
        after_kill = asyncio.run(full_snapshot(postgres_url, workspace, tmp_path))
        view = {k: after_kill[k] for k in ("chunks", "extractions")}
        assert view == {k: before[k] for k in view}, "the killed batch's writes are visible after the kill"
        assert sorted(i for i, s in after_kill["doc_status"].items() if s[0] == "processed") == before["processed"]
        assert set(after_kill["chunk_vectors"]) == set(before["chunk_vectors"])
        assert after_kill["nodes"] == before["nodes"]

        proc = run_worker(postgres_url, workspace, tmp_path, "--resume")
        assert proc.returncode == 0, proc.stderr
        restarted = asyncio.run(full_snapshot(postgres_url, workspace, tmp_path))
        assert extraction_keys(restarted) == extraction_keys(reference)
        assert without_cache(restarted) == without_cache(reference)
    finally:
        asyncio.run(drop(postgres_url, workspace, tmp_path))
