"""The default graph store: an in-memory ``networkx.Graph`` saved as JSON.

On disk, in ``<working_dir>/<workspace>/graph/``:

``<namespace>.json``, the snapshot, replaced atomically::

    {"format": "ragkit.networkx-graph/1", "generation": g,
     "nodes": [[id, {properties}], ...],
     "edges": [[source, target, {properties}], ...]}

(files written before journals existed have no ``generation``: it is 0).

``<namespace>.json.journal``, the changes flushed since that snapshot: one
framed record per ``flush()`` (framing, generations and compaction are
described in :mod:`ragkit.storage.snapshot_journal`), each a JSON object::

    {"deleted_nodes": [id, ...], "nodes": [[id, {properties}], ...],
     "deleted_edges": [[a, b], ...], "edges": [[a, b, {properties}], ...]}

holding the full current properties of every node and edge changed since the
previous flush, applied in that order. ``close()`` folds the journal into a new
snapshot (only after this process wrote, and under the writer lock when
:class:`ragkit.core.stores.Stores` manages the store).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import networkx as nx

from ragkit.errors import StoreError
from ragkit.protocols.base import Capability, StoreConfig
from ragkit.protocols.graph import EdgeKey, GraphStore, copy_properties, edge_key
from ragkit.schema import Edge, Node
from ragkit.storage.snapshot_journal import JournaledFile, JournaledStore, Writer, json_array, json_object

FORMAT = "ragkit.networkx-graph/1"


def _dumps(data: object) -> bytes:
    return json.dumps(
        data, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    ).encode("utf-8")


def _loads(data: bytes) -> Any:
    # Lone surrogates passed through: files written before [graph.text.unicode] may hold them.
    return json.loads(data.decode("utf-8", "surrogatepass"))


def _set_node(graph: nx.Graph, n: str, props: Mapping[str, Any]) -> None:
    """Add ``n`` or replace all its properties."""
    graph.add_node(n)
    attrs = graph.nodes[n]
    attrs.clear()
    attrs.update(props)


def _set_edge(graph: nx.Graph, a: str, b: str, props: Mapping[str, Any]) -> None:
    """Add the edge (and missing endpoints, without properties) or replace its properties."""
    graph.add_edge(a, b)
    attrs = graph.edges[a, b]
    attrs.clear()
    attrs.update(props)


class NetworkXGraphStore(JournaledStore, GraphStore):
    """Undirected property graph held in memory; persisted to a JSON snapshot
    and a journal of the changes flushed since.

    Changed keys are tracked for the journal: a node id (str) or an edge key
    (a canonical ``(a, b)`` tuple).
    """

    name: ClassVar[str] = "networkx"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.CONCURRENT_WRITES}
    )

    def __init__(self, config: StoreConfig) -> None:
        super().__init__(config)
        self._graph = nx.Graph()
        self._file: JournaledFile[str | EdgeKey] = JournaledFile(self.path, "graph")

    @property
    def path(self) -> Path:
        return Path(self.config.working_dir) / self.workspace / "graph" / f"{self.namespace}.json"

    @property
    def graph(self) -> nx.Graph:
        """The graph in memory, for tools and tests that look at it the way
        NetworkX does. Read it only: a change made here is never written."""
        return self._graph

    # -- lifecycle -------------------------------------------------------------

    async def _open(self) -> None:
        await self._file.writable()  # a reload (refresh, a lost lock) replaces what a save may be reading
        self._graph = nx.Graph()
        try:
            self._file.load(self._read_snapshot, self._apply_changes)
        except BaseException:
            self._graph = nx.Graph()
            raise

    def _read_snapshot(self) -> int:
        """Load the snapshot into the (empty) graph; returns its generation."""
        try:
            data = _loads(self.path.read_bytes())
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"not a {FORMAT} file")
            graph = self._graph
            for node_id, props in data["nodes"]:
                _set_node(graph, node_id, props)
            for a, b, props in data["edges"]:
                _set_edge(graph, a, b, props)
            return int(data.get("generation", 0))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"cannot read graph file {self.path}: {exc}; restore it from a backup, or "
                f"delete it and its journal {self._file.journal.name} (if any) and re-index"
            ) from exc

    def _apply_changes(self, payload: bytes) -> None:
        """Replay one journal record (see the module docstring)."""
        data = _loads(payload)
        graph = self._graph
        graph.remove_nodes_from(data["deleted_nodes"])  # and their edges
        for n, props in data["nodes"]:
            _set_node(graph, n, props)
        graph.remove_edges_from(data["deleted_edges"])
        for a, b, props in data["edges"]:
            _set_edge(graph, a, b, props)

    def _encode_changes(self, keys: list[str | EdgeKey]) -> bytes:
        """A journal record of the current state of the changed nodes and edges
        (in a worker thread, writes waiting: ``JournaledFile.save``)."""
        graph = self._graph
        changes: dict[str, list[Any]] = {
            "deleted_nodes": [], "nodes": [], "deleted_edges": [], "edges": []
        }
        for key in keys:
            if isinstance(key, tuple):
                if graph.has_edge(*key):
                    changes["edges"].append([*key, graph.edges[key]])
                else:
                    changes["deleted_edges"].append(list(key))
            elif key in graph:
                changes["nodes"].append([key, graph.nodes[key]])
            else:
                changes["deleted_nodes"].append(key)
        return json_object({name: json_array(items, _dumps) for name, items in changes.items()})

    def _snapshot(self, generation: int) -> Writer:
        """The whole graph encoded (in a worker thread, writes waiting:
        ``JournaledFile.save``), and a writer of it."""
        graph = self._graph
        payload = json_object(
            {
                "format": _dumps(FORMAT),
                "generation": _dumps(generation),
                "nodes": json_array([[n, props] for n, props in graph.nodes(data=True)], _dumps),
                "edges": json_array([[*edge_key(a, b), props] for a, b, props in graph.edges(data=True)], _dumps),
            }
        )
        return lambda fh: fh.write(payload)

    def _forget(self) -> None:
        self._graph = nx.Graph()

    async def _drop(self) -> None:
        await self._file.writable()
        self._graph = nx.Graph()
        await self._file.delete()

    # -- writes ----------------------------------------------------------------

    # Every write first waits for a save that is reading the graph in its thread.

    async def _upsert_nodes(self, nodes: dict[str, dict[str, Any]]) -> None:
        await self._file.writable()
        for n, props in nodes.items():
            _set_node(self._graph, n, props)
        self._file.touch(nodes)

    async def _upsert_edges(self, edges: dict[EdgeKey, dict[str, Any]]) -> None:
        await self._file.writable()
        for (a, b), props in edges.items():
            # Missing endpoints are created without properties; a replay of the
            # edge creates them the same way, so they need no record of their own.
            _set_edge(self._graph, a, b, props)
        self._file.touch(edges)

    async def _delete_nodes(self, ids: list[str]) -> None:
        await self._file.writable()
        graph = self._graph
        for n in ids:
            if n in graph:
                # Its edges go with it; they are changes too, so that a replay of a
                # node deleted then re-added does not bring them back.
                self._file.touch([n, *(edge_key(n, other) for other in graph.adj[n])])
                graph.remove_node(n)

    async def _delete_edges(self, keys: list[EdgeKey]) -> None:
        await self._file.writable()
        for a, b in keys:
            if self._graph.has_edge(a, b):
                self._graph.remove_edge(a, b)
                self._file.touch([(a, b)])

    # -- reads -----------------------------------------------------------------

    async def _get_nodes(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        nodes = self._graph.nodes
        return {n: nodes[n] for n in ids if n in nodes}

    # Reads use networkx's adjacency dict (``Graph._adj``: node -> neighbour ->
    # edge attributes) directly: its public views build an object per lookup,
    # which doubles the cost of these hot-path batch reads.

    async def _get_edges(self, keys: list[EdgeKey]) -> dict[EdgeKey, dict[str, Any]]:
        adj = self._graph._adj
        return {(a, b): adj[a][b] for a, b in keys if a in adj and b in adj[a]}

    async def _nodes_edges(self, ids: list[str]) -> dict[str, Any]:
        adj = self._graph._adj
        return {n: adj[n] for n in ids if n in adj}

    async def _degrees(self, ids: list[str]) -> dict[str, int]:
        # len(adj[n]) counts distinct neighbours, a self-loop once; networkx's own
        # degree() would count a self-loop twice.
        adj = self._graph._adj
        return {n: len(adj[n]) for n in ids if n in adj}

    async def _node_count(self) -> int:
        return self._graph.number_of_nodes()

    async def _edge_count(self) -> int:
        return self._graph.number_of_edges()

    async def _labels(self) -> list[str]:
        return list(self._graph.nodes)

    async def _nodes(self) -> AsyncIterator[Node]:
        for n in list(self._graph.nodes):  # a snapshot: safe while others write
            if n in self._graph:  # skip nodes deleted while iterating
                # model_construct: hand back the stored values exactly (validation
                # would turn [1, 2.5] into [1.0, 2.5]).
                yield Node.model_construct(id=n, properties=copy_properties(self._graph.nodes[n]))

    async def _edges(self) -> AsyncIterator[Edge]:
        for a, b in [edge_key(a, b) for a, b in self._graph.edges()]:
            if self._graph.has_edge(a, b):
                yield Edge.model_construct(source=a, target=b, properties=copy_properties(self._graph.edges[a, b]))
