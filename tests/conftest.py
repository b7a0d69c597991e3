"""Shared pytest options and hooks for the whole test tree.

Keep each feature's part in its own clearly marked block.
"""

from __future__ import annotations

import os

# --- test doubles: the scripted and replay LLMs and the overlap reranker register in
# test runs only (ragkit.plugins.registry.test_doubles_wanted). Set before any test
# module builds the registry, collection included; child processes inherit it.
os.environ["RAGKIT_TEST_DOUBLES"] = "1"


# --- contract suite: adapter selection for tests/contract --------------------
# Only the option lives here, because pytest reads options only from conftests
# loaded at startup; everything else is in tests/contract/conftest.py.
def pytest_addoption(parser):
    group = parser.getgroup("ragkit-contract", "ragkit contract suite (tests/contract)")
    group.addoption(
        "--ragkit-adapters",
        action="store",
        default=None,
        metavar="KIND:NAME,...",
        help=(
            "run the contract suite only against these registered adapters, e.g. "
            "'kv:sqlite,vector:numpy' ('kv' alone selects every kv adapter). "
            "Default: env RAGKIT_CONTRACT_ADAPTERS, else every installed adapter."
        ),
    )


# --- end contract suite -------------------------------------------------------------------
