"""Test support for ragkit-redis: the server the tests use.

``CONTRACT_OPTIONS`` (the ``ragkit.testing`` entry point) gives ragkit's
contract run and backend matrix the options of both stores: the server at
``RAGKIT_REDIS_URL``, or a skip naming how to start one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragkit.testing.contracts.options import reachable_url


def redis_options(tmp_path: Path | None = None) -> dict[str, Any]:
    """The server at ``RAGKIT_REDIS_URL``."""
    url = reachable_url(
        "RAGKIT_REDIS_URL",
        "e.g. redis://127.0.0.1:6379/0 after `plugins/ragkit-redis/scripts/redis-server start`",
        6379,
    )
    return {"url": url}


CONTRACT_OPTIONS = {"kv:redis": redis_options, "doc_status:redis": redis_options}
