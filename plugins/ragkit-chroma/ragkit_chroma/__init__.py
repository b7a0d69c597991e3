"""ragkit vector store on Chroma: ``chroma`` (embedded, or a server with
``mode = "http"``) and ``chroma-http`` (a server by default).

Names are imported on first use, so that ragkit's plugin scan stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ChromaHttpVectorStore", "ChromaOptions", "ChromaVectorStore", "collection_name", "to_where"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "to_where":
        from ragkit_chroma._where import to_where

        return to_where
    if name in ("ChromaHttpVectorStore", "ChromaOptions", "ChromaVectorStore", "collection_name"):
        from ragkit_chroma import store

        return getattr(store, name)
    raise AttributeError(f"module 'ragkit_chroma' has no attribute {name!r}")
