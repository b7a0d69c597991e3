"""Testing kit for ragkit and adapter authors.

Importing this package needs no pytest: the deterministic doubles are here.
The contract classes live in ``ragkit.testing.contracts`` (which needs pytest
and hypothesis) and are loaded lazily on first attribute access, e.g.
``from ragkit.testing import KVStoreContract``.
"""

from __future__ import annotations

from typing import Any

from ragkit.testing.doubles import HashEmbedder, OverlapReranker, ScriptedLLM

__all__ = ["HashEmbedder", "OverlapReranker", "ScriptedLLM"]


def __getattr__(name: str) -> Any:
    if name.endswith("Contract"):
        from ragkit.testing import contracts

        return getattr(contracts, name)
    raise AttributeError(f"module 'ragkit.testing' has no attribute {name!r}")
