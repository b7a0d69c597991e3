"""Deliberately broken adapters: the contract suite's own test subjects.

Each class subclasses one of the embedded stores and adds exactly ONE defect,
named by its docstring and its ``defect`` class attribute. ``tests/testing/
test_suite_catches_broken.py`` runs the matching contract against each of them
and asserts that the suite fails, and fails in the test aimed at that defect;
a contract that passes against one of these does not check what the protocol
docstring promises.

They are *not* registered as plugins (no hook names them) and never should be.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ragkit.protocols.graph import EdgeKey
from ragkit.protocols.vector import Filter
from ragkit.schema import Edge, VectorHit
from ragkit.storage.networkx_graph import NetworkXGraphStore
from ragkit.storage.numpy_vectors import NumpyVectorStore
from ragkit.storage.sqlite_kv import SQLiteKVStore


class MissingIdError(KeyError):
    """What the strict-delete adapters raise: deleting a missing id should be a no-op."""


# -- KV ------------------------------------------------------------------------


class ReversedBatchKVStore(SQLiteKVStore):
    """``get_many`` returns its results in reverse order of the asked keys
    (a batch read that loses the caller's order, e.g. an unordered ``IN`` query)."""

    name: ClassVar[str] = "broken-reversed-batch"
    defect: ClassVar[str] = "get_many returns records in reverse order of the asked keys"

    async def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        return list(reversed(await super().get_many(keys)))


class MergingUpsertKVStore(SQLiteKVStore):
    """``upsert`` merges the new record into the stored one (``old | new``)
    instead of replacing it, so fields absent from the new record survive."""

    name: ClassVar[str] = "broken-merging-upsert"
    defect: ClassVar[str] = "upsert merges into the existing record instead of replacing it"

    async def upsert(self, records: Mapping[str, Mapping[str, Any]]) -> None:
        if isinstance(records, Mapping) and records:
            keys = [k for k in records if isinstance(k, str)]
            old = dict(zip(keys, await super().get_many(keys)))
            merged: dict[Any, Any] = {}
            for key, value in records.items():
                prev = old.get(key) if isinstance(key, str) else None
                merged[key] = {**prev, **value} if prev and isinstance(value, Mapping) else value
            records = merged
        await super().upsert(records)


class StrictDeleteKVStore(SQLiteKVStore):
    """``delete`` raises ``MissingIdError`` (a ``KeyError``) when a key is not
    stored, where the protocol says missing keys are ignored."""

    name: ClassVar[str] = "broken-strict-delete"
    defect: ClassVar[str] = "delete raises on a key that is not stored"

    async def delete(self, keys: Iterable[str]) -> None:
        keys = [keys] if isinstance(keys, str) else list(keys)
        absent = await self.missing([k for k in keys if isinstance(k, str)])
        if absent:
            raise MissingIdError(f"cannot delete missing key(s): {sorted(absent)}")
        await super().delete(keys)


# -- vector --------------------------------------------------------------------


class StrictDeleteVectorStore(NumpyVectorStore):
    """``delete`` raises ``MissingIdError`` (a ``KeyError``) for an id that is
    not stored, where the protocol says missing ids are ignored."""

    name: ClassVar[str] = "broken-strict-delete"
    defect: ClassVar[str] = "delete raises on an id that is not stored"

    async def delete(self, ids: Iterable[str]) -> None:
        ids = [ids] if isinstance(ids, str) else list(ids)
        found = await self.get([i for i in ids if isinstance(i, str)])
        absent = [i for i, rec in zip([i for i in ids if isinstance(i, str)], found) if rec is None]
        if absent:
            raise MissingIdError(f"cannot delete missing id(s): {sorted(set(absent))}")
        await super().delete(ids)


class IgnoresFilterVectorStore(NumpyVectorStore):
    """``query`` ignores ``filter=`` (and returns unfiltered neighbours) while
    still declaring ``Capability.METADATA_FILTER``."""

    name: ClassVar[str] = "broken-ignores-filter"
    defect: ClassVar[str] = "query ignores the metadata filter"

    async def query(
        self,
        vector: np.ndarray | Sequence[float],
        top_k: int,
        *,
        filter: Filter | None = None,
        min_score: float | None = None,
    ) -> list[VectorHit]:
        return await super().query(vector, top_k, filter=None, min_score=min_score)


# -- graph ---------------------------------------------------------------------


class StrictDeleteGraphStore(NetworkXGraphStore):
    """``delete_nodes`` / ``delete_edges`` raise ``MissingIdError`` (a
    ``KeyError``) for a node or edge that does not exist, where the protocol
    says deleting missing things is not an error."""

    name: ClassVar[str] = "broken-strict-delete"
    defect: ClassVar[str] = "delete_nodes/delete_edges raise on a missing node or edge"

    async def delete_nodes(self, ids: Iterable[str]) -> None:
        ids = [ids] if isinstance(ids, str) else list(ids)
        found = await self.get_nodes(ids)
        absent = [i for i, props in zip(ids, found) if props is None]
        if absent:
            raise MissingIdError(f"cannot delete missing node(s): {absent!r}")
        await super().delete_nodes(ids)

    async def delete_edges(self, pairs: Iterable[EdgeKey]) -> None:
        pairs = list(pairs)
        found = await self.get_edges(pairs)  # also validates the pairs
        absent = [p for p, props in zip(pairs, found) if props is None]
        if absent:
            raise MissingIdError(f"cannot delete missing edge(s): {absent!r}")
        await super().delete_edges(pairs)


class DuplicateEdgesGraphStore(NetworkXGraphStore):
    """``edges()`` yields every edge twice, once as (a, b) and once as (b, a),
    where the protocol says each edge once, in canonical order."""

    name: ClassVar[str] = "broken-duplicate-edges"
    defect: ClassVar[str] = "edges() yields each edge twice, as (a, b) and as (b, a)"

    def edges(self) -> AsyncIterator[Edge]:
        return self._doubled(super().edges())

    @staticmethod
    async def _doubled(inner: AsyncIterator[Edge]) -> AsyncIterator[Edge]:
        async for edge in inner:
            yield edge
            yield Edge.model_construct(
                source=edge.target, target=edge.source, properties=dict(edge.properties)
            )


class StaleDegreeGraphStore(NetworkXGraphStore):
    """``degrees`` is one too high for every node that lost an edge to a delete
    (``delete_edges`` or deleting a neighbour): a degree cache that deletes
    forget to decrement. Correct until the first delete."""

    name: ClassVar[str] = "broken-stale-degree"
    defect: ClassVar[str] = "degree is off by one (too high) after a delete"

    def __init__(self, config) -> None:
        super().__init__(config)
        self._stale: set[str] = set()

    async def delete_nodes(self, ids: Iterable[str]) -> None:
        ids = [ids] if isinstance(ids, str) else list(ids)
        touched = {
            other
            for edges in await self.nodes_edges(ids)
            for edge in edges or []
            for other in edge
        }
        await super().delete_nodes(ids)
        self._stale |= touched - set(ids)
        self._stale -= set(ids)

    async def delete_edges(self, pairs: Iterable[EdgeKey]) -> None:
        pairs = list(pairs)
        found = await self.get_edges(pairs)
        await super().delete_edges(pairs)
        self._stale |= {n for pair, props in zip(pairs, found) if props is not None for n in pair}

    async def degrees(self, ids: Sequence[str]) -> list[int]:
        true = await super().degrees(ids)
        return [d + 1 if isinstance(n, str) and n in self._stale else d for n, d in zip(ids, true)]

    async def drop(self) -> None:
        await super().drop()
        self._stale.clear()


class MissingNodeEmptyEdgesGraphStore(NetworkXGraphStore):
    """``nodes_edges`` gives ``[]`` for a node that does not exist, where the
    protocol says ``None`` (``[]`` means an existing node without edges)."""

    name: ClassVar[str] = "broken-missing-node-edges"
    defect: ClassVar[str] = "nodes_edges returns [] instead of None for a missing node"

    async def nodes_edges(self, ids: Sequence[str]) -> list[list[EdgeKey] | None]:
        return [[] if e is None else e for e in await super().nodes_edges(ids)]


BROKEN_ADAPTERS: dict[str, tuple[type, ...]] = {
    "kv": (ReversedBatchKVStore, MergingUpsertKVStore, StrictDeleteKVStore),
    "vector": (StrictDeleteVectorStore, IgnoresFilterVectorStore),
    "graph": (
        StrictDeleteGraphStore,
        DuplicateEdgesGraphStore,
        StaleDegreeGraphStore,
        MissingNodeEmptyEdgesGraphStore,
    ),
}
"""Every broken adapter by store kind."""

__all__ = [
    "BROKEN_ADAPTERS",
    "DuplicateEdgesGraphStore",
    "IgnoresFilterVectorStore",
    "MergingUpsertKVStore",
    "MissingIdError",
    "MissingNodeEmptyEdgesGraphStore",
    "ReversedBatchKVStore",
    "StaleDegreeGraphStore",
    "StrictDeleteGraphStore",
    "StrictDeleteKVStore",
    "StrictDeleteVectorStore",
]
