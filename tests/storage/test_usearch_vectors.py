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
