"""Graph store protocol."""

from __future__ import annotations

import asyncio
import math
from abc import abstractmethod
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragkit.errors import InvalidValueError
from ragkit.protocols.base import BaseStore, distinct, in_order, storable_key, template, valid_unicode
from ragkit.schema import Edge, Node, Subgraph

EdgeKey = tuple[str, str]


@dataclass
class GraphContext:
    """What ``GraphStore.context`` read, in one call (see there)."""

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Properties of the existing nodes among the asked ids and the asked edges' ends."""
    edges: dict[EdgeKey, dict[str, Any]] = field(default_factory=dict)
    """Properties of the existing asked edges and, with ``incident``, of every edge of the asked ids."""
    degrees: dict[str, int] = field(default_factory=dict)
    """Degree of every asked id, every asked edge's end and every end of ``edges`` (0 for a missing node)."""
    incident: dict[str, list[EdgeKey]] = field(default_factory=dict)
    """With ``incident``: each existing asked id's edges, as ``nodes_edges`` gives them."""


def edge_key(a: str, b: str) -> EdgeKey:
    """Canonical key of the undirected edge between ``a`` and ``b``."""
    return (a, b) if a <= b else (b, a)


class GraphStore(BaseStore):
    """An undirected property graph whose node ids are entity names.

    Decisions every adapter must follow (the contract suite checks each):

    - [graph.undirected] **Undirected.** The edge (a, b) *is* (b, a): upserting
      (b, a) replaces the properties of (a, b); ``get_edges([(b, a)])`` finds
      it; scans report each edge once with ``source <= target``.
    - [graph.upsert-edges.last-wins] **One batch, one edge twice.** When an
      ``upsert_edges`` batch holds the same edge more than once, as (a, b) or
      (b, a), the *last* occurrence wins, as if each were upserted in turn; the
      same holds for an id repeated in ``upsert_nodes``' mapping (the mapping
      keeps its last value).
    - [graph.self-loops] **Self-loops** (a, a) are allowed and count once
      towards a's degree.
    - [graph.degree] **Degree** of a node is the number of distinct edges
      touching it; a missing node has degree 0.
    - [graph.missing-vs-isolated] **Missing vs isolated.** ``get_nodes`` gives
      ``None`` for a missing node; ``nodes_edges`` gives ``None`` for a missing
      node and ``[]`` for a node without edges.
    - [graph.upsert.replaces] **Upsert replaces** the properties of a node or
      edge (no merge). Upserting an edge creates missing endpoints as nodes with
      no properties.
    - [graph.delete.cascades] **Deleting a node deletes its edges.**
      [store.delete.missing-ok] Deleting missing things is not an error.
    - [graph.properties.types] **Property values** are str, int, float, bool or
      lists of str/int/float, read back with their types; keys are non-empty
      str. ``None``, dicts and nested lists raise ``InvalidValueError``.
    - [graph.node-ids.any-str] Node ids are any non-empty str (quotes,
      backticks, braces, CJK, emoji); [store.keys.exact] holds for them (entity
      names differing in case or normalisation are different nodes).
    - [graph.text.unicode] Ids, property keys and str values (list items
      too) are valid Unicode: one holding a lone surrogate (no store can
      encode it as UTF-8, and a server refuses it) raises ``InvalidValueError``
      and nothing of the batch is written; reads and deletes take such an id
      as missing, as KV and doc-status stores take such a key.
      ``ragkit.core.text.clean`` repairs model output before it gets here.
    - [graph.batch.order] Batch reads return one entry per asked item, in
      order; [store.batch.large] holds for them.
    - [graph.scans.once] ``nodes()``/``edges()`` yield everything once and the
      counts match them.
    - [graph.context.same-as-reads] **One read of a neighbourhood.**
      ``context(ids, pairs, incident)`` answers what ``get_nodes``,
      ``get_edges``, ``nodes_edges`` and ``degrees`` answer for the same items
      (``GraphContext``): a query's graph stage reads the graph once, which on
      a server is one round trip instead of three or four.

    Adapters implement the hooks (``_upsert_nodes``, ``_upsert_edges``,
    ``_delete_nodes``, ``_delete_edges``, ``_get_nodes``, ``_get_edges``,
    ``_nodes_edges``, ``_degrees``, ``_node_count``, ``_edge_count``, ``_nodes``,
    ``_edges``, ``_drop``; ``_labels`` optionally, for speed). The public methods
    check the store is open, validate ids, pairs and properties, canonicalise
    edge keys, and answer batch reads in the asked order with fresh copies. The
    single-item forms, ``subgraph`` and ``search_labels`` are defined here on
    top of the batch methods so that every backend shares one definition.
    """

    # -- writes --------------------------------------------------------------

    @template("_upsert_nodes")
    async def upsert_nodes(self, nodes: Mapping[str, Mapping[str, Any]]) -> None:
        self._check_open()
        if not isinstance(nodes, Mapping):
            raise InvalidValueError(
                f"upsert_nodes takes a mapping of id -> properties, got {type(nodes).__name__}"
            )
        checked = {
            check_node_id(n): check_properties(f"node {n!r}", props) for n, props in nodes.items()
        }
        if checked:
            await self._fenced()
            await self._upsert_nodes(checked)

    @template("_upsert_edges")
    async def upsert_edges(
        self, edges: Sequence[tuple[str, str, Mapping[str, Any]]]
    ) -> None:
        """Insert or replace edges given as (a, b, properties)."""
        self._check_open()
        checked: dict[EdgeKey, dict[str, Any]] = {}
        for item in edges:
            try:
                a, b, props = item
            except (TypeError, ValueError) as exc:
                raise InvalidValueError(
                    f"edges are (a, b, properties) triples, got {item!r}"
                ) from exc
            a, b = check_node_id(a), check_node_id(b)
            # (b, a) later in the batch replaces (a, b), as a second upsert would.
            checked[edge_key(a, b)] = check_properties(f"edge ({a!r}, {b!r})", props)
        if checked:
            await self._fenced()
            await self._upsert_edges(checked)

    @template("_delete_nodes")
    async def delete_nodes(self, ids: Iterable[str]) -> None:
        self._check_open()
        wanted = _node_ids(ids)
        if wanted:
            await self._fenced()
            await self._delete_nodes(wanted)

    @template("_delete_edges")
    async def delete_edges(self, pairs: Iterable[EdgeKey]) -> None:
        self._check_open()
        keys = list(dict.fromkeys(k for k in map(_asked_key, pairs) if k is not None))
        if keys:
            await self._fenced()
            await self._delete_edges(keys)

    # -- reads ---------------------------------------------------------------

    @template("_get_nodes")
    async def get_nodes(self, ids: Sequence[str]) -> list[dict[str, Any] | None]:
        self._check_open()
        ids = list(ids)
        wanted = _node_ids(ids)
        found = await self._get_nodes(wanted) if wanted else {}
        return in_order(ids, found, copy_properties)

    @template("_get_edges")
    async def get_edges(self, pairs: Sequence[EdgeKey]) -> list[dict[str, Any] | None]:
        self._check_open()
        asked = [_asked_key(pair) for pair in pairs]  # validates every pair first
        wanted = list(dict.fromkeys(k for k in asked if k is not None))
        found = await self._get_edges(wanted) if wanted else {}
        return in_order(asked, found, copy_properties)

    @template("_nodes_edges")
    async def nodes_edges(self, ids: Sequence[str]) -> list[list[EdgeKey] | None]:
        """For each node: its edges as canonical keys sorted ascending, or ``None``."""
        self._check_open()
        ids = list(ids)
        wanted = _node_ids(ids)
        found = await self._nodes_edges(wanted) if wanted else {}
        edges = {n: sorted(edge_key(n, m) for m in found[n]) for n in wanted if n in found}
        if len(wanted) == len(ids):  # every id asked once: each list goes out once
            return [edges.get(n) for n in ids]
        return in_order(ids, edges, list)

    @template("_degrees")
    async def degrees(self, ids: Sequence[str]) -> list[int]:
        self._check_open()
        ids = list(ids)
        wanted = _node_ids(ids)
        found = await self._degrees(wanted) if wanted else {}
        return in_order(ids, found, int, 0)

    @template("_context")
    async def context(
        self, ids: Sequence[str] = (), pairs: Sequence[EdgeKey] = (), incident: bool = False
    ) -> GraphContext:
        """The nodes ``ids`` and the edges ``pairs`` with what a query stage
        reads around them, in one call: the nodes' and the edges' ends'
        properties, with ``incident`` every edge of ``ids`` too, and the degree
        of every node named (``GraphContext``)."""
        self._check_open()
        wanted = _node_ids(list(ids))
        keys = list(dict.fromkeys(k for k in map(_asked_key, pairs) if k is not None))
        if not wanted and not keys:
            return GraphContext()
        found = await self._context(wanted, keys, incident)
        ends = dict.fromkeys([*wanted, *(n for k in keys for n in k), *(n for k in found.edges for n in k)])
        return GraphContext(
            nodes={n: copy_properties(p) for n, p in found.nodes.items()},
            edges={edge_key(*k): copy_properties(p) for k, p in found.edges.items()},
            degrees={n: int(found.degrees.get(n, 0)) for n in ends},
            incident={n: sorted(edge_key(n, m) for m in found.incident[n]) for n in wanted if n in found.incident}
            if incident else {},
        )

    @template("_node_count")
    async def node_count(self) -> int:
        self._check_open()
        return int(await self._node_count())

    @template("_edge_count")
    async def edge_count(self) -> int:
        self._check_open()
        return int(await self._edge_count())

    @template("_nodes")
    def nodes(self) -> AsyncIterator[Node]:
        """Every node once, any order."""
        self._check_open()
        return self._while_open(self._nodes())

    @template("_edges")
    def edges(self) -> AsyncIterator[Edge]:
        """Every edge exactly once, canonical order of endpoints, any order of edges."""
        self._check_open()
        return self._while_open(self._edges())

    @template("_labels")
    async def labels(self) -> list[str]:
        """Every node id, sorted."""
        self._check_open()
        return sorted(await self._labels())

    # -- hooks ----------------------------------------------------------------------

    @abstractmethod
    async def _upsert_nodes(self, nodes: dict[str, dict[str, Any]]) -> None:
        """Write validated nodes (id -> properties to replace the old ones)."""

    @abstractmethod
    async def _upsert_edges(self, edges: dict[EdgeKey, dict[str, Any]]) -> None:
        """Write validated edges, keyed by canonical ``(a, b)`` with ``a <= b``;
        create missing endpoints without properties."""

    @abstractmethod
    async def _delete_nodes(self, ids: list[str]) -> None:
        """Delete these nodes (distinct non-empty ids) and their edges."""

    @abstractmethod
    async def _delete_edges(self, keys: list[EdgeKey]) -> None:
        """Delete these edges (distinct canonical keys)."""

    @abstractmethod
    async def _get_nodes(self, ids: list[str]) -> Mapping[str, Mapping[str, Any]]:
        """``{id: properties}`` of the existing nodes among ``ids``."""

    @abstractmethod
    async def _get_edges(self, keys: list[EdgeKey]) -> Mapping[EdgeKey, Mapping[str, Any]]:
        """``{key: properties}`` of the existing edges among the canonical ``keys``."""

    @abstractmethod
    async def _nodes_edges(self, ids: list[str]) -> Mapping[str, Iterable[str]]:
        """``{id: its neighbours' ids, each once}`` for the existing nodes among
        ``ids`` (a node with a self-loop is its own neighbour; an isolated node
        has none)."""

    @abstractmethod
    async def _degrees(self, ids: list[str]) -> Mapping[str, int]:
        """``{id: degree}``; missing nodes may be left out."""

    async def _context(self, ids: list[str], keys: list[EdgeKey], incident: bool) -> GraphContext:
        """``context`` for distinct valid ``ids`` and canonical ``keys``; its
        ``incident`` holds each existing node's neighbours' ids (as
        ``_nodes_edges``), ``degrees`` may leave missing nodes out. By default
        the other read hooks, one after the other; a server adapter answers in
        one statement, or runs them concurrently (``read_context``)."""
        return await read_context(self, ids, keys, incident, concurrently=False)

    @abstractmethod
    async def _node_count(self) -> int: ...

    @abstractmethod
    async def _edge_count(self) -> int: ...

    @abstractmethod
    def _nodes(self) -> AsyncIterator[Node]:
        """Every node once, any order (an async generator)."""

    @abstractmethod
    def _edges(self) -> AsyncIterator[Edge]:
        """Every edge once as ``source <= target``, any order (an async generator)."""

    async def _labels(self) -> Iterable[str]:
        """Every node id (any order); override when the backend lists ids cheaper
        than whole nodes."""
        return [n.id async for n in self._nodes()]

    # -- derived single-item forms --------------------------------------------

    @template("_upsert_nodes")
    async def upsert_node(self, id: str, properties: Mapping[str, Any]) -> None:
        await self.upsert_nodes({id: properties})

    @template("_upsert_edges")
    async def upsert_edge(self, a: str, b: str, properties: Mapping[str, Any]) -> None:
        await self.upsert_edges([(a, b, properties)])

    @template("_get_nodes")
    async def get_node(self, id: str) -> dict[str, Any] | None:
        return (await self.get_nodes([id]))[0]

    @template("_get_edges")
    async def get_edge(self, a: str, b: str) -> dict[str, Any] | None:
        return (await self.get_edges([(a, b)]))[0]

    @template("_get_nodes")
    async def has_node(self, id: str) -> bool:
        return await self.get_node(id) is not None

    @template("_get_edges")
    async def has_edge(self, a: str, b: str) -> bool:
        return await self.get_edge(a, b) is not None

    @template("_nodes_edges")
    async def node_edges(self, id: str) -> list[EdgeKey] | None:
        return (await self.nodes_edges([id]))[0]

    @template("_degrees")
    async def degree(self, id: str) -> int:
        return (await self.degrees([id]))[0]

    @template("_degrees")
    async def edge_degrees(self, pairs: Sequence[EdgeKey]) -> list[int]:
        """deg(a) + deg(b) per edge: LightRAG's ranking of relations."""
        names = list(dict.fromkeys(n for pair in pairs for n in pair))
        deg = dict(zip(names, await self.degrees(names)))
        return [deg[a] + deg[b] for a, b in pairs]

    @template("_delete_nodes")
    async def delete_node(self, id: str) -> None:
        await self.delete_nodes([id])

    @template("_delete_edges")
    async def delete_edge(self, a: str, b: str) -> None:
        await self.delete_edges([(a, b)])

    # -- derived queries -------------------------------------------------------

    @template("_labels")
    async def search_labels(self, query: str, limit: int = 50) -> list[str]:
        """Node ids containing ``query`` case-insensitively: exact matches first,
        then prefixes, then shorter ids, then alphabetical."""
        q = query.casefold()
        found = [label for label in await self.labels() if q in label.casefold()]
        found.sort(
            key=lambda s: (s.casefold() != q, not s.casefold().startswith(q), len(s), s)
        )
        return found[:limit]

    @template("_get_nodes, _nodes_edges, _degrees and _get_edges")
    async def subgraph(self, id: str, max_depth: int = 2, max_nodes: int = 1000) -> Subgraph:
        """Breadth-first neighbourhood of ``id``.

        Nodes are taken level by level (depth 0, 1, ...); within a level by
        degree descending, then id. At most ``max_nodes`` nodes are kept;
        ``truncated`` is true when more nodes lay within ``max_depth``. Edges are
        every edge between kept nodes. A missing ``id`` gives an empty subgraph.
        """
        self._check_open()
        if max_depth < 0 or max_nodes < 1:
            raise InvalidValueError("subgraph needs max_depth >= 0 and max_nodes >= 1")
        return await neighbourhood(self, id, max_depth, max_nodes)


async def neighbourhood(
    graph: Any, id: str, max_depth: int, max_nodes: int, max_edges: int | None = None
) -> Subgraph:
    """``GraphStore.subgraph``'s walk, on anything with the store's
    ``get_nodes``, ``nodes_edges``, ``degrees`` and ``get_edges`` (a store, or
    a principal's scoped view of one, ``ragkit.core.scope.ScopedGraph``).
    ``max_edges`` also bounds the edges (the first by pair), marking the
    result ``truncated`` when some were left out."""
    if (await graph.get_nodes([id]))[0] is None:
        return Subgraph()
    order, seen, frontier, truncated = [id], {id}, [id], False
    for _ in range(max_depth):
        nxt = sorted({o for es in await graph.nodes_edges(frontier) for e in es or [] for o in e} - seen)
        if not nxt:
            break
        degs = await graph.degrees(nxt)
        nxt = [n for _, n in sorted(zip((-d for d in degs), nxt))]
        room = max_nodes - len(order)
        if len(nxt) > room:
            truncated, nxt = True, nxt[:room]
        order += nxt
        seen.update(nxt)
        frontier = nxt
        if truncated:
            break
    props = await graph.get_nodes(order)
    keys = sorted(
        {tuple(e) for es in await graph.nodes_edges(order) for e in es or [] if e[0] in seen and e[1] in seen}
    )
    if max_edges is not None and len(keys) > max_edges:
        truncated, keys = True, keys[:max_edges]
    edge_props = await graph.get_edges(keys)
    return Subgraph(
        nodes=[Node(id=n, properties=p or {}) for n, p in zip(order, props)],
        edges=[Edge(source=a, target=b, properties=p or {}) for (a, b), p in zip(keys, edge_props)],
        truncated=truncated,
    )


async def read_context(
    store: GraphStore, ids: list[str], keys: list[EdgeKey], incident: bool, concurrently: bool
) -> GraphContext:
    """``GraphStore._context`` from the store's read hooks: the reads that do
    not wait for another at once when ``concurrently`` (for a server: one
    round trip's wait, or two with ``incident``, instead of three or four)."""
    async def run(*reads: Any) -> list[Any]:
        if concurrently:
            return list(await asyncio.gather(*reads))
        return [await r for r in reads]

    async def nothing() -> dict[Any, Any]:
        return {}

    named = list(dict.fromkeys([*ids, *(n for k in keys for n in k)]))
    if not incident:  # every edge found is among keys, so its ends are named already
        nodes, edges, degrees = await run(store._get_nodes(named), store._get_edges(keys) if keys else nothing(),
                                          store._degrees(named))
        return GraphContext(dict(nodes), dict(edges), dict(degrees))
    nodes, neighbours = await run(store._get_nodes(named), store._nodes_edges(ids) if ids else nothing())
    neighbours = {n: list(others) for n, others in neighbours.items()}
    keys = list(dict.fromkeys([*keys, *(edge_key(n, m) for n, others in neighbours.items() for m in others)]))
    around = list(dict.fromkeys([*named, *(m for others in neighbours.values() for m in others)]))
    edges, degrees = await run(store._get_edges(keys) if keys else nothing(), store._degrees(around))
    return GraphContext(dict(nodes), dict(edges), dict(degrees), neighbours)


def _node_ids(ids: Iterable[object]) -> list[str]:
    """Distinct asked node ids that can exist (others read as missing)."""
    return [n for n in distinct(ids) if storable_key(n)]


def _asked_key(pair: object) -> EdgeKey | None:
    """The canonical key of an asked ``(a, b)``; ``None`` when it names ids that
    cannot exist; ``InvalidValueError`` when it is not a pair at all."""
    try:
        a, b = pair  # type: ignore[misc]
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(f"edges are given as (a, b) pairs, got {pair!r}") from exc
    if a.__class__ is str and b.__class__ is str and a and b and a.isascii() and b.isascii():  # the common case
        return (a, b) if a <= b else (b, a)
    return edge_key(a, b) if storable_key(a) and storable_key(b) else None


def copy_properties(props: Mapping[str, Any]) -> dict[str, Any]:
    """A copy that shares nothing mutable with what the adapter holds."""
    return {k: list(v) if isinstance(v, list) else v for k, v in props.items()}


def check_properties(owner: str, properties: object) -> dict[str, Any]:
    """Validate and copy a property map; shared so every adapter rejects the same values."""
    if not isinstance(properties, Mapping):
        raise InvalidValueError(f"properties of {owner} must be a dict")
    out: dict[str, Any] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not key:
            raise InvalidValueError(f"property keys of {owner} must be non-empty strings")
        _check_unicode(key, lambda: f"property key {key[:40]!r} of {owner}")
        if isinstance(value, list):
            if not all(
                isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value
            ):
                raise InvalidValueError(
                    f"property {key!r} of {owner}: lists may hold only str, int or float"
                )
            if any(isinstance(v, float) and not math.isfinite(v) for v in value):
                raise InvalidValueError(f"property {key!r} of {owner} must be finite")
            for v in value:
                if isinstance(v, str):
                    _check_unicode(v, lambda: f"an item of property {key!r} of {owner}")
            out[key] = list(value)
        elif isinstance(value, (str, int, float, bool)):
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidValueError(f"property {key!r} of {owner} must be finite")
            if isinstance(value, str):
                _check_unicode(value, lambda: f"property {key!r} of {owner}")
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
    _check_unicode(id, lambda: f"node id {id[:40]!r}")
    return id


def _check_unicode(text: str, what: Callable[[], str]) -> None:
    """[graph.text.unicode]; ``what()`` names the value (built only on failure)."""
    if not valid_unicode(text):
        raise InvalidValueError(
            f"{what()} holds a lone surrogate (not valid Unicode); clean it first (ragkit.core.text.clean)"
        )
