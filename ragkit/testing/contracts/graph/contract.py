"""``GraphStoreContract``: what every ``GraphStore`` adapter must do (see
``ragkit.protocols.graph.GraphStore`` for the normative text)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from ragkit.errors import InvalidValueError, StoreClosedError
from ragkit.protocols.base import Capability
from ragkit.protocols.graph import GraphStore, edge_key
from ragkit.schema import Subgraph
from ragkit.testing.contracts._base import (
    AsyncStoreMachine,
    StoreContractBase,
    collect,
    contract,
    difference,
    needs,
    reopened,
    run_machine,
    sibling,
)
from ragkit.testing.contracts.edge_cases import GraphEdgeCaseTests
from ragkit.testing.contracts.fencing import FencingTests
from ragkit.testing.contracts.rules import checks

ODD_IDS = ["中文实体", "🙂 emoji", "q'\"`", "{braces}", "back\\slash", "  spaced  ", "ЖУК", "a:b/c"]


async def _edges(store: GraphStore) -> dict[tuple[str, str], dict[str, Any]]:
    """Every edge from the ``edges()`` scan, checking each comes once and canonical."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    async for e in store.edges():
        assert e.source <= e.target, f"edges() yielded ({e.source!r}, {e.target!r}), not canonical (source <= target)"
        assert e.key not in out, f"edges() yielded edge {e.key!r} more than once"
        out[e.key] = dict(e.properties)
    return out


async def _nodes(store: GraphStore) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    async for n in store.nodes():
        assert n.id not in out, f"nodes() yielded node {n.id!r} more than once"
        out[n.id] = dict(n.properties)
    return out


async def _degrees(store: GraphStore, expected: Mapping[str, int]) -> None:
    names = list(expected)
    got = dict(zip(names, await store.degrees(names)))
    assert got == dict(expected), f"degrees: expected {dict(expected)}, got {got}"


class GraphNodeTests:
    @checks("graph.missing-vs-isolated", "graph.batch.order")
    async def test_get_nodes_keeps_order_and_none_for_missing(self, adapter):
        """``get_nodes`` returns one entry per asked id, in order (duplicates
        included), ``None`` where missing; ``get_node``/``has_node`` agree.

        Troubleshoot: index the backend's rows by id and rebuild the list from
        the asked ids.
        """
        await adapter.upsert_nodes({"a": {"v": 1}, "b": {"v": 2}})
        got = await adapter.get_nodes(["b", "x", "a", "b"])
        assert difference([{"v": 2}, None, {"v": 1}, {"v": 2}], got) is None, got
        assert await adapter.get_nodes([]) == []
        assert await adapter.get_node("x") is None
        assert await adapter.has_node("a") and not await adapter.has_node("x")

    @checks("graph.upsert.replaces")
    async def test_upsert_node_replaces_properties(self, adapter):
        """Upserting an existing node replaces its properties whole (no merge);
        an empty mapping leaves a node with no properties.

        Troubleshoot: ``SET n = $props`` (Cypher), not ``SET n += $props``.
        """
        await adapter.upsert_node("a", {"x": 1, "y": "two"})
        await adapter.upsert_node("a", {"x": 3})
        assert difference({"x": 3}, await adapter.get_node("a")) is None
        await adapter.upsert_node("a", {})
        assert difference({}, await adapter.get_node("a")) is None
        assert await adapter.node_count() == 1

    @checks("graph.properties.types")
    async def test_property_types_round_trip(self, adapter):
        """Every allowed property type round-trips with its type: str, int,
        float, bool (not 1), and lists of str, int and float.

        Troubleshoot: keep booleans and ints distinct and lists as lists.
        """
        props = {
            "s": "text", "i": 7, "neg": -3, "f": 2.5, "whole": 3.0, "t": True, "fa": False,
            "ls": ["a", "b"], "li": [1, 2, 3], "lf": [0.5, 1.5], "empty": [], "blank": "",
        }
        await adapter.upsert_node("n", props)
        await adapter.upsert_edge("n", "m", props)
        assert difference(props, await adapter.get_node("n")) is None, await adapter.get_node("n")
        assert difference(props, await adapter.get_edge("m", "n")) is None
        scanned = await _nodes(adapter)
        assert difference(props, scanned["n"]) is None, "nodes() changed property types"
        assert difference(props, (await _edges(adapter))[("m", "n")]) is None

    async def test_returned_properties_are_copies_and_input_is_kept(self, adapter):
        """Mutating returned properties (and their lists) does not change the
        store; ``upsert`` neither mutates nor keeps the caller's mapping.

        Troubleshoot: copy property dicts and lists on the way in and out.
        """
        props = {"tags": ["a"], "v": 1}
        before = copy.deepcopy(props)
        await adapter.upsert_nodes({"a": props})
        await adapter.upsert_edges([("a", "b", props)])
        assert props == before, "upsert mutated the caller's properties"
        props["tags"].append("changed")
        props["v"] = 2
        got = await adapter.get_node("a")
        got["tags"].append("mutated")
        got["new"] = True
        edge = await adapter.get_edge("a", "b")
        edge["tags"].append("mutated")
        async for n in adapter.nodes():
            n.properties.setdefault("tags", []).append("mutated")
        assert difference(before, await adapter.get_node("a")) is None
        assert difference(before, await adapter.get_edge("a", "b")) is None

    @checks("graph.node-ids.any-str")
    async def test_odd_node_ids(self, adapter):
        """Node ids with CJK, emoji, quotes, backticks, braces, backslashes,
        colons and surrounding spaces work everywhere: upsert, get, edges, degree,
        scans, delete.

        Troubleshoot: pass ids as query parameters, never interpolated into
        Cypher/SQL; do not strip or normalise them.
        """
        await adapter.upsert_nodes({i: {"name": i} for i in ODD_IDS})
        await adapter.upsert_edges([(ODD_IDS[i], ODD_IDS[i + 1], {"i": i}) for i in range(len(ODD_IDS) - 1)])
        got = await adapter.get_nodes(ODD_IDS)
        assert got == [{"name": i} for i in ODD_IDS]
        assert set(await _nodes(adapter)) == set(ODD_IDS)
        assert await adapter.degrees(ODD_IDS) == [1] + [2] * (len(ODD_IDS) - 2) + [1]
        assert await adapter.labels() == sorted(ODD_IDS)
        assert await adapter.get_edge(ODD_IDS[1], ODD_IDS[0]) == {"i": 0}
        await adapter.delete_node(ODD_IDS[1])
        assert await adapter.get_edge(ODD_IDS[0], ODD_IDS[1]) is None
        assert await adapter.node_count() == len(ODD_IDS) - 1

    async def test_large_property_values(self, adapter):
        """A 1 MB string property (ASCII and CJK) and a 10,000-item list on a node
        and an edge round-trip unchanged.

        Troubleshoot: use unbounded string/list property types.
        """
        props = {"desc": "d" * (1024 * 1024), "cjk": "描述" * 100_000, "ids": [f"chunk-{i}" for i in range(10_000)]}
        await adapter.upsert_node("big", props)
        await adapter.upsert_edge("big", "other", props)
        assert difference(props, await adapter.get_node("big")) is None
        assert difference(props, await adapter.get_edge("other", "big")) is None

    @pytest.mark.parametrize(
        "bad",
        [
            pytest.param({"k": None}, id="none"),
            pytest.param({"k": {"nested": 1}}, id="dict"),
            pytest.param({"k": [[1, 2]]}, id="nested-list"),
            pytest.param({"k": [True, False]}, id="list-of-bool"),
            pytest.param({"k": [1, None]}, id="list-with-none"),
            pytest.param({"k": float("nan")}, id="nan"),
            pytest.param({"k": float("inf")}, id="inf"),
            pytest.param({"": 1}, id="empty-key"),
            pytest.param({1: "x"}, id="int-key"),
            pytest.param({"k": b"bytes"}, id="bytes"),
            pytest.param({"k": (1, 2)}, id="tuple"),
        ],
    )
    @checks("graph.properties.types")
    async def test_invalid_property_values_are_rejected(self, adapter, bad):
        """``None``, dicts, nested lists, lists of bools or with None, non-finite
        floats, bytes, tuples and empty/non-str keys raise ``InvalidValueError``,
        for nodes and edges, and the rejected node or edge is not created (an
        existing one keeps its properties).

        Troubleshoot: validate with ``ragkit.protocols.graph.check_properties``
        before writing.
        """
        await adapter.upsert_node("kept", {"v": 1})
        with pytest.raises(InvalidValueError):
            await adapter.upsert_node("new", bad)
        with pytest.raises(InvalidValueError):
            await adapter.upsert_node("kept", bad)
        with pytest.raises(InvalidValueError):
            await adapter.upsert_edge("x", "y", bad)
        assert await adapter.get_nodes(["new", "kept", "x", "y"]) == [None, {"v": 1}, None, None]
        assert await adapter.edge_count() == 0

    async def test_empty_node_id_is_rejected(self, adapter):
        """An empty node id raises ``InvalidValueError`` (as a node or an edge
        endpoint) and creates nothing.

        Troubleshoot: validate ids with ``check_node_id``.
        """
        with pytest.raises(InvalidValueError):
            await adapter.upsert_node("", {})
        with pytest.raises(InvalidValueError):
            await adapter.upsert_edge("a", "", {})
        assert await adapter.node_count() == 0


class GraphEdgeTests:
    @checks("graph.undirected")
    async def test_edges_are_undirected(self, adapter):
        """(a, b) and (b, a) are one edge: upserting (b, a) replaces (a, b)'s
        properties, ``get_edges`` finds it both ways, it is counted once.

        Troubleshoot: store edges under their canonical key ``edge_key(a, b)``,
        or match both directions in reads, writes and deletes.
        """
        await adapter.upsert_edge("a", "b", {"w": 1, "old": True})
        await adapter.upsert_edge("b", "a", {"w": 2})
        assert await adapter.edge_count() == 1
        assert await adapter.get_edges([("a", "b"), ("b", "a")]) == [{"w": 2}, {"w": 2}]
        assert await adapter.has_edge("b", "a")
        assert await adapter.nodes_edges(["a", "b"]) == [[("a", "b")], [("a", "b")]]
        assert await _edges(adapter) == {("a", "b"): {"w": 2}}

    @checks("graph.batch.order")
    async def test_get_edges_keeps_order_and_none_for_missing(self, adapter):
        """``get_edges`` returns one entry per asked pair, in order, ``None`` for
        missing edges (including between existing nodes and to missing nodes).

        Troubleshoot: rebuild the result list from the asked pairs.
        """
        await adapter.upsert_edges([("a", "b", {"n": 1}), ("b", "c", {"n": 2})])
        got = await adapter.get_edges([("c", "b"), ("a", "c"), ("a", "zz"), ("a", "b"), ("b", "c")])
        assert got == [{"n": 2}, None, None, {"n": 1}, {"n": 2}]
        assert await adapter.get_edges([]) == []

    @checks("graph.upsert.replaces")
    async def test_upsert_edge_creates_missing_endpoints(self, adapter):
        """Upserting an edge creates missing endpoints as nodes with no
        properties, and leaves existing endpoints' properties alone.

        Troubleshoot: ``MERGE`` endpoints without setting their properties.
        """
        await adapter.upsert_node("a", {"keep": "me"})
        await adapter.upsert_edge("a", "new", {"w": 1})
        assert await adapter.get_nodes(["a", "new"]) == [{"keep": "me"}, {}]
        assert await adapter.node_count() == 2

    @checks("graph.upsert.replaces")
    async def test_upsert_edge_replaces_properties(self, adapter):
        """Upserting an existing edge replaces its properties whole (no merge).

        Troubleshoot: ``SET r = $props``, not ``SET r += $props``.
        """
        await adapter.upsert_edge("a", "b", {"x": 1, "y": 2})
        await adapter.upsert_edge("a", "b", {"y": 3})
        assert await adapter.get_edge("a", "b") == {"y": 3}

    @checks("graph.self-loops")
    async def test_self_loops(self, adapter):
        """A self-loop (a, a) is an edge: stored once, counted once in
        ``edge_count`` and in a's degree, listed once by ``nodes_edges`` and
        ``edges()``, and removed with a or by ``delete_edge``.

        Troubleshoot: backends that count both ends of a loop report degree 2;
        count distinct edges touching the node.
        """
        await adapter.upsert_edge("a", "a", {"loop": True})
        await adapter.upsert_edge("a", "b", {})
        assert await adapter.edge_count() == 2
        await _degrees(adapter, {"a": 2, "b": 1})
        assert await adapter.node_edges("a") == [("a", "a"), ("a", "b")]
        assert await adapter.get_edge("a", "a") == {"loop": True}
        assert await _edges(adapter) == {("a", "a"): {"loop": True}, ("a", "b"): {}}
        await adapter.delete_edge("a", "a")
        await _degrees(adapter, {"a": 1, "b": 1})
        await adapter.upsert_edge("b", "b", {})
        await adapter.delete_node("b")
        assert await adapter.edge_count() == 0
        await _degrees(adapter, {"a": 0, "b": 0})

    @checks("graph.missing-vs-isolated")
    async def test_nodes_edges_tells_missing_from_isolated(self, adapter):
        """``nodes_edges`` gives ``None`` for a missing node and ``[]`` for a node
        without edges; edges are canonical keys sorted ascending.

        Troubleshoot: check the node exists before collecting its edges.
        """
        await adapter.upsert_node("lonely", {})
        await adapter.upsert_edges([("m", "c", {}), ("m", "a", {}), ("z", "m", {})])
        got = await adapter.nodes_edges(["missing", "lonely", "m"])
        assert got == [None, [], [("a", "m"), ("c", "m"), ("m", "z")]]
        assert await adapter.node_edges("missing") is None
        assert await adapter.node_edges("lonely") == []


class GraphDegreeTests:
    @checks("graph.degree")
    async def test_degree_after_every_mutation(self, adapter):
        """Degrees (distinct edges touching a node; 0 for missing nodes) are
        right after every edge insert, reverse re-insert, node upsert, edge
        delete, neighbour delete and drop; ``edge_degrees`` is deg(a) + deg(b).

        Troubleshoot: a degree cache must be updated by *every* mutation (delete
        of a neighbour included); otherwise compute degree from the edges.
        """
        await _degrees(adapter, {"a": 0})
        await adapter.upsert_edge("a", "b", {})
        await _degrees(adapter, {"a": 1, "b": 1, "c": 0})
        await adapter.upsert_edge("b", "a", {"w": 1})
        await _degrees(adapter, {"a": 1, "b": 1})
        await adapter.upsert_edges([("a", "c", {}), ("c", "d", {})])
        await _degrees(adapter, {"a": 2, "b": 1, "c": 2, "d": 1})
        await adapter.upsert_node("a", {"props": "do not change degree"})
        await _degrees(adapter, {"a": 2})
        assert await adapter.edge_degrees([("a", "c"), ("d", "c")]) == [4, 3]
        await adapter.delete_edge("c", "a")
        await _degrees(adapter, {"a": 1, "b": 1, "c": 1, "d": 1})
        await adapter.delete_edge("c", "a")  # already gone
        await _degrees(adapter, {"a": 1, "c": 1})
        await adapter.delete_node("b")
        await _degrees(adapter, {"a": 0, "b": 0, "c": 1, "d": 1})
        await adapter.drop()
        await _degrees(adapter, {"a": 0, "c": 0, "d": 0})


class GraphDeleteTests:
    @checks("graph.delete.cascades")
    async def test_deleting_a_node_deletes_its_edges(self, adapter):
        """Deleting a node removes it and every edge touching it (neighbours stay,
        with fewer edges); the other edges are untouched.

        Troubleshoot: ``DETACH DELETE`` (Cypher) or delete the node's edges in
        the same transaction.
        """
        await adapter.upsert_edges([("hub", "a", {}), ("b", "hub", {}), ("a", "b", {"keep": 1})])
        await adapter.delete_nodes(["hub"])
        assert await adapter.get_nodes(["hub", "a", "b"]) == [None, {}, {}]
        assert await adapter.get_edges([("hub", "a"), ("b", "hub"), ("a", "b")]) == [None, None, {"keep": 1}]
        assert await adapter.nodes_edges(["a", "b"]) == [[("a", "b")], [("a", "b")]]
        assert (await adapter.node_count(), await adapter.edge_count()) == (2, 1)
        assert await _edges(adapter) == {("a", "b"): {"keep": 1}}

    @checks("graph.undirected")
    async def test_delete_edges_in_either_direction(self, adapter):
        """``delete_edges`` removes an edge given as (a, b) or (b, a) and keeps
        both endpoints as nodes.

        Troubleshoot: canonicalise pairs before deleting.
        """
        await adapter.upsert_edges([("a", "b", {}), ("b", "c", {})])
        await adapter.delete_edges([("b", "a"), ("b", "c")])
        assert await adapter.edge_count() == 0
        assert await adapter.node_count() == 3
        assert await adapter.nodes_edges(["a", "b", "c"]) == [[], [], []]

    @checks("store.delete.missing-ok")
    async def test_deleting_missing_things_is_not_an_error(self, adapter):
        """Deleting missing nodes and edges (between missing nodes, between
        existing but unconnected nodes, or empty lists) does not raise or change
        anything.

        Troubleshoot: ignore "not found" instead of raising.
        """
        await adapter.delete_nodes(["nope"])
        await adapter.delete_edges([("nope", "nada")])
        await adapter.delete_nodes([])
        await adapter.delete_edges([])
        await adapter.upsert_edge("a", "b", {})
        await adapter.upsert_node("c", {})
        await adapter.delete_edges([("a", "c"), ("c", "zz"), ("a", "b"), ("a", "b")])
        await adapter.delete_nodes(["zz", "zz"])
        assert (await adapter.node_count(), await adapter.edge_count()) == (3, 0)

    async def test_deleted_node_can_be_recreated(self, adapter):
        """A deleted node can be upserted again; it comes back without its old
        edges or properties.

        Troubleshoot: do not keep stale edges or properties of deleted nodes.
        """
        await adapter.upsert_node("a", {"old": 1})
        await adapter.upsert_edge("a", "b", {})
        await adapter.delete_node("a")
        await adapter.upsert_node("a", {"new": 2})
        assert await adapter.get_node("a") == {"new": 2}
        assert await adapter.node_edges("a") == []
        assert await adapter.degree("b") == 0


class GraphScanAndCountTests:
    @checks("graph.scans.once")
    async def test_counts_after_every_mutation(self, adapter):
        """``node_count`` and ``edge_count`` are right after each node and edge
        upsert, replace, reverse upsert, deletes of present and missing items,
        node delete with edges, and drop.

        Troubleshoot: count stored nodes/edges, not operations.
        """

        async def counts():
            return (await adapter.node_count(), await adapter.edge_count())

        assert await counts() == (0, 0)
        await adapter.upsert_nodes({"a": {}, "b": {}})
        assert await counts() == (2, 0)
        await adapter.upsert_edges([("a", "b", {}), ("b", "c", {})])
        assert await counts() == (3, 2)
        await adapter.upsert_edges([("b", "a", {"w": 1}), ("c", "c", {})])
        assert await counts() == (3, 3)
        await adapter.delete_edges([("a", "c"), ("c", "c")])
        assert await counts() == (3, 2)
        await adapter.delete_nodes(["b", "nope"])
        assert await counts() == (2, 0)
        await adapter.drop()
        assert await counts() == (0, 0)

    @checks("graph.scans.once")
    async def test_scans_yield_everything_once(self, adapter):
        """``nodes()`` yields every node once and ``edges()`` every edge once with
        ``source <= target``, with their properties; both agree with the counts
        (300 nodes, a dense neighbourhood, self-loops and reverse upserts).

        Troubleshoot: an undirected scan over both directions of adjacency
        reports each edge twice; emit only the canonical orientation.
        """
        names = [f"n{i:03d}" for i in range(300)]
        await adapter.upsert_nodes({n: {"i": i} for i, n in enumerate(names)})
        edges = {}
        for i in range(300):
            a, b = names[i], names[(i * 7 + 3) % 300]
            edges[edge_key(a, b)] = {"i": i}
            await adapter.upsert_edge(b, a, {"i": i})  # reversed on purpose
        nodes = await _nodes(adapter)
        assert nodes == {n: {"i": i} for i, n in enumerate(names)}
        scanned = await _edges(adapter)
        assert scanned == edges
        assert (await adapter.node_count(), await adapter.edge_count()) == (300, len(edges))


class GraphQueryTests:
    async def _chain(self, adapter):
        # root - {a1, a2, a3}; a1 - {b1, b2}; a2 - b3; b1 - c1; a3 - a1 (same level)
        await adapter.upsert_nodes({"root": {"level": 0}, "isolated": {}})
        await adapter.upsert_edges(
            [
                ("root", "a1", {"w": 1}), ("a2", "root", {"w": 2}), ("root", "a3", {}),
                ("a1", "b1", {}), ("a1", "b2", {}), ("b3", "a2", {}), ("b1", "c1", {}),
                ("a3", "a1", {}), ("c1", "c1", {"loop": True}),
            ]
        )

    async def test_subgraph_levels_ordering_and_edges(self, adapter):
        """``subgraph`` takes nodes level by level, within a level by degree
        descending then id; keeps every edge between kept nodes (sorted keys,
        with properties); matches ``GraphStore.subgraph``'s reference result.

        Troubleshoot: adapters overriding ``subgraph`` for speed must reproduce
        the base implementation exactly (ordering, truncation, edges).
        """
        await self._chain(adapter)
        sub = await adapter.subgraph("root", max_depth=2)
        assert [n.id for n in sub.nodes] == ["root", "a1", "a2", "a3", "b1", "b2", "b3"]
        assert sub.nodes[0].properties == {"level": 0}
        assert [e.key for e in sub.edges] == sorted(
            [("a1", "root"), ("a2", "root"), ("a3", "root"), ("a1", "b1"), ("a1", "b2"), ("a2", "b3"), ("a1", "a3")]
        )
        assert not sub.truncated
        assert sub == await GraphStore.subgraph(adapter, "root", max_depth=2)
        deep = await adapter.subgraph("root", max_depth=5)
        assert [n.id for n in deep.nodes][-1] == "c1" and ("c1", "c1") in [e.key for e in deep.edges]
        assert deep == await GraphStore.subgraph(adapter, "root", max_depth=5)

    async def test_subgraph_truncation(self, adapter):
        """``max_nodes`` cuts the neighbourhood (keeping the highest-degree nodes
        of the last level) and sets ``truncated``; exactly enough room does not
        set it; ``max_depth=0`` is the node alone.

        Troubleshoot: set ``truncated`` only when nodes within ``max_depth`` were
        left out.
        """
        await self._chain(adapter)
        cut = await adapter.subgraph("root", max_depth=2, max_nodes=3)
        assert [n.id for n in cut.nodes] == ["root", "a1", "a2"] and cut.truncated
        assert [e.key for e in cut.edges] == [("a1", "root"), ("a2", "root")]
        exact = await adapter.subgraph("root", max_depth=1, max_nodes=4)
        assert [n.id for n in exact.nodes] == ["root", "a1", "a2", "a3"] and not exact.truncated
        full = await adapter.subgraph("root", max_depth=2, max_nodes=7)
        assert len(full.nodes) == 7 and not full.truncated
        alone = await adapter.subgraph("root", max_depth=0)
        assert [n.id for n in alone.nodes] == ["root"] and alone.edges == [] and not alone.truncated
        for args in [(2, 3), (1, 4), (2, 7), (0, 1000)]:
            assert await adapter.subgraph("root", *args) == await GraphStore.subgraph(adapter, "root", *args)

    async def test_subgraph_of_missing_and_isolated_nodes(self, adapter):
        """A missing node gives an empty subgraph; an isolated node gives itself;
        invalid limits raise ``InvalidValueError``.

        Troubleshoot: return ``Subgraph()`` for a missing start node.
        """
        await self._chain(adapter)
        assert await adapter.subgraph("missing") == Subgraph()
        iso = await adapter.subgraph("isolated")
        assert [n.id for n in iso.nodes] == ["isolated"] and iso.edges == []
        with pytest.raises(InvalidValueError):
            await adapter.subgraph("root", max_depth=-1)
        with pytest.raises(InvalidValueError):
            await adapter.subgraph("root", max_nodes=0)

    async def test_labels_and_label_search_ordering(self, adapter):
        """``labels()`` is every id sorted; ``search_labels`` finds ids containing
        the query case-insensitively: exact matches first, then prefixes, then
        shorter ids, then alphabetical; ``limit`` cuts the list.

        Troubleshoot: adapters overriding these must match the base definitions
        in ``GraphStore`` exactly.
        """
        ids = ["Apple", "apple pie", "pineapple", "APPLE", "crab apple", "Applesauce", "pear", "苹果apple"]
        await adapter.upsert_nodes({i: {} for i in ids})
        assert await adapter.labels() == sorted(ids)
        got = await adapter.search_labels("apple")
        assert got == ["APPLE", "Apple", "apple pie", "Applesauce", "苹果apple", "pineapple", "crab apple"]
        assert await adapter.search_labels("APPLE", limit=3) == ["APPLE", "Apple", "apple pie"]
        assert await adapter.search_labels("zzz") == []
        for q in ["apple", "P", "苹", "e p"]:
            assert await adapter.search_labels(q) == await GraphStore.search_labels(adapter, q)


class GraphDropAndIsolationTests:
    @checks("store.drop.scoped")
    async def test_drop_empties_and_keeps_the_store_open(self, adapter):
        """``drop()`` removes every node and edge and leaves the store usable.

        Troubleshoot: delete only this workspace's and namespace's graph.
        """
        await adapter.upsert_edges([("a", "b", {}), ("b", "c", {})])
        await adapter.drop()
        assert (await adapter.node_count(), await adapter.edge_count()) == (0, 0)
        assert await _nodes(adapter) == {} and await _edges(adapter) == {}
        await adapter.upsert_edge("x", "y", {"after": True})
        assert await adapter.get_edge("y", "x") == {"after": True}

    @checks("store.drop.scoped")
    async def test_workspaces_and_namespaces_are_isolated(self, adapter):
        """Other workspaces and namespaces hold independent graphs with the same
        node ids: reads, degrees, counts, scans, deletes and drop never cross.

        Troubleshoot: label/partition nodes and edges by workspace and namespace
        and filter every query by both (edges included).
        """
        async with sibling(adapter, workspace=True) as ws, sibling(adapter, namespace=True) as ns:
            await adapter.upsert_edges([("a", "b", {"who": "me"})])
            await ws.upsert_edges([("a", "b", {"who": "ws"}), ("a", "c", {})])
            await ns.upsert_node("a", {"who": "ns"})
            assert await adapter.degrees(["a"]) == [1]
            assert await ws.degrees(["a"]) == [2]
            assert await ns.degrees(["a"]) == [0]
            assert await adapter.get_edge("a", "b") == {"who": "me"}
            assert (await ws.node_count(), await ws.edge_count()) == (3, 2)
            await ws.delete_node("a")
            await ns.drop()
            assert await adapter.get_edge("b", "a") == {"who": "me"}
            assert (await adapter.node_count(), await adapter.edge_count()) == (2, 1)


class GraphLifecycleTests:
    @checks("store.closed.raises")
    async def test_closed_store_raises_store_closed_error(self, adapter):
        """Using a store before ``open()`` or after ``close()`` raises
        ``StoreClosedError``; ``async with`` opens and closes it; a closed store
        opens again (and two instances are never open at once here).

        Troubleshoot: the protocol's public methods check this; a store that
        fails here replaces one (``@bypass_template``) without ``self._check_open()``
        first, or its ``_open``/``_close`` hooks leave a connection half made.
        """
        never_opened = type(adapter)(adapter.config)
        with pytest.raises(StoreClosedError):
            await never_opened.node_count()
        with pytest.raises(StoreClosedError):
            await never_opened.upsert_node("a", {})
        await adapter.close()
        assert not adapter.is_open
        with pytest.raises(StoreClosedError):
            await adapter.get_nodes(["a"])
        with pytest.raises(StoreClosedError):
            await collect(adapter.edges())
        async with type(adapter)(adapter.config) as opened:
            assert opened.is_open
            await opened.upsert_edge("a", "b", {})
            await opened.drop()
        assert not opened.is_open
        with pytest.raises(StoreClosedError):
            await opened.edge_count()
        await adapter.open()
        assert adapter.is_open and await adapter.node_count() == 0

    @needs(Capability.PERSISTENT)
    @checks("store.close.durable")
    async def test_data_survives_close_and_reopen(self, adapter):
        """(PERSISTENT) Nodes, edges, properties, self-loops and deletions made
        before ``close()`` are seen by a new instance over the same config, and
        by the first one reopened.

        Troubleshoot: ``close()`` must flush; ``open()`` must load the saved graph.
        """
        await adapter.upsert_nodes({"中文": {"t": "🙂", "l": [1, 2]}, "gone": {}})
        await adapter.upsert_edges([("b", "中文", {"w": 0.5}), ("b", "b", {"loop": True}), ("b", "gone", {})])
        await adapter.delete_node("gone")
        expected_nodes = {"中文": {"t": "🙂", "l": [1, 2]}, "b": {}}
        expected_edges = {("b", "中文"): {"w": 0.5}, ("b", "b"): {"loop": True}}
        async with reopened(adapter) as again:
            assert await _nodes(again) == expected_nodes
            assert await _edges(again) == expected_edges
            assert await again.degrees(["b", "中文", "gone"]) == [2, 1, 0]
        assert await _nodes(adapter) == expected_nodes
        assert await _edges(adapter) == expected_edges


class GraphConcurrencyTests:
    @needs(Capability.CONCURRENT_WRITES)
    async def test_concurrent_writers_lose_no_updates(self, adapter):
        """(CONCURRENT_WRITES) 40 asyncio tasks adding edges to one shared hub and
        to their own nodes at once lose no update: the hub's degree, the counts
        and every property are exact.

        Troubleshoot: read-modify-write of shared state (a cached graph saved
        back whole, a degree counter) across an ``await`` loses updates.
        """

        async def writer(t: int) -> None:
            for i in range(5):
                await adapter.upsert_edge("hub", f"t{t}-{i}", {"t": t, "i": i})
                await asyncio.sleep(0)
                await adapter.upsert_node(f"t{t}-{i}", {"done": True})
            await adapter.delete_edge(f"t{t}-0", "hub")

        await asyncio.gather(*(writer(t) for t in range(40)))
        assert await adapter.degree("hub") == 40 * 4
        assert (await adapter.node_count(), await adapter.edge_count()) == (1 + 200, 160)
        names = [f"t{t}-{i}" for t in range(40) for i in range(5)]
        assert await adapter.get_nodes(names) == [{"done": True}] * 200
        edges = await _edges(adapter)
        assert edges == {edge_key("hub", f"t{t}-{i}"): {"t": t, "i": i} for t in range(40) for i in range(1, 5)}


# -- differential state machine ----------------------------------------------------

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


class GraphMachine(AsyncStoreMachine):
    """Random graph operations against the adapter and plain dicts."""

    def __init__(self) -> None:
        super().__init__()
        self.nodes: dict[str, dict[str, Any]] = {}
        self.edges: dict[tuple[str, str], dict[str, Any]] = {}

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

    @rule()
    def scans(self):
        nodes = self.run(_nodes(self.store))
        assert difference(self.nodes, nodes) is None, f"nodes(): {difference(self.nodes, nodes)}"
        edges = self.run(_edges(self.store))
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

    @precondition(lambda self: len(self.nodes) > 3)
    @rule()
    def drop(self):
        self.run(self.store.drop())
        self.nodes.clear()
        self.edges.clear()

    @precondition(lambda self: self.may_reopen(bool(self.nodes)))
    @rule()
    def reopen(self):
        self.reopen_store()

    @invariant()
    def counts_and_degrees_match(self):
        got = (self.run(self.store.node_count()), self.run(self.store.edge_count()))
        assert got == (len(self.nodes), len(self.edges)), f"(node_count, edge_count) = {got}"
        names = [*_NODE_POOL, "never"]
        degrees = dict(zip(names, self.run(self.store.degrees(names))))
        expected = {n: self.degree(n) for n in names}
        assert degrees == expected, f"degrees {degrees} != {expected}"


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


@contract("graph", GraphStore)
class GraphStoreContract(
    # Collected bottom-up: node tests run first, the state machine last.
    GraphStateMachineTests,
    GraphEdgeCaseTests,
    FencingTests,
    GraphConcurrencyTests,
    GraphLifecycleTests,
    GraphDropAndIsolationTests,
    GraphQueryTests,
    GraphScanAndCountTests,
    GraphDeleteTests,
    GraphDegreeTests,
    GraphEdgeTests,
    GraphNodeTests,
    StoreContractBase,
):
    """The graph-store contract. Subclass it and override one fixture::

        class TestMyGraph(GraphStoreContract):
            @pytest.fixture
            async def adapter(self, tmp_path):
                async with MyGraph(StoreConfig(namespace="contract", working_dir=tmp_path)) as g:
                    yield g
                    await g.drop()
    """

    async def describe_contents(self, store: GraphStore) -> str:
        counts = (await store.node_count(), await store.edge_count())
        nodes = [n.id async for n in store.nodes()]
        edges = [e.key async for e in store.edges()]
        if counts == (0, 0) and not nodes and not edges:
            return ""
        return f"node_count/edge_count={counts}, nodes()={sorted(nodes)[:5]!r}, edges()={sorted(edges)[:3]!r}"

    async def test_zzz_store_is_still_empty(self, adapter):
        """Canary, runs last: after every other test, the store handed out is
        still empty, also as seen by a second instance over the same config.

        Troubleshoot: some test's graph outlived its fixture: drop the store in
        the fixture's teardown (a shared database keeps data).
        """
        await self.assert_still_empty(adapter)
