"""Test support for ragkit-chroma: where the tests find a Chroma server.

``CONTRACT_OPTIONS`` (the ``ragkit.testing`` entry point) gives ragkit's
contract run and backend matrix the options of each adapter: ``chroma`` runs
embedded under the test's ``working_dir`` and needs none; ``chroma-http``
uses the server at ``RAGKIT_CHROMA_URL`` (default http://127.0.0.1:8000) and
skips, naming how to start one, when nothing answers there.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

DEFAULT_URL = "http://127.0.0.1:8000"


def options_from_url(url: str) -> dict[str, Any]:
    """``http(s)://host:port`` as ``host``/``port``/``ssl`` options."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s)://host:port URL")
    ssl = parts.scheme == "https"
    return {"host": parts.hostname, "port": parts.port or (443 if ssl else 8000), "ssl": ssl}


def server_answers(url: str, timeout: float = 3.0) -> bool:
    """Whether a Chroma server answers ``GET <url>/api/v2/heartbeat``."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/v2/heartbeat", timeout=timeout) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError, ValueError):
        return False


def http_options(tmp_path: Path | None = None) -> dict[str, Any]:
    """The server at ``RAGKIT_CHROMA_URL``, or ``pytest.skip`` when none answers."""
    url = os.environ.get("RAGKIT_CHROMA_URL", DEFAULT_URL)
    if not server_answers(url):
        import pytest

        pytest.skip(
            f"no Chroma server answers at {url}: start one with "
            "`python plugins/ragkit-chroma/scripts/chroma-server start` or set RAGKIT_CHROMA_URL"
        )
    return options_from_url(url)


CONTRACT_OPTIONS = {"vector:chroma-http": http_options}
