"""Deliberately broken graph stores, the graph contract's test subjects: each adds
exactly one defect, named by its ``defect``, to the reference adapter (how
the self-test runs ``DEFECTS`` and ``RULE_BREAKERS``: ``base.broken``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

from ragkit.protocols.base import bypass_template
from ragkit.protocols.graph import EdgeKey, GraphContext, check_node_id, check_properties, edge_key
from ragkit.schema import Edge
from ragkit.storage.networkx_graph import NetworkXGraphStore
from ragkit.testing.contracts.base.broken import MissingIdError


# -- defects: the whole contract fails ----------------------------------------


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


# -- rule breakers: a test naming the rule fails ------------------------------


class ReturnedEdgesDegreeGraphStore(NetworkXGraphStore):
    """Answers ``context`` in one pass as a hand-written query would, counting
    each node's degree over the edges it returns, not over all its edges."""

    violates: ClassVar[str] = "graph.context.same-as-reads"
    defect: ClassVar[str] = "context counts degrees over the edges it read only"

    async def _context(self, ids: list[str], keys: list[EdgeKey], incident: bool) -> GraphContext:
        found = await super()._context(ids, keys, incident)
        found.degrees = {n: sum(1 for k in found.edges if n in k) for n in found.degrees}
        return found


class FirstWinsEdgesGraphStore(NetworkXGraphStore):
    """Replaces ``upsert_edges`` and keeps the *first* of an edge repeated in
    one batch (an ``INSERT ... ON CONFLICT DO NOTHING`` of the whole batch)."""

    violates: ClassVar[str] = "graph.upsert-edges.last-wins"
    defect: ClassVar[str] = "the first occurrence of an edge in one batch wins"

    @bypass_template("the defect: the first duplicate wins")
    async def upsert_edges(self, edges):  # type: ignore[override]
        self._check_open()
        checked: dict[EdgeKey, dict[str, Any]] = {}
        for a, b, props in edges:
            a, b = check_node_id(a), check_node_id(b)
            checked.setdefault(edge_key(a, b), check_properties(f"edge ({a!r}, {b!r})", props))
        if checked:
            await self._upsert_edges(checked)


class SavesWhatItDiscardsGraphStore(NetworkXGraphStore):
    """Keeps writes until flush but has no ``_discard``: a writer that lost the
    lock saves them at close, over the next writer's work."""

    violates: ClassVar[str] = "store.discard.unflushed"
    defect: ClassVar[str] = "discard() and a lost lock's close() keep unsaved writes"

    async def _discard(self) -> None:
        pass


DEFECTS: tuple[type, ...] = (StrictDeleteGraphStore, DuplicateEdgesGraphStore, StaleDegreeGraphStore, MissingNodeEmptyEdgesGraphStore)

RULE_BREAKERS: dict[str, tuple[type, ...]] = {
    "GraphStoreContract": (FirstWinsEdgesGraphStore, SavesWhatItDiscardsGraphStore, ReturnedEdgesDegreeGraphStore),
}

REFERENCES: dict[str, type] = {"GraphStoreContract": NetworkXGraphStore}
