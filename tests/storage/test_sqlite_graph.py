"""What the SQLite graph store promises beyond the graph contract: it is the
default, it lives in the workspace's database file, it takes over a graph the
NetworkX store wrote (once), and it keeps any ``str`` id."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from ragkit.protocols.base import StoreConfig
from ragkit.rag import RAG
from ragkit.schema import Document, QueryParam
from ragkit.settings import Settings
from ragkit.storage import NetworkXGraphStore, SQLiteGraphStore
from ragkit.testing import HashEmbedder
from ragkit.testing.replay import ReplayLLM, load_musique


def cfg(tmp_path: Path, namespace: str = "graph", workspace: str = "w1") -> StoreConfig:
    return StoreConfig(namespace=namespace, workspace=workspace, working_dir=tmp_path)


async def fill_networkx(tmp_path: Path, close: bool = True) -> NetworkXGraphStore:
    legacy = NetworkXGraphStore(cfg(tmp_path))
    await legacy.open()
    await legacy.upsert_nodes({"Kassel": {"type": "city", "source_ids": ["c1", "c2"], "rank": 3}})
    await legacy.upsert_edges([("Kassel", "Hesse", {"weight": 1.5, "keywords": "capital"})])
    await legacy.upsert_node("Lone", {"description": "no edges"})
    await legacy.flush()  # in the journal only, until close folds it into the snapshot
    if close:
        await legacy.close()
    return legacy


async def graph_of(store) -> tuple[dict, dict]:
    nodes = {n.id: n.properties async for n in store.nodes()}
    edges = {(e.source, e.target): e.properties async for e in store.edges()}
    return nodes, edges


def test_sqlite_is_the_default_graph_store():
    assert Settings().graph.name == "sqlite"


@pytest.mark.parametrize("closed", [True, False], ids=["snapshot", "journal"])
async def test_a_networkx_graph_is_imported_once_and_its_file_left_alone(tmp_path, caplog, closed):
    legacy = await fill_networkx(tmp_path, close=closed)
    files = {p: p.read_bytes() for p in (tmp_path / "w1" / "graph").iterdir()}
    async with NetworkXGraphStore(cfg(tmp_path)) as reader:
        expected = await graph_of(reader)
    with caplog.at_level(logging.WARNING, logger="ragkit.storage.sqlite_graph"):
        async with SQLiteGraphStore(cfg(tmp_path)) as store:
            assert await graph_of(store) == expected
            assert await store.degrees(["Kassel", "Hesse", "Lone"]) == [1, 1, 0]
            await store.delete_nodes(["Kassel", "Hesse", "Lone"])  # emptied on purpose
    assert "imported the graph of workspace 'w1'" in caplog.text and "(3 nodes, 1 edges)" in caplog.text
    async with SQLiteGraphStore(cfg(tmp_path)) as store:
        assert await store.node_count() == 0  # not filled again from the file
    assert {p: p.read_bytes() for p in (tmp_path / "w1" / "graph").iterdir()} == files
    if not closed:
        await legacy.close()


async def test_two_stores_opening_at_once_import_once(tmp_path):
    await fill_networkx(tmp_path)
    a, b = SQLiteGraphStore(cfg(tmp_path)), SQLiteGraphStore(cfg(tmp_path))
    await asyncio.gather(a.open(), b.open())
    try:
        assert await a.node_count() == 3 and await a.edge_count() == 1
        db = sqlite3.connect(a.path)
        assert db.execute("SELECT count(*) FROM graph_imports").fetchone()[0] == 1
        db.close()
    finally:
        await a.close()
        await b.close()


async def test_a_graph_with_rows_is_never_overwritten_by_an_old_file(tmp_path):
    async with SQLiteGraphStore(cfg(tmp_path)) as store:
        await store.upsert_node("Newer", {"v": 1})
    await fill_networkx(tmp_path)
    async with SQLiteGraphStore(cfg(tmp_path)) as store:
        assert await store.labels() == ["Newer"]


async def test_any_str_id_is_kept_and_ordered_as_python_orders_it(tmp_path):
    ids = ["\U0010fffd last plane", "emoji 🚀", "苹果公司", "a'b\"c`{d}", "Z", "z", "é", "e\u0301"]
    async with SQLiteGraphStore(cfg(tmp_path)) as store:
        await store.upsert_nodes({n: {"name": n} for n in ids})
        await store.upsert_edges([(ids[0], ids[1], {}), (ids[2], ids[3], {})])
    async with SQLiteGraphStore(cfg(tmp_path)) as store:
        assert await store.labels() == sorted(ids)
        assert [n.id async for n in store.nodes()] == sorted(ids)  # keyset pages in str order
        assert [(e.source, e.target) async for e in store.edges()] == sorted(
            [tuple(sorted(ids[:2])), tuple(sorted(ids[2:4]))]
        )
        assert await store.get_nodes(ids) == [{"name": n} for n in ids]


async def test_a_lone_surrogate_id_from_before_the_unicode_rule_is_listed_and_dropped(tmp_path):
    """A database written when ids could hold lone surrogates still opens:
    such a node is listed with its properties, read by id as missing (as an
    id that cannot exist, [graph.text.unicode]) and dropped with the rest."""
    old_id = "old \ud800 name"
    async with SQLiteGraphStore(cfg(tmp_path)) as store:
        await store.upsert_node("new", {"v": 1})
        path = store.path
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO graph_nodes (workspace, namespace, id, properties) VALUES ('w1', 'graph', ?, ?)",
            (old_id.encode("utf-8", "surrogatepass"), '{"d":"was \ud801"}'.encode("utf-8", "surrogatepass")),
        )
    conn.close()
    async with SQLiteGraphStore(cfg(tmp_path)) as store:
        assert {n.id: n.properties async for n in store.nodes()} == {"new": {"v": 1}, old_id: {"d": "was \ud801"}}
        assert await store.labels() == ["new", old_id] and await store.node_count() == 2
        assert await store.get_nodes([old_id, "new"]) == [None, {"v": 1}]
        await store.drop()
        assert await store.node_count() == 0


async def test_large_reads_and_writes_cross_the_parameter_limit(tmp_path):
    n = 5000  # > MAX_PARAMS per statement, > one scan page
    async with SQLiteGraphStore(cfg(tmp_path)) as store:
        await store.upsert_edges([("hub", f"n{i:05}", {"i": i}) for i in range(n)])
        keys = [(f"n{i:05}", "hub") for i in range(n)]
        assert [p["i"] for p in await store.get_edges(keys)] == list(range(n))
        assert (await store.degrees(["hub"]))[0] == n
        ctx = await store.context(["hub"], [], incident=True)
        assert len(ctx.incident["hub"]) == n and ctx.degrees[f"n{n - 1:05}"] == 1
        assert len([e async for e in store.edges()]) == n
        await store.delete_nodes([f"n{i:05}" for i in range(0, n, 2)])
        assert await store.edge_count() == n // 2 and (await store.degrees(["hub"]))[0] == n // 2


async def test_a_default_workspace_keeps_its_graph_in_the_database_file(tmp_path):
    question = load_musique()[2][0]
    docs = [Document.from_text(f"{p['title']}\n{p['paragraph_text']}") for p in question["paragraphs"][:6]]
    async with RAG(Settings(working_dir=tmp_path), llm=ReplayLLM(), embedder=HashEmbedder({"dimension": 64})) as rag:
        report = await rag.indexer().insert(docs)
        assert len(report.processed) == len(docs) and not report.failed
        assert type(rag.stores.graph) is SQLiteGraphStore and await rag.stores.graph.edge_count() > 0
        result = await rag.aquery(question["question"], QueryParam(mode="hybrid", only_need_context=True))
        assert result.entities and result.relations
    assert not (tmp_path / "default" / "graph").exists()
    db = sqlite3.connect(tmp_path / "default" / "ragkit.sqlite")
    assert db.execute("SELECT count(*) FROM graph_nodes").fetchone()[0] > 0
    db.close()


async def test_keyed_reads_and_writes_search_an_index_and_never_scan(tmp_path):
    """Every statement of a keyed operation finds its rows through an index
    by their key, not by the workspace's whole range: SQLite's planner, with
    no statistics, picked the primary key's (workspace, namespace) prefix for
    reads by an edge's second end (a scan of every edge of the graph)."""
    async with SQLiteGraphStore(cfg(tmp_path)) as store:
        await store.upsert_edges([(f"n{i}", f"n{i + 1}", {"i": i}) for i in range(50)] + [("n7", "n7", {})])
        statements: list[str] = []
        store.db._conn.set_trace_callback(statements.append)
        await store.upsert_nodes({"n3": {"x": 1}, "new": {}})
        await store.upsert_edges([("n1", "n2", {"again": True}), ("n9", "z", {})])
        await store.get_nodes(["n1", "n2", "missing"])
        await store.get_edges([("n2", "n1"), ("n5", "n6"), ("n1", "n9")])
        await store.nodes_edges(["n4", "n7", "missing"])
        await store.degrees(["n4", "n7", "missing"])
        await store.context(["n8", "n20"], [("n30", "n31")], incident=True)
        await store.context(["n8"], [("n30", "n31")], incident=False)
        await store.delete_edges([("n10", "n11"), ("n12", "n13")])
        await store.delete_nodes(["n40", "n41", "missing"])
        store.db._conn.set_trace_callback(None)
        plans = {}
        for sql in dict.fromkeys(s for s in statements if s.split()[0] in ("SELECT", "WITH", "DELETE", "UPDATE")):
            plans[sql] = [row[-1] for row in store.db.fetchall("EXPLAIN QUERY PLAN " + sql)]
    assert len(plans) >= 8
    for sql, plan in plans.items():
        for step in plan:
            if "graph_" in step or " e " in f" {step} ":
                assert step.startswith("SEARCH") and not step.endswith("(workspace=? AND namespace=?)"), (sql, plan)
