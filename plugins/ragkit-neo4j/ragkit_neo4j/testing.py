"""Test support for ragkit-neo4j: the Bolt server the tests use.

``CONTRACT_OPTIONS`` (the ``ragkit.testing`` entry point) gives ragkit's
contract run and backend matrix the options of ``neo4j``: the server at
``RAGKIT_NEO4J_URI`` (``RAGKIT_NEO4J_USER``/``RAGKIT_NEO4J_PASSWORD`` if it
needs auth), or a skip naming how to start one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ragkit.testing.contracts.options import reachable_url


def neo4j_options(tmp_path: Path | None = None) -> dict[str, Any]:
    """The server at ``RAGKIT_NEO4J_URI``, or ``pytest.skip`` when it does not answer."""
    uri = reachable_url(
        "RAGKIT_NEO4J_URI",
        "e.g. bolt://127.0.0.1:7687 after `plugins/ragkit-neo4j/scripts/bolt-server start`",
        7687,
    )
    # A statement the server never answers fails the test instead of hanging the run.
    options: dict[str, Any] = {"uri": uri, "query_timeout": 120.0}
    if os.environ.get("RAGKIT_NEO4J_USER"):
        options["user"] = os.environ["RAGKIT_NEO4J_USER"]
        options["password"] = os.environ.get("RAGKIT_NEO4J_PASSWORD", "")
    return options


CONTRACT_OPTIONS = {"graph:neo4j": neo4j_options}
