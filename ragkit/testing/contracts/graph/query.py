"""Graph reads beyond one node or edge: full scans and counts
(``GraphScanAndCountTests``), subgraph and label search (``GraphQueryTests``),
and the scan helpers the other graph tests and the state machine share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from ragkit.errors import InvalidValueError
from ragkit.protocols.graph import GraphStore, edge_key
from ragkit.schema import Subgraph
from ragkit.testing.contracts.base.checks import checks


async def all_edges(store: GraphStore) -> dict[tuple[str, str], dict[str, Any]]:
    """Every edge from the ``edges()`` scan, checking each comes once and canonical."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    async for e in store.edges():
        assert e.source <= e.target, f"edges() yielded ({e.source!r}, {e.target!r}), not canonical (source <= target)"
        assert e.key not in out, f"edges() yielded edge {e.key!r} more than once"
        out[e.key] = dict(e.properties)
    return out


async def all_nodes(store: GraphStore) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    async for n in store.nodes():
        assert n.id not in out, f"nodes() yielded node {n.id!r} more than once"
        out[n.id] = dict(n.properties)
    return out


async def assert_degrees(store: GraphStore, expected: Mapping[str, int]) -> None:
    names = list(expected)
    got = dict(zip(names, await store.degrees(names)))
    assert got == dict(expected), f"degrees: expected {dict(expected)}, got {got}"


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
        nodes = await all_nodes(adapter)
        assert nodes == {n: {"i": i} for i, n in enumerate(names)}
        scanned = await all_edges(adapter)
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
