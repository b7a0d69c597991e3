"""Registers the test doubles (the ``scripted`` and ``replay`` LLMs, the
``overlap`` reranker) through the same hooks third parties use.

Loaded in test runs only, so ``ragkit plugins`` in production lists no test
double: when ``RAGKIT_TEST_DOUBLES=1`` (the test suite's conftest sets it) or
while pytest runs a test in this process or a parent of it (pytest sets
``PYTEST_CURRENT_TEST``, which child processes inherit even when a test strips
the ``RAGKIT_*`` variables from their environment). See ``test_doubles_wanted``.
"""

import os

from ragkit.plugins.hookspecs import hookimpl
from ragkit.testing.doubles import OverlapReranker, ScriptedLLM
from ragkit.testing.replay import ReplayLLM


@hookimpl
def register_llms(register):
    register(ScriptedLLM)
    register(ReplayLLM)


@hookimpl
def register_rerankers(register):
    register(OverlapReranker)
