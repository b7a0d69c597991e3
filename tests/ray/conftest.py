"""The real local Ray cluster of the Ray executor's tests (``ragkit.testing.ray_cluster``):
a head and a worker node started with ``ray start``, for the whole session. Ray
is in the test extra: a missing Ray fails these tests, it never skips them.
Also the corpus and the in-process run every Ray run must equal (``ray_runs``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ray_runs import PASSAGES, index_cmd, run, snapshot, write_corpus, write_settings

from ragkit.testing.ray_cluster import local_cluster


@pytest.fixture(scope="session")
def ray_cluster():
    with local_cluster(nodes=2) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "passages")


@pytest.fixture(scope="session")
def reference(tmp_path_factory, corpus) -> dict:
    """The in-process run every Ray run must equal."""
    root = tmp_path_factory.mktemp("local")
    config = write_settings(root / "ragkit.toml", root / "data", root / "calls.log", latency=0)
    report = run(index_cmd(config, corpus))
    assert report["processed"] == PASSAGES and report["failed"] == {}
    snap = snapshot(root / "data")
    assert snap["check_problems"] == [] and len(snap["nodes"]) > 300
    return snap
