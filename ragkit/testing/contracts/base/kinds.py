"""What a write, a read and a state are for each store kind, in the terms of
its protocol: the rules every store follows whatever its kind (``base.fencing``,
``base.lifecycle``) are written once over this table. Module data, so no
adapter can change it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragkit.schema import DocStatus
from ragkit.testing.contracts.base.contract import collect

Op = Callable[[Any], Awaitable[Any]]


def _rows(store: Any, n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, store.dimension)).astype(np.float32)


def _status(id: str) -> Any:
    from ragkit.testing.contracts.doc_status.records import record

    return record(id, DocStatus.PENDING)


@dataclass(frozen=True)
class Kind:
    """One store kind's writes and reads, in the terms of its protocol."""

    put: Callable[[Any, str], Awaitable[Any]]
    """Write one record named by the key (a node for graphs)."""
    state: Callable[[Any, list[str]], Awaitable[Any]]
    """What the store holds under these keys, comparable with ``==``."""
    writes: dict[str, Op]
    """Every kind of write, on records that ``put`` of ``"a"`` and ``"b"`` made."""
    reads: dict[str, Op]
    """Every kind of read, listings included; none of them writes."""
    size: Callable[[Any], Awaitable[int]]
    """How many records (nodes for graphs) the store holds."""


async def _vector_state(s: Any, keys: list[str]) -> list[Any]:
    return [r.metadata if r else None for r in await s.get(keys)]


async def _doc_state(s: Any, keys: list[str]) -> list[Any]:
    return [r.status if r else None for r in await s.get(keys)]


KINDS: dict[str, Kind] = {
    "kv": Kind(
        put=lambda s, k: s.upsert({k: {"v": k}}),
        state=lambda s, keys: s.get_many(keys),
        writes={
            "upsert": lambda s: s.upsert({"a": {"v": 2}, "n": {"v": 3}}),
            "delete": lambda s: s.delete(["b"]),
            "flush": lambda s: s.flush(),
            "drop": lambda s: s.drop(),
        },
        reads={"get_many": lambda s: s.get_many(["a"]), "count": lambda s: s.count(),
               "keys": lambda s: collect(s.keys())},
        size=lambda s: s.count(),
    ),
    "vector": Kind(
        put=lambda s, k: s.upsert([k], _rows(s, 1, ord(k[0])), [{"v": k}]),
        state=_vector_state,
        writes={
            "upsert": lambda s: s.upsert(["a", "n"], _rows(s, 2, 7), [{"v": "x"}, {"v": "y"}]),
            "delete": lambda s: s.delete(["b"]),
            "flush": lambda s: s.flush(),
            "drop": lambda s: s.drop(),
        },
        reads={"get": lambda s: s.get(["a"]), "query": lambda s: s.query(_rows(s, 1, 1)[0], 2),
               "count": lambda s: s.count(), "ids": lambda s: collect(s.ids())},
        size=lambda s: s.count(),
    ),
    "graph": Kind(
        put=lambda s, k: s.upsert_nodes({k: {"v": k}}),
        state=lambda s, keys: s.get_nodes(keys),
        writes={
            "upsert_nodes": lambda s: s.upsert_nodes({"a": {"v": "x"}, "n": {}}),
            "upsert_edges": lambda s: s.upsert_edges([("a", "b", {"w": 1})]),
            "delete_nodes": lambda s: s.delete_nodes(["b"]),
            "delete_edges": lambda s: s.delete_edges([("a", "b")]),
            "flush": lambda s: s.flush(),
            "drop": lambda s: s.drop(),
        },
        reads={"get_nodes": lambda s: s.get_nodes(["a"]), "node_count": lambda s: s.node_count(),
               "edge_count": lambda s: s.edge_count(), "edges": lambda s: collect(s.edges())},
        size=lambda s: s.node_count(),
    ),
    "doc_status": Kind(
        put=lambda s, k: s.upsert([_status(k)]),
        state=_doc_state,
        writes={
            "upsert": lambda s: s.upsert([_status("n")]),
            "transition": lambda s: s.transition("a", DocStatus.PROCESSING),
            "delete": lambda s: s.delete(["b"]),
            "flush": lambda s: s.flush(),
            "drop": lambda s: s.drop(),
        },
        reads={"get": lambda s: s.get(["a"]), "counts": lambda s: s.counts(),
               "list_page": lambda s: s.list_page()},
        size=lambda s: s.count(),
    ),
}
