"""The graph differential state machine: random graph operations against the
adapter and plain dicts (drop, reopen and the count invariant's place are
``base.machine``'s)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from ragkit.errors import InvalidValueError
from ragkit.protocols.graph import edge_key
from ragkit.testing.contracts.base.contract import difference
from ragkit.testing.contracts.base.machine import StoreMachine, run_machine
from ragkit.testing.contracts.graph.query import all_edges, all_nodes


# Confusables too ([store.keys.exact]): case, NFC/NFD, final sigma.
_NODE_POOL = ["a", "b", "C", "c", "Δ", "中文", "🙂", "q'\"`{}", "\u00e9", "e\u0301", "\u03c3", "\u03c2"]
_NODE = st.sampled_from(_NODE_POOL)
_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=8)
_INT = st.integers(-(2**53), 2**53)
_FLOAT = st.floats(allow_nan=False, allow_infinity=False)
_VALUE = (
    st.booleans() | _INT | _FLOAT | _TEXT
    | st.lists(_INT, max_size=3) | st.lists(_TEXT, max_size=3) | st.lists(_FLOAT, max_size=3)
)
_PROPS = st.dictionaries(st.sampled_from(["w", "name", "描述", "tags", "k e y"]), _VALUE, max_size=3)
_PAIR = st.tuples(_NODE, _NODE)


def _reference_subgraph(nodes, edges, start, max_depth, max_nodes):
    """The docstring's BFS, on plain dicts."""
    if start not in nodes:
        return [], [], False
    adj: dict[str, set[str]] = {n: set() for n in nodes}
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    order, seen, frontier, truncated = [start], {start}, [start], False
    for _ in range(max_depth):
        nxt = sorted({o for n in frontier for o in adj[n]} - seen, key=lambda n: (-len(adj[n]), n))
        if not nxt:
            break
        room = max_nodes - len(order)
        if len(nxt) > room:
            truncated, nxt = True, nxt[:room]
        order += nxt
        seen.update(nxt)
        frontier = nxt
        if truncated:
            break
    keys = sorted(k for k in edges if k[0] in seen and k[1] in seen)
    return order, keys, truncated


class GraphMachine(StoreMachine):
    """Random graph operations against the adapter and plain dicts."""

    drop_above = 3

    def __init__(self) -> None:
        super().__init__()
        self.nodes: dict[str, dict[str, Any]] = {}
        self.edges: dict[tuple[str, str], dict[str, Any]] = {}

    def size(self) -> int:
        return len(self.nodes)

    def forget_all(self) -> None:
        self.nodes.clear()
        self.edges.clear()

    def check_counts(self) -> None:
        """Node and edge counts, and every node's degree, after every step."""
        got = (self.run(self.store.node_count()), self.run(self.store.edge_count()))
        assert got == (len(self.nodes), len(self.edges)), f"(node_count, edge_count) = {got}"
        names = [*_NODE_POOL, "never"]
        degrees = dict(zip(names, self.run(self.store.degrees(names))))
        expected = {n: self.degree(n) for n in names}
        assert degrees == expected, f"degrees {degrees} != {expected}"

    def degree(self, n: str) -> int:
        return sum(1 for k in self.edges if n in k)

    @initialize(
        nodes=st.dictionaries(_NODE, _PROPS, max_size=3),
        edges=st.lists(st.tuples(_NODE, _NODE, _PROPS), min_size=2, max_size=5, unique_by=lambda e: edge_key(e[0], e[1])),
    )
    def seed(self, nodes, edges):
        if nodes:
            self.upsert_nodes(nodes)
        self.upsert_edges(edges)  # start every example with a graph

    @rule(batch=st.dictionaries(_NODE, _PROPS, min_size=1, max_size=3))
    def upsert_nodes(self, batch):
        self.run(self.store.upsert_nodes(batch))
        self.nodes.update(copy.deepcopy(batch))

    @rule(batch=st.lists(st.tuples(_NODE, _NODE, _PROPS), min_size=1, max_size=3, unique_by=lambda e: edge_key(e[0], e[1])))
    def upsert_edges(self, batch):
        self.run(self.store.upsert_edges(batch))
        for a, b, props in batch:
            self.nodes.setdefault(a, {})
            self.nodes.setdefault(b, {})
            self.edges[edge_key(a, b)] = copy.deepcopy(props)

    @rule(node=_NODE, bad=st.sampled_from([None, {"d": 1}, [[1]], [True]]))
    def upsert_invalid(self, node, bad):
        with pytest.raises(InvalidValueError):
            self.run(self.store.upsert_nodes({node: {"k": bad}}))
        with pytest.raises(InvalidValueError):
            self.run(self.store.upsert_edges([(node, "a", {"k": bad})]))

    @rule(ids=st.lists(_NODE | st.just("never"), max_size=2))
    def delete_nodes(self, ids):
        self.run(self.store.delete_nodes(ids))
        for n in ids:
            self.nodes.pop(n, None)
            self.edges = {k: v for k, v in self.edges.items() if n not in k}

    @precondition(lambda self: bool(self.edges))
    @rule(data=st.data(), reverse=st.booleans())
    def delete_existing_edge(self, data, reverse):
        a, b = data.draw(st.sampled_from(sorted(self.edges)), label="existing edge")
        self.delete_edges([(b, a) if reverse else (a, b)])

    @precondition(lambda self: bool(self.edges))
    @rule(data=st.data())
    def delete_connected_node(self, data):
        a, b = data.draw(st.sampled_from(sorted(self.edges)), label="edge of the node")
        self.delete_nodes([data.draw(st.sampled_from([a, b]), label="node")])

    @rule(pairs=st.lists(_PAIR, max_size=3))
    def delete_edges(self, pairs):
        self.run(self.store.delete_edges(pairs))
        for a, b in pairs:
            self.edges.pop(edge_key(a, b), None)

    @rule(ids=st.lists(_NODE | st.just("never"), max_size=5))
    def get_nodes(self, ids):
        diff = difference([self.nodes.get(n) for n in ids], self.run(self.store.get_nodes(ids)))
        assert diff is None, f"get_nodes({ids!r}): {diff}"

    @rule(pairs=st.lists(_PAIR, max_size=5))
    def get_edges(self, pairs):
        expected = [self.edges.get(edge_key(a, b)) for a, b in pairs]
        diff = difference(expected, self.run(self.store.get_edges(pairs)))
        assert diff is None, f"get_edges({pairs!r}): {diff}"

    @rule(ids=st.lists(_NODE | st.just("never"), max_size=5))
    def nodes_edges_and_degrees(self, ids):
        expected = [
            sorted(k for k in self.edges if n in k) if n in self.nodes else None for n in ids
        ]
        got = [None if e is None else [tuple(k) for k in e] for e in self.run(self.store.nodes_edges(ids))]
        assert got == expected, f"nodes_edges({ids!r}): expected {expected}, got {got}"
        degrees = self.run(self.store.degrees(ids))
        assert degrees == [self.degree(n) for n in ids], f"degrees({ids!r}) = {degrees}"

    @rule(ids=st.lists(_NODE | st.just("never"), max_size=4), pairs=st.lists(_PAIR, max_size=3),
          incident=st.booleans())
    def context(self, ids, pairs, incident):
        ctx = self.run(self.store.context(ids, pairs, incident))
        asked = [edge_key(a, b) for a, b in pairs]
        keys = {k for k in asked if k in self.edges}
        if incident:
            keys |= {k for k in self.edges if k[0] in ids or k[1] in ids}
        named = {*ids, *(n for k in asked for n in k)}
        assert difference({n: self.nodes[n] for n in named if n in self.nodes}, ctx.nodes) is None, \
            f"context nodes {ctx.nodes}"
        assert difference({repr(k): self.edges[k] for k in keys}, {repr(k): v for k, v in ctx.edges.items()}) is None, \
            f"context({ids!r}, {pairs!r}, {incident}) edges {sorted(ctx.edges)} != {sorted(keys)}"
        assert ctx.degrees == {n: self.degree(n) for n in named | {n for k in keys for n in k}}, ctx.degrees
        expected = {n: sorted(k for k in self.edges if n in k) for n in ids if n in self.nodes} if incident else {}
        assert ctx.incident == expected, f"context incident {ctx.incident} != {expected}"

    @rule()
    def scans(self):
        nodes = self.run(all_nodes(self.store))
        assert difference(self.nodes, nodes) is None, f"nodes(): {difference(self.nodes, nodes)}"
        edges = self.run(all_edges(self.store))
        assert difference(
            {repr(k): v for k, v in self.edges.items()}, {repr(k): v for k, v in edges.items()}
        ) is None, f"edges() {sorted(edges)} != {sorted(self.edges)}"

    @rule(start=_NODE, max_depth=st.integers(0, 3), max_nodes=st.integers(1, 8))
    def subgraph(self, start, max_depth, max_nodes):
        order, keys, truncated = _reference_subgraph(self.nodes, self.edges, start, max_depth, max_nodes)
        sub = self.run(self.store.subgraph(start, max_depth, max_nodes))
        assert [n.id for n in sub.nodes] == order, f"subgraph nodes {[n.id for n in sub.nodes]} != {order}"
        assert [e.key for e in sub.edges] == keys, f"subgraph edges {[e.key for e in sub.edges]} != {keys}"
        assert sub.truncated == truncated, f"subgraph truncated={sub.truncated}, expected {truncated}"
        for n in sub.nodes:
            assert difference(self.nodes[n.id], n.properties) is None
        for e in sub.edges:
            assert difference(self.edges[e.key], e.properties) is None

    @rule(query=st.sampled_from(["a", "A", "c", "中", "🙂", "'", "", "zz"]), limit=st.integers(1, 8))
    def search_labels(self, query, limit):
        q = query.casefold()
        expected = sorted(
            (n for n in self.nodes if q in n.casefold()),
            key=lambda s: (s.casefold() != q, not s.casefold().startswith(q), len(s), s),
        )[:limit]
        assert self.run(self.store.search_labels(query, limit)) == expected
        assert self.run(self.store.labels()) == sorted(self.nodes)


class GraphStateMachineTests:
    def test_differential_state_machine(self, adapter):
        """Random sequences of node/edge upserts (reversed pairs, self-loops,
        invalid values), deletes, batch reads, degrees, nodes_edges, scans,
        subgraph, label search, drop and (if PERSISTENT) close/reopen agree with
        a plain adjacency model; node and edge counts and every node's degree
        are compared after every step.

        Troubleshoot: hypothesis prints the shortest failing step sequence;
        replay it against the adapter.
        """
        run_machine(GraphMachine, adapter)
