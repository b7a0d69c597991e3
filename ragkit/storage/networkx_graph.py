"""The default graph store: an in-memory ``networkx.Graph`` saved as JSON.

On disk: ``<working_dir>/<workspace>/graph/<namespace>.json``::

    {"format": "ragkit.networkx-graph/1",
     "nodes": [[id, {properties}], ...],
     "edges": [[source, target, {properties}], ...]}

replaced atomically on ``flush()``/``close()`` when something changed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import networkx as nx

from ragkit.errors import InvalidValueError, StoreError
from ragkit.protocols.base import Capability, StoreConfig
from ragkit.protocols.graph import (
    EdgeKey,
    GraphStore,
    check_node_id,
    check_properties,
    edge_key,
)
from ragkit.schema import Edge, Node
from ragkit.storage._files import SnapshotFile, remove_stale_temps

FORMAT = "ragkit.networkx-graph/1"


def _copy(props: Mapping[str, Any]) -> dict[str, Any]:
    """A copy that shares nothing mutable with the stored properties."""
    return {k: list(v) if isinstance(v, list) else v for k, v in props.items()}


def _pair(pair: object) -> tuple[object, object] | None:
    try:
        a, b = pair  # type: ignore[misc]
    except (TypeError, ValueError):
        return None
    return a, b


class NetworkXGraphStore(GraphStore):
    """Undirected property graph held in memory; persisted to one JSON file."""

    name: ClassVar[str] = "networkx"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.CONCURRENT_WRITES}
    )

    def __init__(self, config: StoreConfig) -> None:
        super().__init__(config)
        self._graph = nx.Graph()
        self._file = SnapshotFile(self.path)

    @property
    def path(self) -> Path:
        return Path(self.config.working_dir) / self.workspace / "graph" / f"{self.namespace}.json"

    def _g(self) -> nx.Graph:
        self._check_open()
        return self._graph

    # -- lifecycle -------------------------------------------------------------

    async def open(self) -> None:
        if self._open:
            return
        remove_stale_temps(self.path)
        graph = nx.Graph()
        if self.path.exists():
            graph = self._load()
        self._graph = graph
        self._file.reset()
        self._open = True

    def _load(self) -> nx.Graph:
        try:
            text = self.path.read_bytes().decode("utf-8", "surrogatepass")
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"not a {FORMAT} file")
            graph = nx.Graph()
            for node_id, props in data["nodes"]:
                graph.add_node(node_id)
                graph.nodes[node_id].update(props)
            for a, b, props in data["edges"]:
                graph.add_edge(a, b)
                graph.edges[a, b].update(props)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"cannot read graph file {self.path}: {exc}; restore it from a backup or "
                "delete it and re-index"
            ) from exc
        return graph

    async def flush(self) -> None:
        self._check_open()
        await self._file.save(self._snapshot)

    def _snapshot(self):
        graph = self._graph
        payload = json.dumps(
            {
                "format": FORMAT,
                "nodes": [[n, props] for n, props in graph.nodes(data=True)],
                "edges": [[*edge_key(a, b), props] for a, b, props in graph.edges(data=True)],
            },
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
        ).encode("utf-8", "surrogatepass")
        return lambda fh: fh.write(payload)

    async def close(self) -> None:
        if not self._open:
            return
        await self.flush()
        self._open = False
        self._graph = nx.Graph()

    async def drop(self) -> None:
        self._check_open()
        self._graph = nx.Graph()
        self._file.touch()
        await self._file.delete()

    # -- writes ----------------------------------------------------------------

    async def upsert_nodes(self, nodes: Mapping[str, Mapping[str, Any]]) -> None:
        graph = self._g()
        if not isinstance(nodes, Mapping):
            raise InvalidValueError(
                f"upsert_nodes takes a mapping of id -> properties, got {type(nodes).__name__}"
            )
        checked = [
            (check_node_id(n), check_properties(f"node {n!r}", props))
            for n, props in nodes.items()
        ]
        for n, props in checked:
            if n in graph:
                attrs = graph.nodes[n]
                attrs.clear()
                attrs.update(props)
            else:
                graph.add_node(n)
                graph.nodes[n].update(props)
        if checked:
            self._file.touch()

    async def upsert_edges(self, edges: Sequence[tuple[str, str, Mapping[str, Any]]]) -> None:
        graph = self._g()
        checked = []
        for item in edges:
            try:
                a, b, props = item
            except (TypeError, ValueError) as exc:
                raise InvalidValueError(
                    f"edges are (a, b, properties) triples, got {item!r}"
                ) from exc
            a, b = check_node_id(a), check_node_id(b)
            checked.append((a, b, check_properties(f"edge ({a!r}, {b!r})", props)))
        for a, b, props in checked:
            if graph.has_edge(a, b):
                attrs = graph.edges[a, b]
                attrs.clear()
                attrs.update(props)
            else:
                graph.add_edge(a, b)  # creates missing endpoints without properties
                graph.edges[a, b].update(props)
        if checked:
            self._file.touch()

    async def delete_nodes(self, ids: Iterable[str]) -> None:
        graph = self._g()
        if isinstance(ids, str):
            ids = [ids]
        changed = False
        for n in ids:
            if isinstance(n, str) and n in graph:
                graph.remove_node(n)  # removes its edges too
                changed = True
        if changed:
            self._file.touch()

    async def delete_edges(self, pairs: Iterable[EdgeKey]) -> None:
        graph = self._g()
        checked = []
        for pair in pairs:  # validate the whole batch before deleting anything
            ab = _pair(pair)
            if ab is None:
                raise InvalidValueError(f"edges are given as (a, b) pairs, got {pair!r}")
            checked.append(ab)
        changed = False
        for a, b in checked:
            if isinstance(a, str) and isinstance(b, str) and graph.has_edge(a, b):
                graph.remove_edge(a, b)
                changed = True
        if changed:
            self._file.touch()

    # -- reads -----------------------------------------------------------------

    async def get_nodes(self, ids: Sequence[str]) -> list[dict[str, Any] | None]:
        graph = self._g()
        return [
            _copy(graph.nodes[n]) if isinstance(n, str) and n in graph else None for n in ids
        ]

    async def get_edges(self, pairs: Sequence[EdgeKey]) -> list[dict[str, Any] | None]:
        graph = self._g()
        out: list[dict[str, Any] | None] = []
        for pair in pairs:
            ab = _pair(pair)
            if ab is None:
                raise InvalidValueError(f"edges are given as (a, b) pairs, got {pair!r}")
            a, b = ab
            if isinstance(a, str) and isinstance(b, str) and graph.has_edge(a, b):
                out.append(_copy(graph.edges[a, b]))
            else:
                out.append(None)
        return out

    async def nodes_edges(self, ids: Sequence[str]) -> list[list[EdgeKey] | None]:
        graph = self._g()
        out: list[list[EdgeKey] | None] = []
        for n in ids:
            if isinstance(n, str) and n in graph:
                out.append(sorted(edge_key(n, other) for other in graph.adj[n]))
            else:
                out.append(None)
        return out

    async def degrees(self, ids: Sequence[str]) -> list[int]:
        graph = self._g()
        # len(adj[n]) counts distinct neighbours, a self-loop once; networkx's own
        # degree() would count a self-loop twice.
        return [len(graph.adj[n]) if isinstance(n, str) and n in graph else 0 for n in ids]

    async def node_count(self) -> int:
        return self._g().number_of_nodes()

    async def edge_count(self) -> int:
        return self._g().number_of_edges()

    async def labels(self) -> list[str]:
        return sorted(self._g().nodes)

    def nodes(self) -> AsyncIterator[Node]:
        graph = self._g()
        return self._iter_nodes(list(graph.nodes))

    async def _iter_nodes(self, snapshot: list[str]) -> AsyncIterator[Node]:
        for n in snapshot:
            graph = self._g()
            if n in graph:  # skip nodes deleted while iterating
                # model_construct: hand back the stored values exactly (validation
                # would turn [1, 2.5] into [1.0, 2.5]).
                yield Node.model_construct(id=n, properties=_copy(graph.nodes[n]))

    def edges(self) -> AsyncIterator[Edge]:
        graph = self._g()
        return self._iter_edges([edge_key(a, b) for a, b in graph.edges()])

    async def _iter_edges(self, snapshot: list[EdgeKey]) -> AsyncIterator[Edge]:
        for a, b in snapshot:
            graph = self._g()
            if graph.has_edge(a, b):
                yield Edge.model_construct(
                    source=a, target=b, properties=_copy(graph.edges[a, b])
                )
