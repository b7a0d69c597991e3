"""The graph as one query reads it: what a stage needs around its nodes and
edges read in one call, and kept for the query's life.

A graph mode's stage reads the nodes or edges a vector search found, then
what surrounds them: their properties, their edges, the degrees of every node
involved. On a graph server each of those reads is a round trip (local mode
made four, global three). ``prefetch`` asks the store for all of it at once
(``GraphStore.context``: one statement on PostgreSQL, concurrent reads on the
Bolt server); the stage's single reads then answer from here, and whatever was
not prefetched is read and kept as before.

Scoped queries wrap this in ``ScopedGraph`` (``core/scope.py``), which decides
what a principal may see from these raw reads: nothing here is shown to a user
without passing through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragkit.protocols.graph import EdgeKey, GraphStore, edge_key


class CachedGraph:
    """The read methods of a ``GraphStore`` (``get_nodes``, ``get_edges``,
    ``nodes_edges``, ``degrees``, ``edge_degrees``) over a per-query cache,
    plus ``prefetch``. Answers are shared, not copied: callers do not change
    the properties they read."""

    def __init__(self, graph: GraphStore) -> None:
        self.graph = graph
        self._nodes: dict[str, dict[str, Any] | None] = {}
        self._edges: dict[EdgeKey, dict[str, Any] | None] = {}
        self._incident: dict[str, list[EdgeKey] | None] = {}
        self._degrees: dict[str, int] = {}

    async def prefetch(self, ids: Sequence[str] = (), pairs: Sequence[EdgeKey] = (), incident: bool = False) -> None:
        """Read ``ids`` and ``pairs`` with what surrounds them in one call (with
        ``incident``, every edge of ``ids`` too); what is known already is not
        asked again."""
        ids = [k for k in dict.fromkeys(ids) if not self._known(k) or (incident and k not in self._incident)]
        # An edge another stage read (a neighbour's) is asked again when its
        # ends are not known: its stage reads them next.
        keys = [k for k in dict.fromkeys(edge_key(*p) for p in pairs)
                if k not in self._edges or not (self._known(k[0]) and self._known(k[1]))]
        if not ids and not keys:
            return
        found = await self.graph.context(ids, keys, incident)
        for n in [*ids, *(n for k in keys for n in k)]:
            self._nodes[n] = found.nodes.get(n)
        for k in keys:
            self._edges[k] = found.edges.get(k)
        self._edges.update(found.edges)
        self._degrees.update(found.degrees)
        if incident:
            for n in ids:
                self._incident[n] = found.incident.get(n)

    def _known(self, node: str) -> bool:
        return node in self._nodes and node in self._degrees

    async def get_nodes(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        wanted = [k for k in dict.fromkeys(keys) if k not in self._nodes]
        if wanted:
            self._nodes.update(zip(wanted, await self.graph.get_nodes(wanted)))
        return [self._nodes[k] for k in keys]

    async def get_edges(self, pairs: Sequence[EdgeKey]) -> list[dict[str, Any] | None]:
        keys = [edge_key(*p) for p in pairs]
        wanted = [k for k in dict.fromkeys(keys) if k not in self._edges]
        if wanted:
            self._edges.update(zip(wanted, await self.graph.get_edges(wanted)))
        return [self._edges[k] for k in keys]

    async def nodes_edges(self, keys: Sequence[str]) -> list[list[EdgeKey] | None]:
        wanted = [k for k in dict.fromkeys(keys) if k not in self._incident]
        if wanted:
            self._incident.update(zip(wanted, await self.graph.nodes_edges(wanted)))
        return [None if (e := self._incident[k]) is None else list(e) for k in keys]

    async def degrees(self, keys: Sequence[str]) -> list[int]:
        wanted = [k for k in dict.fromkeys(keys) if k not in self._degrees]
        if wanted:
            self._degrees.update(zip(wanted, await self.graph.degrees(wanted)))
        return [self._degrees[k] for k in keys]

    async def edge_degrees(self, pairs: Sequence[EdgeKey]) -> list[int]:
        ends = list(dict.fromkeys(k for p in pairs for k in p))
        degree = dict(zip(ends, await self.degrees(ends)))
        return [degree[a] + degree[b] for a, b in pairs]
