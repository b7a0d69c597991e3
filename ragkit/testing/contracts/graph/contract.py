"""``GraphStoreContract``: what every ``GraphStore`` adapter must do (see
``ragkit.protocols.graph.GraphStore`` for the normative text)."""

from __future__ import annotations

import asyncio
import copy

import pytest

from ragkit.errors import InvalidValueError
from ragkit.protocols.base import Capability
from ragkit.protocols.graph import GraphStore, edge_key
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import (
    StoreContractBase,
    collect,
    contract,
    difference,
    needs,
    reopened,
    sibling,
)
from ragkit.testing.contracts.base.fencing import FencingTests
from ragkit.testing.contracts.base.lifecycle import ClosedStoreTests
from ragkit.testing.contracts.graph.edge_cases import GraphEdgeCaseTests
from ragkit.testing.contracts.graph.machine import GraphStateMachineTests
from ragkit.testing.contracts.graph.query import GraphQueryTests, GraphScanAndCountTests, assert_degrees, all_edges, all_nodes

ODD_IDS = ["中文实体", "🙂 emoji", "q'\"`", "{braces}", "back\\slash", "  spaced  ", "ЖУК", "a:b/c"]


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
        scanned = await all_nodes(adapter)
        assert difference(props, scanned["n"]) is None, "nodes() changed property types"
        assert difference(props, (await all_edges(adapter))[("m", "n")]) is None

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
        assert set(await all_nodes(adapter)) == set(ODD_IDS)
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

    @pytest.mark.parametrize(
        "where", ["node id", "edge end", "property key", "str value", "list item", "late in the batch"]
    )
    @checks("graph.text.unicode")
    async def test_lone_surrogates_are_refused_and_unknown(self, adapter, where):
        """A lone surrogate in an id, a property key or a str value (a list's
        items too) raises ``InvalidValueError`` and writes nothing of the
        batch; asked for or deleted, such an id is missing.

        Troubleshoot: ``check_node_id`` and ``check_properties`` refuse them;
        an adapter that writes before they are called, or reads an id without
        ``_node_ids``, breaks this.
        """
        lone = "x\ud800y"
        await adapter.upsert_node("kept", {"v": 1})
        nodes = {
            "node id": {lone: {}},
            "property key": {"n": {lone: 1}},
            "str value": {"n": {"p": lone}},
            "list item": {"n": {"p": ["ok", lone]}},
            "late in the batch": {"n": {}, "m": {}, "z": {"p": lone}},
        }
        with pytest.raises(InvalidValueError, match="lone surrogate"):
            if where == "edge end":
                await adapter.upsert_edges([("n", "m", {}), ("m", lone, {})])
            else:
                await adapter.upsert_nodes({"kept": {"v": 2}, **nodes[where]})
        assert await adapter.get_nodes(["kept", "n", "m", lone]) == [{"v": 1}, None, None, None]
        assert (await adapter.node_count(), await adapter.edge_count()) == (1, 0)
        assert await adapter.get_edges([("kept", lone)]) == [None]
        await adapter.delete_nodes([lone])
        assert await adapter.degrees([lone, "kept"]) == [0, 0]

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
        assert await all_edges(adapter) == {("a", "b"): {"w": 2}}

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
        await assert_degrees(adapter, {"a": 2, "b": 1})
        assert await adapter.node_edges("a") == [("a", "a"), ("a", "b")]
        assert await adapter.get_edge("a", "a") == {"loop": True}
        assert await all_edges(adapter) == {("a", "a"): {"loop": True}, ("a", "b"): {}}
        await adapter.delete_edge("a", "a")
        await assert_degrees(adapter, {"a": 1, "b": 1})
        await adapter.upsert_edge("b", "b", {})
        await adapter.delete_node("b")
        assert await adapter.edge_count() == 0
        await assert_degrees(adapter, {"a": 0, "b": 0})

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
        await assert_degrees(adapter, {"a": 0})
        await adapter.upsert_edge("a", "b", {})
        await assert_degrees(adapter, {"a": 1, "b": 1, "c": 0})
        await adapter.upsert_edge("b", "a", {"w": 1})
        await assert_degrees(adapter, {"a": 1, "b": 1})
        await adapter.upsert_edges([("a", "c", {}), ("c", "d", {})])
        await assert_degrees(adapter, {"a": 2, "b": 1, "c": 2, "d": 1})
        await adapter.upsert_node("a", {"props": "do not change degree"})
        await assert_degrees(adapter, {"a": 2})
        assert await adapter.edge_degrees([("a", "c"), ("d", "c")]) == [4, 3]
        await adapter.delete_edge("c", "a")
        await assert_degrees(adapter, {"a": 1, "b": 1, "c": 1, "d": 1})
        await adapter.delete_edge("c", "a")  # already gone
        await assert_degrees(adapter, {"a": 1, "c": 1})
        await adapter.delete_node("b")
        await assert_degrees(adapter, {"a": 0, "b": 0, "c": 1, "d": 1})
        await adapter.drop()
        await assert_degrees(adapter, {"a": 0, "c": 0, "d": 0})


class GraphContextTests:
    @checks("graph.context.same-as-reads")
    async def test_context_answers_what_the_single_reads_answer(self, adapter):
        """``context`` reads in one call what ``get_nodes``, ``get_edges``,
        ``nodes_edges`` and ``degrees`` read one by one: the asked nodes and
        the asked edges' ends, the asked edges (and with ``incident`` every
        edge of the asked nodes), and the degree of every node named or
        reached, a self-loop counted once, a missing node 0.

        Troubleshoot: an adapter overriding ``_context`` (one statement on a
        server) must count degrees over all of a node's edges, not only those
        it returns, and leave a missing node out of ``nodes`` and ``incident``.
        """
        await adapter.upsert_nodes({"hub": {"kind": "hub"}, "lonely": {"w": 1.5}})
        await adapter.upsert_edges([("hub", "a", {"w": 1}), ("b", "hub", {"w": 2}), ("a", "c", {"tags": ["x"]}),
                                    ("c", "d", {}), ("hub", "hub", {"self": True})])
        ctx = await adapter.context(["hub", "lonely", "missing"], incident=True)
        assert ctx.nodes == {"hub": {"kind": "hub"}, "lonely": {"w": 1.5}}
        assert ctx.edges == {("a", "hub"): {"w": 1}, ("b", "hub"): {"w": 2}, ("hub", "hub"): {"self": True}}
        assert ctx.incident == {"hub": [("a", "hub"), ("b", "hub"), ("hub", "hub")], "lonely": []}
        assert ctx.degrees == {"hub": 3, "lonely": 0, "missing": 0, "a": 2, "b": 1}

        ctx = await adapter.context(pairs=[("c", "a"), ("d", "c"), ("a", "missing"), ("b", "d")])
        assert ctx.nodes == {"a": {}, "c": {}, "d": {}, "b": {}}
        assert ctx.edges == {("a", "c"): {"tags": ["x"]}, ("c", "d"): {}}
        assert ctx.degrees == {"a": 2, "c": 2, "d": 1, "b": 1, "missing": 0}
        assert ctx.incident == {}

        ctx = await adapter.context(["hub"], [("a", "c")])  # no incident: the asked edges only
        assert ctx.nodes == {"hub": {"kind": "hub"}, "a": {}, "c": {}}
        assert ctx.edges == {("a", "c"): {"tags": ["x"]}}
        assert ctx.degrees == {"hub": 3, "a": 2, "c": 2}
        assert ctx.incident == {}

        ctx = await adapter.context(["d"], [("a", "hub")], incident=True)
        assert ctx.nodes == {"d": {}, "a": {}, "hub": {"kind": "hub"}}
        assert ctx.edges == {("c", "d"): {}, ("a", "hub"): {"w": 1}}
        assert ctx.degrees == {"d": 1, "a": 2, "hub": 3, "c": 2}
        assert ctx.incident == {"d": [("c", "d")]}
        ctx.nodes["hub"]["kind"] = "changed"
        assert (await adapter.get_nodes(["hub"])) == [{"kind": "hub"}], "context handed out the stored properties"
        assert (await adapter.context()).nodes == {}


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
        assert await all_edges(adapter) == {("a", "b"): {"keep": 1}}

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


class GraphDropAndIsolationTests:
    @checks("store.drop.scoped")
    async def test_drop_empties_and_keeps_the_store_open(self, adapter):
        """``drop()`` removes every node and edge and leaves the store usable.

        Troubleshoot: delete only this workspace's and namespace's graph.
        """
        await adapter.upsert_edges([("a", "b", {}), ("b", "c", {})])
        await adapter.drop()
        assert (await adapter.node_count(), await adapter.edge_count()) == (0, 0)
        assert await all_nodes(adapter) == {} and await all_edges(adapter) == {}
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
            assert await all_nodes(again) == expected_nodes
            assert await all_edges(again) == expected_edges
            assert await again.degrees(["b", "中文", "gone"]) == [2, 1, 0]
        assert await all_nodes(adapter) == expected_nodes
        assert await all_edges(adapter) == expected_edges


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
        edges = await all_edges(adapter)
        assert edges == {edge_key("hub", f"t{t}-{i}"): {"t": t, "i": i} for t in range(40) for i in range(1, 5)}


@contract("graph", GraphStore)
class GraphStoreContract(
    # Collected bottom-up: node tests run first, the state machine last.
    GraphStateMachineTests,
    GraphEdgeCaseTests,
    FencingTests,
    ClosedStoreTests,
    GraphConcurrencyTests,
    GraphLifecycleTests,
    GraphDropAndIsolationTests,
    GraphQueryTests,
    GraphScanAndCountTests,
    GraphDeleteTests,
    GraphContextTests,
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
