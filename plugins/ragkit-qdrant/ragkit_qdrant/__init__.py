"""ragkit vector store on Qdrant: ``qdrant`` (a server, or local mode in
memory or in a folder).

Names are imported on first use, so that ragkit's plugin scan stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["QdrantOptions", "QdrantVectorStore", "point_id", "to_filter"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "to_filter":
        from ragkit_qdrant._filter import to_filter

        return to_filter
    if name in ("QdrantOptions", "QdrantVectorStore", "point_id"):
        from ragkit_qdrant import store

        return getattr(store, name)
    raise AttributeError(f"module 'ragkit_qdrant' has no attribute {name!r}")
