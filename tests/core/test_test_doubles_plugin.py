"""The test doubles register in test runs only: ``ragkit plugins`` in
production lists no ``scripted`` or ``replay`` LLM and no ``overlap``
reranker, while the ``hash`` embedder, the default when no embedder is
configured, is always there. If the first test fails, look at
``ragkit.plugins.registry.BUILTIN_PLUGINS`` (the test plugin must not be in it)."""

from __future__ import annotations

import os
import subprocess
import sys

from ragkit.plugins.registry import test_doubles_wanted

DOUBLES = {("llm", "scripted"), ("llm", "replay"), ("reranker", "overlap")}


def _listed(extra_env: dict[str, str]) -> set[tuple[str, str]]:
    """(kind, name) rows of ``ragkit plugins`` run as in production: no
    ``RAGKIT_*`` variable and no pytest variable inherited."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGKIT_", "PYTEST_"))}
    env.update(extra_env)
    out = subprocess.run(
        [sys.executable, "-m", "ragkit", "plugins"], env=env, capture_output=True, text=True, timeout=300, check=True
    ).stdout
    return {tuple(line.split()[:2]) for line in out.splitlines()[2:] if line.strip()}


def test_production_lists_no_test_double_but_the_default_embedder():
    listed = _listed({})
    assert listed & DOUBLES == set()
    assert {("embedder", "hash"), ("llm", "offline")} <= listed


def test_a_test_run_lists_the_test_doubles():
    assert DOUBLES <= _listed({"RAGKIT_TEST_DOUBLES": "1"})


def test_what_counts_as_a_test_run():
    assert not test_doubles_wanted({})
    assert not test_doubles_wanted({"RAGKIT_TEST_DOUBLES": "0"})
    assert test_doubles_wanted({"RAGKIT_TEST_DOUBLES": "1"})
    assert test_doubles_wanted({"PYTEST_CURRENT_TEST": "tests/x.py::test_y (call)"})
    assert test_doubles_wanted()  # this very test
