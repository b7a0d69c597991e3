"""Deliberately broken adapters: the contract suite's own test subjects.

Each class subclasses one of the embedded stores and adds exactly ONE defect,
named by its docstring and its ``defect`` class attribute, in the hooks an
adapter implements (the public methods that check and validate are the
protocol's own). ``tests/testing/
test_suite_catches_broken.py`` runs the matching contract against each of them
and asserts that the suite fails, and fails in the test aimed at that defect;
a contract that passes against one of these does not check what the protocol
docstring promises.

They are *not* registered as plugins (no hook names them) and never should be.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
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

    async def _get_many(self, keys: list[str]) -> dict[str, str]:
        # The hook answers by key, so the defect pairs each key with the record of
        # its mirror position in the asked list.
        found = await super()._get_many(keys)
        return {k: found[m] for k, m in zip(keys, reversed(keys)) if m in found}


class MergingUpsertKVStore(SQLiteKVStore):
    """``upsert`` merges the new record into the stored one (``old | new``)
    instead of replacing it, so fields absent from the new record survive."""

    name: ClassVar[str] = "broken-merging-upsert"
    defect: ClassVar[str] = "upsert merges into the existing record instead of replacing it"

    async def _upsert(self, records: dict[str, str]) -> None:
        old = await super()._get_many(list(records))
        await super()._upsert(
            {k: json.dumps({**json.loads(old[k]), **json.loads(v)}) if k in old else v for k, v in records.items()}
        )


class StrictDeleteKVStore(SQLiteKVStore):
    """``delete`` raises ``MissingIdError`` (a ``KeyError``) when a key is not
    stored, where the protocol says missing keys are ignored."""

    name: ClassVar[str] = "broken-strict-delete"
    defect: ClassVar[str] = "delete raises on a key that is not stored"

    async def _delete(self, keys: list[str]) -> None:
        absent = set(keys) - set(await super()._get_many(keys))
        if absent:
            raise MissingIdError(f"cannot delete missing key(s): {sorted(absent)}")
        await super()._delete(keys)


# -- vector --------------------------------------------------------------------


class StrictDeleteVectorStore(NumpyVectorStore):
    """``delete`` raises ``MissingIdError`` (a ``KeyError``) for an id that is
    not stored, where the protocol says missing ids are ignored."""

    name: ClassVar[str] = "broken-strict-delete"
    defect: ClassVar[str] = "delete raises on an id that is not stored"

    async def _delete(self, ids: list[str]) -> None:
        absent = set(ids) - set(await super()._get(ids))
        if absent:
            raise MissingIdError(f"cannot delete missing id(s): {sorted(absent)}")
        await super()._delete(ids)


class IgnoresFilterVectorStore(NumpyVectorStore):
    """``query`` ignores ``filter=`` (and returns unfiltered neighbours) while
    still declaring ``Capability.METADATA_FILTER``."""

    name: ClassVar[str] = "broken-ignores-filter"
    defect: ClassVar[str] = "query ignores the metadata filter"

    async def _query(
        self, unit: np.ndarray, top_k: int, filter: Filter | None, min_score: float | None
    ) -> list[VectorHit]:
        return await super()._query(unit, top_k, None, min_score)


# -- graph ---------------------------------------------------------------------


class StrictDeleteGraphStore(NetworkXGraphStore):
    """``delete_nodes`` / ``delete_edges`` raise ``MissingIdError`` (a
    ``KeyError``) for a node or edge that does not exist, where the protocol
    says deleting missing things is not an error."""

    name: ClassVar[str] = "broken-strict-delete"
    defect: ClassVar[str] = "delete_nodes/delete_edges raise on a missing node or edge"

    async def _delete_nodes(self, ids: list[str]) -> None:
        found = await super()._get_nodes(ids)
        absent = [n for n in ids if n not in found]
        if absent:
            raise MissingIdError(f"cannot delete missing node(s): {absent!r}")
        await super()._delete_nodes(ids)

    async def _delete_edges(self, keys: list[EdgeKey]) -> None:
        found = await super()._get_edges(keys)
        absent = [k for k in keys if k not in found]
        if absent:
            raise MissingIdError(f"cannot delete missing edge(s): {absent!r}")
        await super()._delete_edges(keys)


class DuplicateEdgesGraphStore(NetworkXGraphStore):
    """``edges()`` yields every edge twice, once as (a, b) and once as (b, a),
    where the protocol says each edge once, in canonical order."""

    name: ClassVar[str] = "broken-duplicate-edges"
    defect: ClassVar[str] = "edges() yields each edge twice, as (a, b) and as (b, a)"

    async def _edges(self) -> AsyncIterator[Edge]:
        async for edge in super()._edges():
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

    async def _delete_nodes(self, ids: list[str]) -> None:
        touched = {m for neighbours in (await super()._nodes_edges(ids)).values() for m in neighbours}
        await super()._delete_nodes(ids)
        self._stale |= touched - set(ids)
        self._stale -= set(ids)

    async def _delete_edges(self, keys: list[EdgeKey]) -> None:
        found = await super()._get_edges(keys)
        await super()._delete_edges(keys)
        self._stale |= {n for key in found for n in key}

    async def _degrees(self, ids: list[str]) -> dict[str, int]:
        true = await super()._degrees(ids)
        return {n: d + 1 if n in self._stale else d for n, d in true.items()}

    async def _drop(self) -> None:
        await super()._drop()
        self._stale.clear()


class MissingNodeEmptyEdgesGraphStore(NetworkXGraphStore):
    """``nodes_edges`` gives ``[]`` for a node that does not exist, where the
    protocol says ``None`` (``[]`` means an existing node without edges)."""

    name: ClassVar[str] = "broken-missing-node-edges"
    defect: ClassVar[str] = "nodes_edges returns [] instead of None for a missing node"

    async def _nodes_edges(self, ids: list[str]) -> dict[str, Any]:
        found = await super()._nodes_edges(ids)
        return {n: found.get(n, ()) for n in ids}


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
