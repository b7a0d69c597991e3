"""Graph tests of the rules backends break most: ids a collation would merge,
batches past SQL parameter limits, scans while nodes are deleted,
durability after ``flush()`` and duplicate edges in one batch. Each names
the rules it checks."""

from __future__ import annotations

from ragkit.protocols.base import Capability
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import needs
from ragkit.testing.contracts.base.inputs import (
    CONFUSABLE_KEYS,
    LARGE,
    durable_view,
    many_keys,
    scan_result,
    scan_while_deleting,
)


class GraphEdgeCaseTests:
    @checks("store.keys.exact", "graph.node-ids.any-str")
    async def test_node_ids_differing_in_case_or_normalisation_are_distinct(self, adapter):
        """Entity names differing only in case, normalisation, case-folding or a
        trailing space are different nodes, with their own edges.

        Troubleshoot: match nodes on the exact id property; no ``toLower`` or
        normalising index.
        """
        ids = list(CONFUSABLE_KEYS)
        await adapter.upsert_nodes({n: {"i": i} for i, n in enumerate(ids)})
        await adapter.upsert_edges([("Apple", "apple", {"w": 1}), ("stra\u00dfe", "STRASSE", {"w": 2})])
        assert await adapter.node_count() == len(ids), "node ids differing in case/normalisation were merged"
        assert [p["i"] if p else None for p in await adapter.get_nodes(ids)] == list(range(len(ids)))
        assert await adapter.degrees(["Apple", "apple", "APPLE", "strasse"]) == [1, 1, 0, 0]
        await adapter.delete_nodes(["APPLE"])
        assert await adapter.node_count() == len(ids) - 1
        assert await adapter.get_edge("apple", "Apple") == {"w": 1}

    @checks("graph.upsert-edges.last-wins")
    async def test_an_edge_twice_in_one_batch_keeps_the_last(self, adapter):
        """In one ``upsert_edges`` batch the last occurrence of an edge wins,
        whether repeated as (a, b) or as (b, a); there is one edge.

        Troubleshoot: a backend ``UNWIND`` or multi-row insert applies rows in
        an order of its own: de-duplicate the batch keeping the last first
        (the protocol's ``upsert_edges`` does before the hook).
        """
        await adapter.upsert_edges([
            ("a", "b", {"w": 1}), ("b", "a", {"w": 2}), ("c", "d", {"w": 3}), ("c", "d", {"w": 4}),
            ("e", "e", {"w": 5}), ("e", "e", {"w": 6}),
        ])
        assert await adapter.get_edges([("a", "b"), ("d", "c"), ("e", "e")]) == [{"w": 2}, {"w": 4}, {"w": 6}]
        assert await adapter.edge_count() == 3
        assert await adapter.degrees(["a", "b", "e"]) == [1, 1, 1]

    @checks("store.batch.large", "graph.batch.order", "graph.scans.once")
    async def test_batches_past_sql_parameter_limits(self, adapter):
        """2500 nodes and 2500 edges in one upsert each; reads of 2500 ids and
        pairs, and deletes, in one call each; scans of all of them, past any
        backend's page.

        Troubleshoot: chunk statements and ``UNWIND`` lists inside the hooks;
        a scan's next page starts after the last key of the previous one.
        """
        nodes = many_keys(LARGE, "n")
        await adapter.upsert_nodes({n: {"i": i} for i, n in enumerate(nodes)})
        pairs = [(nodes[i], nodes[(i + 1) % LARGE]) for i in range(LARGE)]
        await adapter.upsert_edges([(a, b, {"i": i}) for i, (a, b) in enumerate(pairs)])
        assert await adapter.node_count() == LARGE and await adapter.edge_count() == LARGE
        got = await adapter.get_nodes(nodes + ["absent"])
        assert [p["i"] if p else None for p in got] == [*range(LARGE), None]
        edges = await adapter.get_edges(pairs)
        assert [p["i"] if p else None for p in edges] == list(range(LARGE))
        assert set(await adapter.degrees(nodes)) == {2}
        scanned_nodes = [(n.id, n.properties["i"]) async for n in adapter.nodes()]
        assert sorted(scanned_nodes) == sorted(zip(nodes, range(LARGE))), "nodes() missed or repeated nodes"
        scanned = [e.properties["i"] async for e in adapter.edges()]
        assert sorted(scanned) == list(range(LARGE)), "edges() missed or repeated edges past its first page"
        await adapter.delete_edges(pairs[: LARGE // 2])
        assert await adapter.edge_count() == LARGE - LARGE // 2
        await adapter.delete_nodes(nodes)
        assert await adapter.node_count() == 0 and await adapter.edge_count() == 0

    @checks("store.scan.complete-under-delete")
    async def test_node_scan_is_complete_while_nodes_are_deleted(self, adapter):
        """A ``nodes()`` scan whose consumer deletes as it goes still yields
        every node stored for the whole scan exactly once.

        Troubleshoot: page by id or snapshot, not by offset.
        """
        ids = many_keys(600, "g")
        await adapter.upsert_nodes({n: {} for n in ids})
        doomed = set(ids[300:320])
        seen = await scan_while_deleting(adapter.nodes, lambda n: n.id, adapter.delete_nodes, doomed)
        problem = scan_result(seen, set(ids) - doomed, doomed)
        assert problem is None, problem

    @needs(Capability.PERSISTENT)
    @checks("store.flush.durable")
    async def test_flush_makes_writes_durable(self, adapter):
        """(PERSISTENT) After ``flush()``, with the store still open, a new
        instance over what is durable sees every write so far.

        Troubleshoot: ``_flush`` must save (commit, write the file) what
        ``_close`` would.
        """
        await adapter.upsert_nodes({"a": {"v": 1}, "b": {"v": 2}})
        await adapter.upsert_edges([("a", "b", {"w": 1}), ("b", "c", {"w": 2})])
        await adapter.delete_nodes(["c"])
        await adapter.flush()
        async with durable_view(adapter) as durable:
            assert await durable.get_nodes(["a", "b", "c"]) == [{"v": 1}, {"v": 2}, None]
            assert await durable.get_edges([("b", "a"), ("b", "c")]) == [{"w": 1}, None]
