"""Reading the graph: search entities by name, one entity or relation with its
sources, a bounded neighbourhood. What the HTTP server's graph routes and the
Python API (``RAG.aentity``...) serve.

Made for a principal, every read goes through the scope of the documents it may
read (``ScopedGraph``): an entity or relation none of whose sources it may read
is answered exactly like one that does not exist, properties are recomputed
from the readable sources, degrees count readable edges only and sources list
readable documents only.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

from ragkit.access import Principal
from ragkit.core.keys import Pair, entity_key, relation_key
from ragkit.core.scope import Restrictor, Scope, ScopedGraph, resolve_scope
from ragkit.core.stores import Stores
from ragkit.errors import InvalidValueError
from ragkit.protocols.graph import neighbourhood
from ragkit.schema import Subgraph

MAX_DEPTH = 10
MAX_NODES = 10_000
MAX_EDGES = 100_000
MAX_SEARCH = 1000
_SEARCH_BATCH = 256


class SourceRef(BaseModel):
    """A document an entity or relation comes from, and which of its chunks."""

    doc_id: str
    file_path: str | None = None
    chunk_ids: list[str] = Field(default_factory=list)


class EntityInfo(BaseModel):
    key: str
    """The graph node id (the normalised name)."""
    properties: dict[str, Any]
    degree: int
    sources: list[SourceRef]


class RelationInfo(BaseModel):
    source: str
    target: str
    """Node ids, in canonical order (relations are undirected)."""
    properties: dict[str, Any]
    sources: list[SourceRef]


class GraphReads(Protocol):
    """What reads need of a graph: a ``GraphStore`` or a ``ScopedGraph``."""

    async def get_nodes(self, keys: list[str]) -> list[dict | None]: ...
    async def get_edges(self, pairs: list[Pair]) -> list[dict | None]: ...
    async def nodes_edges(self, keys: list[str]) -> list[list[Pair] | None]: ...
    async def degrees(self, keys: list[str]) -> list[int]: ...


class GraphReader:
    def __init__(self, stores: Stores, principal: Principal | None = None) -> None:
        self.stores = stores
        self.principal = principal
        self._resolved = False
        self.scope: Scope | None = None
        self._graph: GraphReads = stores.graph

    async def graph(self) -> GraphReads:
        if not self._resolved:
            self.scope = await resolve_scope(self.stores, None, None, self.principal)
            if self.scope is not None:
                self._graph = ScopedGraph(self.stores.graph, Restrictor(self.stores, self.scope))
            self._resolved = True
        return self._graph

    async def search_entities(self, text: str, limit: int = 20) -> list[str]:
        """Node ids containing ``text`` case-insensitively, best match first
        (exact, then prefix, then shorter): the order the graph store gives."""
        if not isinstance(text, str):
            raise InvalidValueError(f"search text must be a string, got {type(text).__name__}")
        _bounded("limit", limit, 1, MAX_SEARCH)
        graph = await self.graph()
        if self.scope is None:
            return await self.stores.graph.search_labels(text, limit)
        labels = await self.stores.graph.search_labels(text, await self.stores.graph.node_count() + 1)
        found: list[str] = []
        for start in range(0, len(labels), _SEARCH_BATCH):
            batch = labels[start:start + _SEARCH_BATCH]
            found += [k for k, p in zip(batch, await graph.get_nodes(batch)) if p is not None]
            if len(found) >= limit:
                break
        return found[:limit]

    async def entity(self, name: str) -> EntityInfo | None:
        key = entity_key(_name(name, "entity name"))
        graph = await self.graph()
        (props,) = await graph.get_nodes([key])
        if props is None:
            return None
        (degree,) = await graph.degrees([key])
        return EntityInfo(key=key, properties=dict(props), degree=degree, sources=await self._sources(props))

    async def relation(self, source: str, target: str) -> RelationInfo | None:
        pair = relation_key(_name(source, "relation source"), _name(target, "relation target"))
        (props,) = await (await self.graph()).get_edges([pair])
        if props is None:
            return None
        return RelationInfo(source=pair[0], target=pair[1], properties=dict(props),
                            sources=await self._sources(props))

    async def subgraph(self, name: str, depth: int = 1, max_nodes: int = 100, max_edges: int = 200) -> Subgraph:
        """Breadth first from ``name``: nodes level by level, within a level by
        degree (descending) then id, at most ``max_nodes``; the edges among
        them by key, at most ``max_edges``. ``truncated`` when either cut."""
        _bounded("depth", depth, 0, MAX_DEPTH)
        _bounded("max_nodes", max_nodes, 1, MAX_NODES)
        _bounded("max_edges", max_edges, 0, MAX_EDGES)
        return await neighbourhood(await self.graph(), entity_key(_name(name, "entity name")),
                                   depth, max_nodes, max_edges)

    async def _sources(self, props: dict) -> list[SourceRef]:
        chunk_ids = sorted(set(props.get("source_ids", [])))
        if self.scope is not None:
            owners = [self.scope.owner(c) for c in chunk_ids]
        else:
            records = await self.stores.chunks.get_many(chunk_ids)
            owners = [(r["doc_id"], r.get("file_path")) if r else None for r in records]
        refs: dict[str, SourceRef] = {}
        for cid, owner in zip(chunk_ids, owners):
            if owner is not None:
                ref = refs.setdefault(owner[0], SourceRef(doc_id=owner[0], file_path=owner[1]))
                ref.chunk_ids.append(cid)
        return [refs[d] for d in sorted(refs)]


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidValueError(f"the {what} is empty or not a string; give an entity's name")
    return value


def _bounded(what: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidValueError(f"{what} must be an integer from {low} to {high}, got {value!r}")
