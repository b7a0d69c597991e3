"""The ``usearch`` vector store beyond the contract suite (which runs on it as
``TestVector_usearch``): the graph search on more rows than the contract's,
the graph kept up to date with writes made through other instances, and the
saved graph loaded, or built again when it is stale, foreign or broken."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragkit.protocols import StoreConfig
from ragkit.storage.usearch_vectors import USearchVectorStore

DIM = 32


def store(tmp_path, **options) -> USearchVectorStore:
    return USearchVectorStore(StoreConfig(namespace="entities", working_dir=tmp_path, dimension=DIM,
                                          embedder="test:hash", options=options))


def clustered(n: int, seed: int = 0) -> np.ndarray:
    """Vectors around 50 centres, as embeddings of related texts are."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((50, DIM))
    return (centres[rng.integers(0, 50, n)] + 0.4 * rng.standard_normal((n, DIM))).astype(np.float32)


def ids(n: int, start: int = 0) -> list[str]:
    return [f"v{i:05d}" for i in range(start, start + n)]


def exact_top(matrix: np.ndarray, names: list[str], q: np.ndarray, k: int) -> list[str]:
    scores = matrix.astype(np.float64) @ q / (np.linalg.norm(matrix.astype(np.float64), axis=1) * np.linalg.norm(q))
    return [names[i] for i in np.argsort(-scores, kind="stable")[:k]]


async def test_the_graph_finds_the_true_neighbours_and_scores_them_exactly(tmp_path):
    matrix = clustered(6000)
    async with store(tmp_path, exact_rows=0) as s:
        for start in range(0, 6000, 1000):
            await s.upsert(ids(1000, start), matrix[start:start + 1000], [{"n": i} for i in range(start, start + 1000)])
        queries = clustered(40, seed=1)
        recall = []
        for q in queries:
            hits = await s.query(q, 10)
            truth = exact_top(matrix, ids(6000), q, 10)
            recall.append(len({h.id for h in hits} & set(truth)) / 10)
            for h in hits:
                row = matrix[int(h.id[1:])].astype(np.float64)
                assert abs(h.score - row @ q / (np.linalg.norm(row) * np.linalg.norm(q))) < 1e-6
                assert h.metadata == {"n": int(h.id[1:])}
        assert np.mean(recall) >= 0.95


async def test_another_instance_sees_each_write_and_delete(tmp_path):
    matrix = clustered(200)
    async with store(tmp_path) as reader, store(tmp_path) as writer:
        assert await reader.query(matrix[0], 3) == []
        await writer.upsert(ids(200), matrix)
        assert (await reader.query(matrix[7], 1))[0].id == "v00007"
        await writer.upsert(["v00007"], matrix[8:9])  # replaced: the graph holds the new vector
        assert {h.id for h in await reader.query(matrix[8], 2)} == {"v00007", "v00008"}
        await writer.delete(["v00008"])
        assert [h.id for h in await reader.query(matrix[8], 1)] == ["v00007"]
        await writer.drop()
        assert await reader.query(matrix[8], 1) == []
        await writer.upsert(["fresh"], matrix[3:4])
        assert [h.id for h in await reader.query(matrix[8], 5)] == ["fresh"]


async def test_the_saved_graph_is_loaded_and_brought_up_to_date(tmp_path):
    matrix = clustered(300)
    async with store(tmp_path) as s:
        await s.upsert(ids(200), matrix[:200])
    saved = json.loads(store(tmp_path).sidecar.read_text())
    assert (store(tmp_path).sidecar.parent / saved["file"]).exists()
    async with store(tmp_path) as other:  # written after the save: the graph file is behind
        await other.upsert(ids(100, 200), matrix[200:])
        await other.delete(["v00000"])
        other._changed = False  # closes without saving: the file on disk stays the older one
    async with store(tmp_path) as s:
        assert s._seq > saved["seq"] and len(s._graph) == 299
        assert [h.id for h in await s.query(matrix[250], 1)] == ["v00250"]
        assert "v00000" not in {h.id for h in await s.query(matrix[0], 5)}


@pytest.mark.parametrize("damage", ["truncated", "foreign", "missing"])
async def test_a_broken_or_foreign_graph_file_is_built_again(tmp_path, damage):
    matrix = clustered(100)
    async with store(tmp_path) as s:
        await s.upsert(ids(100), matrix)
    side = store(tmp_path).sidecar
    graph = side.parent / json.loads(side.read_text())["file"]
    if damage == "truncated":
        graph.write_bytes(graph.read_bytes()[:100])
    elif damage == "foreign":  # another database's (a workspace copied over another)
        side.write_text(json.dumps({**json.loads(side.read_text()), "epoch": "elsewhere"}))
    else:
        graph.unlink()
    async with store(tmp_path) as s:
        assert len(s._graph) == 100
        assert [h.id for h in await s.query(matrix[42], 1)] == ["v00042"]


async def test_two_instances_closing_leave_a_graph_that_loads(tmp_path):
    matrix = clustered(120)
    a, b = store(tmp_path), store(tmp_path)
    async with a, b:
        await a.upsert(ids(60), matrix[:60])
        await b.upsert(ids(60, 60), matrix[60:])
        await a.query(matrix[0], 1)  # a catches up with b's write
    files = list(store(tmp_path).sidecar.parent.glob("entities.*.usearch"))
    assert len(files) == 1
    async with store(tmp_path) as s:
        assert len(s._graph) == 120
        assert [h.id for h in await s.query(matrix[99], 1)] == ["v00099"]


async def test_drop_removes_the_saved_graph(tmp_path):
    async with store(tmp_path) as s:
        await s.upsert(ids(10), clustered(10))
    folder = store(tmp_path).sidecar.parent
    assert list(folder.glob("entities.*.usearch"))
    async with store(tmp_path) as s:
        await s.drop()
    assert not list(folder.glob("entities.*.usearch")) and not store(tmp_path).sidecar.exists()


async def test_catch_up_and_filtered_scans_page_through_more_rows_than_a_page(tmp_path, monkeypatch):
    """With pages of 7 rows, a reader catches up with 50 rows another
    instance wrote (and 3 it deleted), and a filtered query scans every page:
    each row found once, none missed at a page's edge.

    Troubleshoot: the keyset paging of ``_changed_rows`` and ``_scan``.
    """
    from ragkit.storage import usearch_vectors

    monkeypatch.setattr(usearch_vectors, "PAGE", 7)
    matrix = clustered(50)
    names = ids(50)
    async with store(tmp_path) as reader, store(tmp_path) as writer:
        assert await reader.query(matrix[0], 1) == []  # the reader's graph is built, empty
        await writer.upsert(names[:20], matrix[:20], [{"even": i % 2 == 0} for i in range(20)])
        await writer.upsert(names[20:], matrix[20:], [{"even": i % 2 == 0} for i in range(20, 50)])
        await writer.delete(names[:3])
        assert sorted(h.id for h in await reader.query(matrix[10], 50)) == names[3:]
        assert len(reader._graph) == 47
        even = await reader.query(matrix[10], 50, filter={"even": True})
        assert sorted(h.id for h in even) == [n for n in names[3:] if int(n[1:]) % 2 == 0]


async def test_listing_reading_and_deleting_more_ids_than_one_statement_takes(tmp_path):
    """2,500 rows: ``ids()`` and ``records()`` page through them each once,
    ``get`` and ``delete`` of them all span several statements (SQLite's
    bound-parameter limit), and the graph follows the delete.

    Troubleshoot: ``_ids``/``_records``/``_after`` pages, ``chunked`` in
    ``_keys``, ``_delete`` and ``_rows_where``.
    """
    n = 2500
    matrix = clustered(n)
    names = ids(n)
    async with store(tmp_path) as s:
        await s.upsert(names, matrix, [{"n": i} for i in range(n)])
        assert sorted([i async for i in s.ids()]) == names
        pages = [page async for page in s.records(batch=300)]
        assert all(len(p) <= 300 for p in pages) and sorted(r.id for p in pages for r in p) == names
        got = await s.get(names)
        assert [r.metadata["n"] for r in got] == list(range(n))
        assert np.allclose(np.stack([r.vector for r in got]), matrix)
        await s.delete(names[:2000])
        assert await s.count() == 500 and len(s._graph) == 500
        assert sorted(h.id for h in await s.query(matrix[0], 600)) == names[2000:]


async def test_the_graph_options_reach_the_graph(tmp_path):
    """``connectivity``, ``expansion_add`` and ``expansion_search`` are the
    graph's HNSW parameters, not only accepted options."""
    async with store(tmp_path, connectivity=8, expansion_add=40, expansion_search=50) as s:
        await s.upsert(ids(10), clustered(10))
        assert (s._graph.connectivity, s._graph.expansion_add, s._graph.expansion_search) == (8, 40, 50)


async def test_a_graph_saved_after_the_database_was_restored_from_a_backup_is_built_again(tmp_path):
    """A saved graph that is newer than the database (the workspace's SQLite
    file restored from a backup, the graph file not) is not loaded: it holds
    vectors the database no longer has. The graph is built from the rows."""
    import shutil

    matrix = clustered(150)
    async with store(tmp_path) as s:
        await s.upsert(ids(100), matrix[:100])
    folder = tmp_path / "backup"
    folder.mkdir()
    database = [p for p in (tmp_path / s.workspace).glob("ragkit.sqlite*")]
    for p in database:
        shutil.copy2(p, folder / p.name)
    async with store(tmp_path) as s:
        await s.upsert(ids(50, 100), matrix[100:])
    for p in (tmp_path / s.workspace).glob("ragkit.sqlite*"):
        p.unlink()
    for p in folder.iterdir():
        shutil.copy2(p, tmp_path / s.workspace / p.name)
    async with store(tmp_path) as s:
        assert await s.count() == 100 and len(s._graph) == 100
        assert {h.id for h in await s.query(matrix[120], 100)} == set(ids(100))


async def test_a_graph_that_cannot_be_saved_is_logged_and_built_again(tmp_path, caplog):
    """When the graph cannot be written (its folder is a file), closing logs a
    warning naming the folder and still closes; the next open builds the graph
    from the rows."""
    matrix = clustered(30)
    s = store(tmp_path)
    s.sidecar.parent.parent.mkdir(parents=True)
    s.sidecar.parent.write_text("not a folder")
    async with s:
        await s.upsert(ids(30), matrix)
    assert not s.is_open
    folder = s.sidecar.parent
    said = f"could not save the vector graph of entities to {folder}: [Errno 17] File exists: '{folder}' " \
           "(it is built again at the next open)"
    assert said in [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    async with store(tmp_path) as again:
        assert len(again._graph) == 30
        assert [h.id for h in await again.query(matrix[7], 1)] == ["v00007"]


@pytest.fixture
def graphs_made(monkeypatch) -> list[int]:
    """One item per graph any store makes anew (not loaded) from now on."""
    made: list[int] = []
    original = USearchVectorStore._new_graph
    monkeypatch.setattr(USearchVectorStore, "_new_graph", lambda self: made.append(1) or original(self))
    return made


def statements(s: USearchVectorStore) -> list[str]:
    """The SQL the store's connection runs from now on, in lower case (SQL's
    words and names are case-insensitive: the checks read them so too)."""
    seen: list[str] = []
    s.db._conn.set_trace_callback(lambda sql: seen.append(" ".join(sql.lower().split())))
    return seen


async def test_a_search_after_this_instances_own_writes_reads_no_rows_back(tmp_path, graphs_made):
    """The graph takes this instance's writes as they are made, the first one
    into an empty namespace and the first after a drop included: neither the
    write nor the search that follows reads changed rows or deletions back,
    and the search reads the namespace's state once. Another instance's write
    is read back and added to the graph (no new graph), also when this
    instance writes before it searches."""
    made = graphs_made
    matrix = clustered(40)
    async with store(tmp_path) as s, store(tmp_path) as other:
        assert len(made) == 2  # each instance's empty graph
        for step in ("first write", "second write", "delete", "drop", "after the drop"):
            seen = statements(s)
            if step == "delete":
                await s.delete(ids(1))
            elif step == "drop":
                await s.drop()
                await s.query(matrix[5], 3)  # a graph made anew, in step with the drop
                seen.clear()
            else:
                first = step != "second write"
                await s.upsert(ids(20, 0 if first else 20), matrix[:20] if first else matrix[20:])
            write = len(seen)
            await s.query(matrix[5], 3)
            assert not [q for q in seen if "select key from vectors_gone" in q or "seq >=" in q], (step, seen)
            assert sum("from vectors_state" in q for q in seen[write:]) == 1, (step, seen[write:])
        assert len(made) == 3, "a graph was made anew other than after the drop"
        await other.query(matrix[0], 1)  # other's graph is older than the drop: made anew
        await other.upsert(["elsewhere"], matrix[:1])
        seen = statements(s)
        await s.upsert(["here"], matrix[1:2])
        assert {h.id for h in await s.query(matrix[0], 2)} == {"elsewhere", "v00000"}
        assert {h.id for h in await s.query(matrix[1], 2)} == {"here", "v00001"}
        assert [q for q in seen if "select key from vectors_gone" in q], seen
        assert len(made) == 4, "another instance's write made a new graph"
        await s.drop()
        await s.query(matrix[0], 1)  # s's graph made anew, at the drop
        await other.upsert(["later"], matrix[2:3])  # other's too: it is older than the drop
        assert [h.id for h in await s.query(matrix[2], 1)] == ["later"]
        assert len(made) == 6, "another instance's write after a drop made a new graph"


async def test_a_store_up_to_exact_rows_is_searched_exactly(tmp_path):
    """Up to ``exact_rows`` vectors (here all 3,000 of them) the candidates
    come from a scan, not the graph: with a graph too sparse to find them
    (2 links, 2 candidates weighed), the hits are still the true neighbours."""
    n = 3000
    matrix, names = clustered(n), ids(n)
    async with store(tmp_path, exact_rows=n, connectivity=2, expansion_add=2, expansion_search=2) as s:
        await s.upsert(names, matrix)
        for q in clustered(20, seed=3):
            assert [h.id for h in await s.query(q, 10)] == exact_top(matrix, names, q, 10)


async def test_a_saved_graph_is_loaded_not_built_again_and_saved_again_at_each_close(tmp_path, caplog, graphs_made):
    """An open after a close loads the graph the close saved (no new graph is
    made), and a second close saves again over the first, with no warning."""
    made = graphs_made
    matrix = clustered(60)
    async with store(tmp_path) as s:
        await s.upsert(ids(30), matrix[:30])
    assert made == [1]
    async with store(tmp_path) as s:
        await s.upsert(ids(30, 30), matrix[30:])
    async with store(tmp_path) as s:
        assert made == [1], "the saved graph was built again"
        assert len(s._graph) == 60 and json.loads(s.sidecar.read_text())["seq"] == s._seq
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


async def test_a_graph_that_fails_to_take_a_write_is_built_again_from_the_rows(tmp_path, monkeypatch):
    """The write is committed before the graph takes it: when the graph fails
    (out of memory, say), the caller gets that error, and the next search
    builds the graph again from the rows, the write included."""
    matrix = clustered(20)
    async with store(tmp_path) as s:
        await s.upsert(ids(10), matrix[:10])

        def fail(keys, vectors):
            raise MemoryError("no memory for the graph")

        monkeypatch.setattr(s, "_put", fail)
        with pytest.raises(MemoryError, match="no memory for the graph"):
            await s.upsert(ids(10, 10), matrix[10:])
        monkeypatch.undo()
        assert s._graph is None
        assert [h.id for h in await s.query(matrix[15], 1)] == ["v00015"] and len(s._graph) == 20


async def test_another_dimension_is_refused_naming_the_recorded_embedder_until_the_store_is_emptied(tmp_path):
    """Reopened with vectors of another size (another embedder), the store
    names the embedder that wrote it; once its vectors are deleted, it takes
    the new size."""
    from ragkit.errors import DimensionMismatchError

    async with store(tmp_path) as s:
        await s.upsert(ids(3), clustered(3))
    other = USearchVectorStore(StoreConfig(namespace="entities", working_dir=tmp_path, dimension=DIM // 2,
                                           embedder="test:other"))
    async with other:
        assert other.stored_dimension == DIM and other.stored_embedder == "test:hash"
        with pytest.raises(DimensionMismatchError, match="test:hash"):
            await other.query(np.ones(DIM // 2, dtype=np.float32), 1)
        await other.delete(ids(3))
    async with other:
        assert other.stored_dimension is None
        await other.upsert(["half"], np.ones((1, DIM // 2), dtype=np.float32))
        assert [h.id for h in await other.query(np.ones(DIM // 2, dtype=np.float32), 1)] == ["half"]


async def test_an_open_that_changes_nothing_writes_no_graph_file(tmp_path, graphs_made):
    """Opened, searched and closed without a write, the store leaves the saved
    graph as it was (a read-only use writes nothing); a graph made anew after
    a drop and saved is loaded at the next open."""
    made = graphs_made
    matrix = clustered(30)
    async with store(tmp_path) as s:
        await s.upsert(ids(30), matrix)
    folder = store(tmp_path).sidecar.parent
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    async with store(tmp_path) as s:
        assert [h.id for h in await s.query(matrix[3], 1)] == ["v00003"]
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before
    async with store(tmp_path) as s:
        await s.drop()
        assert await s.query(matrix[3], 1) == []  # the empty graph, saved at close
    made.clear()
    async with store(tmp_path) as s:
        assert s._graph is not None and len(s._graph) == 0 and s._seq == json.loads(s.sidecar.read_text())["seq"]
        assert made == [], "the graph saved after the drop was built again"
