"""Test support for ragkit-redis: the server the tests use.

``CONTRACT_OPTIONS`` (the ``ragkit.testing`` entry point) gives ragkit's
contract run and backend matrix the options of both stores: the server at
``RAGKIT_REDIS_URL``, or a skip naming how to start one.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse


def reachable_url(env: str, hint: str) -> str:
    """The URL in ``env`` when something accepts connections there, else ``pytest.skip``."""
    import pytest

    url = os.environ.get(env)
    if not url:
        pytest.skip(f"set {env} ({hint})")
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "localhost", parsed.port or 6379), timeout=2):
            pass
    except OSError as exc:
        pytest.skip(f"{env}={url} does not accept connections: {exc}")
    return url


def redis_options(tmp_path: Path | None = None) -> dict[str, Any]:
    """The server at ``RAGKIT_REDIS_URL``."""
    url = reachable_url(
        "RAGKIT_REDIS_URL",
        "e.g. redis://127.0.0.1:6379/0 after `plugins/ragkit-redis/scripts/redis-server start`",
    )
    return {"url": url}


CONTRACT_OPTIONS = {"kv:redis": redis_options, "doc_status:redis": redis_options}
