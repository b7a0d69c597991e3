"""Graph store protocol."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from ragkit.errors import InvalidValueError
from ragkit.protocols.base import BaseStore
from ragkit.schema import Edge, Node, Subgraph

EdgeKey = tuple[str, str]


def edge_key(a: str, b: str) -> EdgeKey:
    """Canonical key of the undirected edge between ``a`` and ``b``."""
    return (a, b) if a <= b else (b, a)


class GraphStore(BaseStore, ABC):
    """An undirected property graph whose node ids are entity names.

    Decisions every adapter must follow (the contract suite checks each):

    - **Undirected.** The edge (a, b) *is* (b, a): upserting (b, a) replaces the
      properties of (a, b); ``get_edges([(b, a)])`` finds it; scans report each
      edge once with ``source <= target``.
    - **Self-loops** (a, a) are allowed and count once towards a's degree.
    - **Degree** of a node is the number of distinct edges touching it; a missing
      node has degree 0.
    - **Missing vs isolated.** ``get_nodes`` gives ``None`` for a missing node;
      ``nodes_edges`` gives ``None`` for a missing node and ``[]`` for a node
      without edges.
    - **Upsert replaces** the properties of a node or edge (no merge). Upserting an
      edge creates missing endpoints as nodes with no properties.
    - **Deleting a node deletes its edges.** Deleting missing things is not an error.
    - **Property values** are str, int, float, bool or lists of str/int/float; keys
      are non-empty str. ``None``, dicts and nested lists raise ``InvalidValueError``.
    - Node ids are any non-empty str (quotes, backticks, braces, CJK, emoji).
    - Batch reads return one entry per asked item, in order.

    Adapters implement the abstract batch methods; the single-item forms,
    ``subgraph`` and ``search_labels`` are defined here on top of them so that
    every backend shares one definition (adapters may override for speed; the
    contract checks that results stay identical).
    """

    # -- writes --------------------------------------------------------------

    @abstractmethod
    async def upsert_nodes(self, nodes: Mapping[str, Mapping[str, Any]]) -> None: ...

    @abstractmethod
    async def upsert_edges(
        self, edges: Sequence[tuple[str, str, Mapping[str, Any]]]
    ) -> None:
        """Insert or replace edges given as (a, b, properties)."""

    @abstractmethod
    async def delete_nodes(self, ids: Iterable[str]) -> None: ...

    @abstractmethod
    async def delete_edges(self, pairs: Iterable[EdgeKey]) -> None: ...

    @abstractmethod
    async def drop(self) -> None: ...

    # -- reads ---------------------------------------------------------------

    @abstractmethod
    async def get_nodes(self, ids: Sequence[str]) -> list[dict[str, Any] | None]: ...

    @abstractmethod
    async def get_edges(self, pairs: Sequence[EdgeKey]) -> list[dict[str, Any] | None]: ...

    @abstractmethod
    async def nodes_edges(self, ids: Sequence[str]) -> list[list[EdgeKey] | None]:
        """For each node: its edges as canonical keys sorted ascending, or ``None``."""

    @abstractmethod
    async def degrees(self, ids: Sequence[str]) -> list[int]: ...

    @abstractmethod
    async def node_count(self) -> int: ...

    @abstractmethod
    async def edge_count(self) -> int: ...

    @abstractmethod
    def nodes(self) -> AsyncIterator[Node]:
        """Every node once, any order."""

    @abstractmethod
    def edges(self) -> AsyncIterator[Edge]:
        """Every edge exactly once, canonical order of endpoints, any order of edges."""

    # -- derived single-item forms --------------------------------------------

    async def upsert_node(self, id: str, properties: Mapping[str, Any]) -> None:
        await self.upsert_nodes({id: properties})

    async def upsert_edge(self, a: str, b: str, properties: Mapping[str, Any]) -> None:
        await self.upsert_edges([(a, b, properties)])

    async def get_node(self, id: str) -> dict[str, Any] | None:
        return (await self.get_nodes([id]))[0]

    async def get_edge(self, a: str, b: str) -> dict[str, Any] | None:
        return (await self.get_edges([(a, b)]))[0]

    async def has_node(self, id: str) -> bool:
        return await self.get_node(id) is not None

    async def has_edge(self, a: str, b: str) -> bool:
        return await self.get_edge(a, b) is not None

    async def node_edges(self, id: str) -> list[EdgeKey] | None:
        return (await self.nodes_edges([id]))[0]

    async def degree(self, id: str) -> int:
        return (await self.degrees([id]))[0]

    async def edge_degrees(self, pairs: Sequence[EdgeKey]) -> list[int]:
        """deg(a) + deg(b) per edge: LightRAG's ranking of relations."""
        names = list(dict.fromkeys(n for pair in pairs for n in pair))
        deg = dict(zip(names, await self.degrees(names)))
        return [deg[a] + deg[b] for a, b in pairs]

    async def delete_node(self, id: str) -> None:
        await self.delete_nodes([id])

    async def delete_edge(self, a: str, b: str) -> None:
        await self.delete_edges([(a, b)])

    # -- derived queries -------------------------------------------------------

    async def labels(self) -> list[str]:
        """Every node id, sorted."""
        return sorted([n.id async for n in self.nodes()])

    async def search_labels(self, query: str, limit: int = 50) -> list[str]:
        """Node ids containing ``query`` case-insensitively: exact matches first,
        then prefixes, then shorter ids, then alphabetical."""
        q = query.casefold()
        found = [label for label in await self.labels() if q in label.casefold()]
        found.sort(
            key=lambda s: (s.casefold() != q, not s.casefold().startswith(q), len(s), s)
        )
        return found[:limit]

    async def subgraph(self, id: str, max_depth: int = 2, max_nodes: int = 1000) -> Subgraph:
        """Breadth-first neighbourhood of ``id``.

        Nodes are taken level by level (depth 0, 1, ...); within a level by
        degree descending, then id. At most ``max_nodes`` nodes are kept;
        ``truncated`` is true when more nodes lay within ``max_depth``. Edges are
        every edge between kept nodes. A missing ``id`` gives an empty subgraph.
        """
        if max_depth < 0 or max_nodes < 1:
            raise InvalidValueError("subgraph needs max_depth >= 0 and max_nodes >= 1")
        if (await self.get_nodes([id]))[0] is None:
            return Subgraph()
        order: list[str] = [id]
        seen = {id}
        frontier = [id]
        truncated = False
        for _ in range(max_depth):
            nxt = sorted(
                {o for es in await self.nodes_edges(frontier) for e in es or [] for o in e}
                - seen
            )
            if not nxt:
                break
            degs = await self.degrees(nxt)
            nxt = [n for _, n in sorted(zip((-d for d in degs), nxt))]
            room = max_nodes - len(order)
            if len(nxt) > room:
                truncated = True
                nxt = nxt[:room]
            order += nxt
            seen.update(nxt)
            frontier = nxt
            if truncated:
                break
        props = await self.get_nodes(order)
        keys = sorted(
            {e for es in await self.nodes_edges(order) for e in es or [] if e[0] in seen and e[1] in seen}
        )
        edge_props = await self.get_edges(keys)
        return Subgraph(
            nodes=[Node(id=n, properties=p or {}) for n, p in zip(order, props)],
            edges=[Edge(source=a, target=b, properties=p or {}) for (a, b), p in zip(keys, edge_props)],
            truncated=truncated,
        )


def check_properties(owner: str, properties: object) -> dict[str, Any]:
    """Validate and copy a property map; shared so every adapter rejects the same values."""
    if not isinstance(properties, Mapping):
        raise InvalidValueError(f"properties of {owner} must be a dict")
    out: dict[str, Any] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not key:
            raise InvalidValueError(f"property keys of {owner} must be non-empty strings")
        if isinstance(value, list):
            if not all(
                isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value
            ):
                raise InvalidValueError(
                    f"property {key!r} of {owner}: lists may hold only str, int or float"
                )
            if any(isinstance(v, float) and not math.isfinite(v) for v in value):
                raise InvalidValueError(f"property {key!r} of {owner} must be finite")
            out[key] = list(value)
        elif isinstance(value, (str, int, float, bool)):
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidValueError(f"property {key!r} of {owner} must be finite")
            out[key] = value
        else:
            raise InvalidValueError(
                f"property {key!r} of {owner} is {type(value).__name__}; allowed: "
                "str, int, float, bool, or a list of str/int/float"
            )
    return out


def check_node_id(id: object) -> str:
    if not isinstance(id, str) or not id:
        raise InvalidValueError(f"node ids must be non-empty strings, got {id!r}")
    return id
