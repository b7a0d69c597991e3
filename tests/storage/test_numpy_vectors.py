"""``NumpyVectorStore`` beyond the contract: its files (old ones, damaged
ones, another embedder's), its memory, and search at the edges of float32.

Troubleshoot: ``ragkit/storage/numpy_vectors.py`` (``_read_snapshot``,
``_apply_changes``, ``_search``, ``_compact``).
"""

from __future__ import annotations

import json
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest

from ragkit.errors import DimensionMismatchError, StoreError
from ragkit.protocols.base import StoreConfig
from ragkit.storage import NumpyVectorStore
from ragkit.storage import numpy_vectors, snapshot_journal
from ragkit.storage.snapshot_journal import frame, read_frames


def store(root: Path, dimension: int = 4, embedder: str | None = "emb-A") -> NumpyVectorStore:
    return NumpyVectorStore(StoreConfig(namespace="v", workspace="w", working_dir=root, dimension=dimension,
                                        embedder=embedder))


def write_npz(root: Path, header: dict | np.ndarray, vectors: np.ndarray) -> Path:
    path = root / "w" / "vectors" / "v.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(header, dict):
        header = np.frombuffer(json.dumps(header, ensure_ascii=False).encode("utf-8", "surrogatepass"), dtype=np.uint8)
    with path.open("wb") as f:
        np.savez(f, vectors=vectors, header=header)
    return path


# -- files ---------------------------------------------------------------------


async def test_a_file_from_before_headers_held_dimension_and_embedder_opens(tmp_path):
    """The first files had no ``dimension``, ``embedder`` or ``generation``:
    the dimension is the vectors', and metadata may hold lone surrogates
    (refused since [vector.metadata.unicode])."""
    vectors = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    write_npz(tmp_path, {"ids": ["a", "b"], "metadata": [{"s": "x\ud800"}, {}]}, vectors)
    s = store(tmp_path, dimension=3)
    async with s:
        assert (s.stored_dimension, s.stored_embedder) == (None, None)
        got = await s.get(["a", "b"])
        assert [r.metadata for r in got] == [{"s": "x\ud800"}, {}]
        assert np.array_equal(np.stack([r.vector for r in got]), vectors)
    s = store(tmp_path, dimension=5)
    async with s:
        assert s.stored_dimension == 3 and await s.count() == 2


@pytest.mark.parametrize(
    ("header", "vectors", "why"),
    [
        ({"dimension": 4, "ids": ["a", "b"], "metadata": [{}, {}]}, np.ones((2, 3), np.float32),
         "its vectors are not of its dimension 4"),
        ({"ids": ["a"], "metadata": [{}]}, np.ones(3, np.float32), "its vectors are not of its dimension -1"),
        ({"dimension": 3, "ids": ["a"], "metadata": [{}]}, np.ones(3, np.float32),
         "its vectors are not of its dimension 3"),
        ({"dimension": 3, "ids": ["a", "b"], "metadata": [{}]}, np.ones((2, 3), np.float32),
         "(ids/metadata/vectors)"),
    ],
    ids=["dimension", "flat-old", "flat", "metadata"],
)
async def test_an_inconsistent_file_is_refused_by_name(tmp_path, header, vectors, why):
    path = write_npz(tmp_path, header, vectors)
    before = path.read_bytes()
    with pytest.raises(StoreError) as caught:
        await store(tmp_path, dimension=3).open()
    assert str(caught.value) == f"vector file {path} is inconsistent ({why})".replace("((", "(").replace("))", ")")
    assert path.read_bytes() == before


class _Planted:
    """Unpickling it would create ``marker``: a file must never run code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


async def test_a_file_holding_pickled_objects_is_refused_without_running_them(tmp_path):
    marker = tmp_path / "ran"
    header = np.array([_Planted(marker)], dtype=object)
    path = write_npz(tmp_path, header, np.ones((1, 3), np.float32))
    with pytest.raises(StoreError, match=f"cannot read vector file {path}: .*allow_pickle"):
        await store(tmp_path, dimension=3).open()
    assert not marker.exists()


async def test_the_snapshot_holds_the_documented_header(tmp_path):
    async with store(tmp_path) as s:
        await s.upsert(["a"], [[1, 2, 3, 4]], [{"k": "é"}])
    with np.load(s.path, allow_pickle=False) as data:
        header = json.loads(bytes(data["header"]).decode("utf-8"))
        assert data["vectors"].dtype == np.float32
    assert header == {"format": numpy_vectors.FORMAT, "dimension": 4, "embedder": "emb-A",
                      "generation": header["generation"], "ids": ["a"], "metadata": [{"k": "é"}]}


@pytest.fixture
def journal_small_stores(monkeypatch):
    """Small stores journal too (normally a snapshot under 64 KiB is rewritten)."""
    monkeypatch.setattr(snapshot_journal, "SMALL_SNAPSHOT", 0)


async def _journal_of_first_vectors(root: Path) -> NumpyVectorStore:
    """An emptied snapshot, then a journal whose first record holds vectors."""
    async with store(root) as s:
        await s.upsert(["gone"], [[1, 0, 0, 0]])
    async with store(root) as s:
        await s.delete(["gone"])
    s = store(root)
    await s.open()
    await s.upsert(["a", "b"], [[1, 2, 3, 4], [4, 3, 2, 1]], [{"m": 1}, {"m": 2}])
    await s.flush()
    assert s._file.journal.exists()
    return s


async def test_a_journal_of_another_embedders_vectors_is_taken_in_their_dimension(tmp_path, journal_small_stores):
    """Opened by an embedder of another dimension, a store whose vectors are
    all in its journal (its snapshot emptied) knows whose they are."""
    first = await _journal_of_first_vectors(tmp_path)
    files = {p.name: p.read_bytes() for p in first.path.parent.iterdir()}
    other = store(tmp_path, dimension=8, embedder="emb-B")
    async with other:
        assert (other.stored_dimension, other.stored_embedder, await other.count()) == (4, "emb-A", 2)
        with pytest.raises(DimensionMismatchError, match="made by the embedder emb-A"):
            await other.get(["a"])
    for name, data in files.items():  # what the first store left, as it left it
        (first.path.parent / name).write_bytes(data)
    async with store(tmp_path) as same:
        assert [r.metadata for r in await same.get(["a", "b"])] == [{"m": 1}, {"m": 2}]
    await first.close()


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda p: p[:-4], "a record's vectors do not match its ids and dimension"),
        (lambda p: _with_header(p, metadata=[]), "a record's metadata do not match its ids"),
        # Consistent in itself, but in dimension 2 while the store's rows are in 4.
        (lambda p: _with_header(p, dimension=2, ids=["a", "z"], metadata=[{}, {}]),
         "a record's vectors do not match its ids and dimension"),
    ],
    ids=["vectors", "metadata", "dimension"],
)
async def test_a_journal_record_that_contradicts_itself_is_named(tmp_path, damage, why, journal_small_stores):
    s = await _journal_of_first_vectors(tmp_path)
    await s.upsert(["c"], [[1, 1, 2, 2]])
    await s.flush()
    journal = s._file.journal
    frames, _ = read_frames(journal.read_bytes())
    assert len(frames) == 3, "a header and two records"
    files = {p.name: p.read_bytes() for p in s.path.parent.iterdir()}
    await s.close()
    for name, data in files.items():
        (s.path.parent / name).write_bytes(data)
    journal.write_bytes(b"".join(frame(p) for p in [*frames[:-1], damage(frames[-1])]))
    with pytest.raises(StoreError) as caught:
        await store(tmp_path).open()
    assert f"cannot read vector journal {journal}: {why}; restore it" in str(caught.value)


def _with_header(payload: bytes, **changes: object) -> bytes:
    (size,) = numpy_vectors._LENGTH.unpack_from(payload)
    end = numpy_vectors._LENGTH.size + size
    header = {**json.loads(payload[numpy_vectors._LENGTH.size:end]), **changes}
    data = json.dumps(header).encode()
    return numpy_vectors._LENGTH.pack(len(data)) + data + payload[end:]


async def test_an_emptied_store_records_the_embedder_of_its_next_vectors(tmp_path):
    async with store(tmp_path, embedder="emb-A") as s:
        await s.upsert(["a"], [[1, 2, 3, 4]])
    async with store(tmp_path, embedder="emb-B") as s:
        assert s.stored_embedder == "emb-A"
        await s.delete(["a"])
        await s.upsert(["b"], [[1, 2, 3, 4]])
        assert s.stored_embedder == "emb-B"
    async with store(tmp_path, embedder="emb-C") as s:
        assert s.stored_embedder == "emb-B"


# -- memory ----------------------------------------------------------------------


async def test_memory_is_four_bytes_a_component_and_given_back_after_deletions(tmp_path):
    """The matrix is float32 (half of float64's memory at 100k passages), and
    deleting most rows gives the memory back."""
    n, d = 4000, 256
    vectors = np.random.default_rng(0).normal(size=(n, d)).astype(np.float32)
    s = store(tmp_path, dimension=d)
    await s.open()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for start in range(0, n, 500):
            await s.upsert([f"v{i}" for i in range(start, start + 500)], vectors[start:start + 500])
        held = tracemalloc.get_traced_memory()[0] - base
        await s.delete([f"v{i}" for i in range(n - 200)])
        kept = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    matrix = n * d * 4
    assert matrix <= held < 1.7 * matrix, f"{held / matrix:.2f} x the float32 matrix"
    assert kept < 0.25 * matrix, f"{kept / matrix:.2f} x the matrix after deleting 95% of it"
    assert await s.count() == 200
    await s.close()


# -- search ------------------------------------------------------------------------


def _exact(v: np.ndarray, q: np.ndarray) -> float:
    v64, q64 = v.astype(np.float64), q.astype(np.float64)
    return float(v64 @ q64 / (np.linalg.norm(v64) * np.linalg.norm(q64)))


@pytest.mark.parametrize("compacted", [False, True])
async def test_vectors_of_any_finite_magnitude_score_their_exact_cosine(tmp_path, compacted):
    """float32 products overflow, or lose every digit, for vectors near its
    limits: those rows are scored again in float64, with no warning."""
    q = np.array([0.6, 0.8, 0.0, 0.0], np.float32)
    rows = {
        "huge": np.array([3e38, 1e38, 0, 0], np.float32),  # the dot product overflows float32
        "huge-anti": np.array([-3e38, -3e38, 0, 0], np.float32),
        "big": np.array([1e20, 3e20, 0, 1e20], np.float32),
        "tiny": np.array([1e-39, 2e-39, 0, 0], np.float32),  # subnormal
        "smallest": np.array([0, 1e-45, 0, 0], np.float32),
        "smallest-orthogonal": np.array([0, 0, 1e-45, 0], np.float32),  # 0 x an infinite inverse norm
        "small": np.array([1e-20, 0, 3e-20, 0], np.float32),
        "plain": np.array([0.3, -0.2, 0.5, 0.1], np.float32),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        async with store(tmp_path) as s:
            if compacted:  # the same rows after a compaction moved them
                await s.upsert([f"x{i}" for i in range(1100)], np.ones((1100, 4), np.float32))
            await s.upsert(list(rows), np.stack(list(rows.values())))
            if compacted:
                await s.delete([f"x{i}" for i in range(1100)])
                assert s._dead == 0, "compacted"
            searches = [await s.query(q, 10), await s.query(q, 10, filter={})]
        async with store(tmp_path) as s:  # and as read back from the file
            searches.append(await s.query(q, 10))
    for hits in searches:
        assert len(hits) == len(rows)
        for hit in hits:
            assert hit.score == pytest.approx(_exact(rows[hit.id], q), abs=1e-6), hit.id


async def test_scores_stay_within_minus_one_and_one(tmp_path):
    """A vector against itself can come out of float32 as 1.0000001."""
    vectors = np.random.default_rng(3).normal(size=(300, 16)).astype(np.float32)
    async with store(tmp_path, dimension=16) as s:
        await s.upsert([f"v{i}" for i in range(300)], vectors)
        top = [(await s.query(v, 1))[0].score for v in vectors[:100]]
        bottom = [(await s.query(-v, 300))[-1].score for v in vectors[:100]]
    assert max(top) <= 1.0 and min(bottom) >= -1.0
    assert min(top) > 1 - 1e-6 and max(bottom) < -1 + 1e-6


async def test_a_better_hit_is_kept_over_ties_at_the_cut(tmp_path):
    """Ties at the k-th place are broken by id, never at the expense of a
    better hit that sorts after them by id."""
    q = [1.0, 0, 0, 0]
    async with store(tmp_path) as s:
        await s.upsert(["z-best", "c", "a", "b"], [[1, 0.1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]])
        assert [h.id for h in await s.query(q, 2)] == ["z-best", "a"]
        assert [h.id for h in await s.query(q, 3)] == ["z-best", "a", "b"]


async def test_a_filter_after_deletions_skips_the_deleted_rows(tmp_path):
    async with store(tmp_path) as s:
        await s.upsert(["a", "b", "c"], [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 0, 0]], [{"t": 1}, {"t": 1}, {"t": 2}])
        await s.delete(["a"])
        assert [h.id for h in await s.query([1, 0, 0, 0], 5, filter={"t": 1})] == ["b"]
        assert [h.id for h in await s.query([1, 0, 0, 0], 5, filter={"t": {"$in": [1, 2]}})] == ["b", "c"]


async def test_a_large_store_searched_in_a_thread_keeps_filter_and_min_score(tmp_path):
    n = numpy_vectors.THREAD_ROWS + 10
    vectors = np.random.default_rng(1).normal(size=(n, 4)).astype(np.float32)
    async with store(tmp_path) as s:
        await s.upsert([f"v{i}" for i in range(n)], vectors, [{"odd": i % 2} for i in range(n)])
        q = vectors[7]
        hits = await s.query(q, 50, filter={"odd": 1}, min_score=0.99)
    assert hits and hits[0].id == "v7"
    assert all(h.metadata == {"odd": 1} and h.score >= 0.99 for h in hits)
    exact = sorted((_exact(v, q), f"v{i}") for i, v in enumerate(vectors) if i % 2 and _exact(v, q) >= 0.99 + 1e-6)
    assert {h.id for h in hits} >= {i for _, i in exact[-50:]}
