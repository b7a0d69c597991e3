"""Test support for ragkit-qdrant: where the tests run Qdrant.

``CONTRACT_OPTIONS`` (the ``ragkit.testing`` entry point) gives ragkit's
contract run and backend matrix the options of ``qdrant``: local mode under
the test's ``tmp_path``, or the server at ``RAGKIT_QDRANT_URL`` when it is set
(a skip when that server does not answer).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def qdrant_options(tmp_path: Path) -> dict[str, Any]:
    """Local mode under ``tmp_path``, or the server at ``RAGKIT_QDRANT_URL``."""
    url = os.environ.get("RAGKIT_QDRANT_URL")
    if not url:
        return {"path": str(tmp_path / "qdrant")}
    import pytest
    from qdrant_client import QdrantClient

    client = QdrantClient(url=url, timeout=3, check_compatibility=False)
    try:
        client.get_collections()
    except Exception as exc:
        pytest.skip(f"no Qdrant server answers at {url} (RAGKIT_QDRANT_URL): {exc}")
    finally:
        client.close()
    return {"url": url}


CONTRACT_OPTIONS = {"vector:qdrant": qdrant_options}
