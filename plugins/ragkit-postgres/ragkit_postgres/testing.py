"""Test support for ragkit-postgres: the server the tests use.

``CONTRACT_OPTIONS`` (the ``ragkit.testing`` entry point) gives ragkit's
contract run and backend matrix the options of every store: the server at
``RAGKIT_POSTGRES_URL``, or a skip naming how to start one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragkit.testing.contracts.options import reachable_url


def postgres_options(tmp_path: Path | None = None) -> dict[str, Any]:
    """The server at ``RAGKIT_POSTGRES_URL`` (a loopback port; pgvector installed)."""
    url = reachable_url(
        "RAGKIT_POSTGRES_URL",
        "e.g. postgresql://postgres@127.0.0.1:5432/postgres after "
        "`RAGKIT_POSTGRES_PORT=5432 plugins/ragkit-postgres/scripts/postgres-server start`",
        5432,
    )
    return {"dsn": url}


CONTRACT_OPTIONS = {
    "kv:postgres": postgres_options,
    "doc_status:postgres": postgres_options,
    "vector:postgres": postgres_options,
    "graph:postgres": postgres_options,
}
