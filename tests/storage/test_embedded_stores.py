"""Behaviour specific to the embedded default stores (file layout, durability,
reload, atomic files, performance shape). The cross-adapter contract lives in
the contract suite; this file checks what only these implementations promise."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from ragkit.errors import (
    ConfigError,
    DimensionMismatchError,
    InvalidValueError,
    StoreClosedError,
    StoreError,
)
from ragkit.protocols.base import Capability, StoreConfig
from ragkit.protocols.vector import matches_filter
from ragkit.schema import DocStatus, DocStatusRecord
from ragkit.storage import (
    NetworkXGraphStore,
    NumpyVectorStore,
    SQLiteDocStatusStore,
    SQLiteGraphStore,
    SQLiteKVStore,
)
from ragkit.storage import snapshot_journal as journal_file
from ragkit.testing.store_files import vector_rows

DIM = 8
DEAD_PID = 99_999_999  # above any pid_max: no such process


def cfg(tmp_path: Path, namespace: str = "ns", workspace: str = "w1", **kw) -> StoreConfig:
    return StoreConfig(namespace=namespace, workspace=workspace, working_dir=tmp_path, **kw)


def vcfg(tmp_path: Path, namespace: str = "vecs", workspace: str = "w1", dim: int = DIM):
    return cfg(tmp_path, namespace, workspace, dimension=dim)


def temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def rand(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


# --- shared behaviour of the four classes --------------------------------------------

KINDS = ["kv", "doc_status", "vector", "graph", "sqlite_graph"]


def make(kind: str, tmp_path: Path, namespace: str = "ns", workspace: str = "w1"):
    if kind == "kv":
        return SQLiteKVStore(cfg(tmp_path, namespace, workspace))
    if kind == "doc_status":
        return SQLiteDocStatusStore(cfg(tmp_path, namespace, workspace))
    if kind == "vector":
        return NumpyVectorStore(vcfg(tmp_path, namespace, workspace))
    if kind == "sqlite_graph":
        return SQLiteGraphStore(cfg(tmp_path, namespace, workspace))
    return NetworkXGraphStore(cfg(tmp_path, namespace, workspace))


async def write_one(store, key: str) -> None:
    if isinstance(store, SQLiteKVStore):
        await store.upsert({key: {"v": key}})
    elif isinstance(store, SQLiteDocStatusStore):
        await store.upsert([DocStatusRecord(id=key)])
    elif isinstance(store, NumpyVectorStore):
        await store.upsert([key], rand(1), [{"k": key}])
    else:
        await store.upsert_node(key, {"k": key})


async def size(store) -> int:
    if isinstance(store, (NetworkXGraphStore, SQLiteGraphStore)):
        return await store.node_count()
    return await store.count()


def test_names_and_capabilities():
    assert SQLiteKVStore.name == "sqlite" and SQLiteDocStatusStore.name == "sqlite"
    assert NumpyVectorStore.name == "numpy" and NetworkXGraphStore.name == "networkx"
    sql = {Capability.PERSISTENT, Capability.TRANSACTIONAL, Capability.CONCURRENT_WRITES}
    assert SQLiteKVStore.capabilities == sql | {Capability.TEXT_SEARCH}
    assert SQLiteDocStatusStore.capabilities == sql | {Capability.GENERATION, Capability.CHANGES}
    assert NumpyVectorStore.capabilities == {
        Capability.PERSISTENT,
        Capability.METADATA_FILTER,
        Capability.CONCURRENT_WRITES,
    }
    assert NetworkXGraphStore.capabilities == {Capability.PERSISTENT, Capability.CONCURRENT_WRITES}
    assert SQLiteGraphStore.name == "sqlite" and SQLiteGraphStore.capabilities == sql


@pytest.mark.parametrize("kind", KINDS)
async def test_closed_store_raises_and_reopens(kind, tmp_path):
    store = make(kind, tmp_path)
    with pytest.raises(StoreClosedError):
        await write_one(store, "a")
    await store.open()
    await store.open()  # idempotent
    await write_one(store, "a")
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(StoreClosedError):
        await size(store)
    with pytest.raises(StoreClosedError):
        await store.flush()
    with pytest.raises(StoreClosedError):
        await store.drop()
    await store.open()
    assert await size(store) == 1
    await store.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_reopen_new_instance_sees_flushed_data(kind, tmp_path):
    async with make(kind, tmp_path) as store:
        for i in range(5):
            await write_one(store, f"k{i}")
    async with make(kind, tmp_path) as again:
        assert await size(again) == 5


@pytest.mark.parametrize("kind", KINDS)
async def test_workspaces_and_namespaces_are_isolated(kind, tmp_path):
    a = make(kind, tmp_path, "ns", "w1")
    b = make(kind, tmp_path, "ns", "w2")
    c = make(kind, tmp_path, "other", "w1")
    for s in (a, b, c):
        await s.open()
    await write_one(a, "only-a")
    await write_one(b, "only-b1")
    await write_one(b, "only-b2")
    await write_one(c, "only-c")
    assert [await size(s) for s in (a, b, c)] == [1, 2, 1]
    for s in (a, b, c):
        await s.flush()
    await a.drop()
    assert a.is_open and await size(a) == 0
    await write_one(a, "after-drop")  # still usable
    assert [await size(s) for s in (a, b, c)] == [1, 2, 1]
    for s in (a, b, c):
        await s.close()
    for ws, ns, n in (("w1", "ns", 1), ("w2", "ns", 2), ("w1", "other", 1)):
        async with make(kind, tmp_path, ns, ws) as s:
            assert await size(s) == n


# --- SQLite KV --------------------------------------------------------------------


async def test_kv_file_layout_and_pragmas(tmp_path):
    kv = SQLiteKVStore(cfg(tmp_path, "chunks"))
    ds = SQLiteDocStatusStore(cfg(tmp_path, "doc_status"))
    async with kv, ds:
        await kv.upsert({"a": {"x": 1}})
        await ds.upsert([DocStatusRecord(id="d")])
        db = tmp_path / "w1" / "ragkit.sqlite"
        assert kv.path == db and ds.path == db and db.exists()
        conn = sqlite3.connect(db)
        try:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            assert {"kv", "doc_status"} <= tables
            # no flush or close yet: the write is already committed and visible
            assert conn.execute("SELECT key, value FROM kv").fetchall() == [("a", '{"x": 1}')]
        finally:
            conn.close()
        synchronous = kv.db.fetchone("PRAGMA synchronous")[0]
        assert synchronous == 1  # NORMAL
    assert not (tmp_path / "w2").exists()


async def test_kv_options(tmp_path):
    store = SQLiteKVStore(cfg(tmp_path, options={"synchronous": "full"}))
    assert store.options.synchronous == "FULL"
    async with store:
        assert store.db.fetchone("PRAGMA synchronous")[0] == 2
    with pytest.raises(ConfigError):
        SQLiteKVStore(cfg(tmp_path, options={"synchronous": "OFF"}))
    with pytest.raises(ConfigError):
        SQLiteKVStore(cfg(tmp_path, options={"bogus": 1}))
    rel = SQLiteKVStore(cfg(tmp_path, options={"path": "custom/db.sqlite"}))
    assert rel.path == tmp_path / "custom" / "db.sqlite"
    absolute = tmp_path / "elsewhere" / "x.sqlite"
    a = SQLiteKVStore(cfg(tmp_path, "ns", "w1", options={"path": str(absolute)}))
    b = SQLiteKVStore(cfg(tmp_path, "ns", "w2", options={"path": str(absolute)}))
    async with a, b:
        await a.upsert({"k": {"ws": 1}})
        await b.upsert({"k": {"ws": 2}})
        # one shared file, still one record per workspace
        assert await a.get("k") == {"ws": 1} and await b.get("k") == {"ws": 2}
    assert absolute.exists()


async def test_kv_get_many_order_duplicates_copies(tmp_path):
    async with SQLiteKVStore(cfg(tmp_path)) as kv:
        value = {"list": [1, 2], "nested": {"a": "b"}}
        await kv.upsert({"k": value})
        value["list"].append(3)  # the store kept no reference
        got = await kv.get_many(["k", "missing", "k"])
        assert got == [{"list": [1, 2], "nested": {"a": "b"}}, None, {"list": [1, 2], "nested": {"a": "b"}}]
        assert got[0] is not got[2]
        got[0]["list"].append(99)
        got[0]["nested"]["a"] = "changed"
        assert await kv.get("k") == {"list": [1, 2], "nested": {"a": "b"}}


async def test_kv_large_batches_beyond_sqlite_variable_limit(tmp_path):
    async with SQLiteKVStore(cfg(tmp_path)) as kv:
        n = 5000
        await kv.upsert({f"key-{i}": {"i": i} for i in range(n)})
        asked = [f"key-{i}" for i in reversed(range(n))] + ["nope"] * 3
        got = await kv.get_many(asked)
        assert [g["i"] if g else None for g in got] == list(reversed(range(n))) + [None] * 3
        assert await kv.missing([f"key-{i}" for i in range(n - 2, n + 2)]) == {
            f"key-{n}",
            f"key-{n + 1}",
        }
        await kv.delete(f"key-{i}" for i in range(0, n, 2))
        assert await kv.count() == n // 2
        keys = [k async for k in kv.keys()]
        assert len(keys) == len(set(keys)) == n // 2


async def test_kv_failed_batch_writes_nothing(tmp_path):
    async with SQLiteKVStore(cfg(tmp_path)) as kv:
        await kv.upsert({"a": {"v": 1}})
        with pytest.raises(InvalidValueError):
            await kv.upsert({"a": {"v": 2}, "b": {"bad": object()}})
        with pytest.raises(InvalidValueError):
            await kv.upsert({"a": {"v": 3}, "c": {"bad": "\ud800"}})  # not encodable
        assert await kv.get_many(["a", "b", "c"]) == [{"v": 1}, None, None]
        await kv.delete(["\ud800", 5])  # unstorable keys: nothing to delete, no error


async def test_kv_concurrent_tasks_and_connections(tmp_path):
    kv1 = SQLiteKVStore(cfg(tmp_path, "ns"))
    kv2 = SQLiteKVStore(cfg(tmp_path, "ns"))  # same namespace, second connection
    async with kv1, kv2:

        async def writer(store, t):
            for i in range(20):
                await store.upsert({f"t{t}-{i}": {"t": t, "i": i}})
                await asyncio.sleep(0)

        await asyncio.gather(*(writer(kv1 if t % 2 else kv2, t) for t in range(30)))
        assert await kv1.count() == await kv2.count() == 600

        seen = []

        async def reader():
            async for k in kv1.keys():
                seen.append(k)
                await asyncio.sleep(0)

        async def churn():
            for i in range(200):
                await kv2.upsert({f"new-{i}": {}})
                await kv2.delete([f"new-{i}"])
                await asyncio.sleep(0)

        await asyncio.gather(reader(), churn())
        stable = [k for k in seen if not k.startswith("new-")]
        assert sorted(stable) == sorted(set(stable)) and len(stable) == 600


async def test_kv_big_unicode_value(tmp_path):
    big = {"text": "数据🙂" * 400_000, "n": 1.5}
    async with SQLiteKVStore(cfg(tmp_path)) as kv:
        await kv.upsert({"键🙂": big})
    async with SQLiteKVStore(cfg(tmp_path)) as kv:
        assert await kv.get("键🙂") == big


# --- SQLite doc status ----------------------------------------------------------------


async def test_doc_status_timestamps_round_trip_utc_micro(tmp_path):
    ist = timezone(timedelta(hours=5, minutes=30))
    created = datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=ist)
    naive = datetime(2024, 3, 1, 1, 2, 3, 7)
    rec = DocStatusRecord(id="d", created_at=created, updated_at=naive, metadata={"a": 1, "b": 1.0, "c": True})
    async with SQLiteDocStatusStore(cfg(tmp_path)) as ds:
        await ds.upsert([rec])
    async with SQLiteDocStatusStore(cfg(tmp_path)) as ds:
        (got,) = await ds.get(["d"])
    assert got.created_at == created and got.created_at.tzinfo is timezone.utc
    assert got.created_at.microsecond == 123456
    assert got.updated_at == naive.replace(tzinfo=timezone.utc)  # naive is taken as UTC
    assert got.updated_at.tzinfo is timezone.utc
    assert got.metadata == {"a": 1, "b": 1.0, "c": True}
    assert [type(v) for v in got.metadata.values()] == [int, float, bool]


async def test_doc_status_counts_and_keyset_pages(tmp_path):
    async with SQLiteDocStatusStore(cfg(tmp_path)) as ds:
        assert await ds.counts() == {s: 0 for s in DocStatus}
        statuses = list(DocStatus)
        await ds.upsert(
            DocStatusRecord(id=f"doc-{i:05d}", status=statuses[i % 5]) for i in range(2500)
        )
        assert len(statuses) == 5 and await ds.counts() == {s: 500 for s in DocStatus}
        with pytest.raises(InvalidValueError):
            await ds.list_page(limit=0)

        # page through everything while other tasks insert and delete documents
        ids: list[str] = []
        cursor = None
        extra = 0
        while True:
            page = await ds.list_page(limit=97, cursor=cursor)
            ids += [r.id for r in page.items]
            await ds.upsert([DocStatusRecord(id=f"doc-{extra:05d}x"), DocStatusRecord(id=f"a{extra}")])
            await ds.delete([f"doc-{extra:05d}x"])
            extra += 1
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        original = [i for i in ids if not i.endswith("x") and i.startswith("doc-")]
        assert original == [f"doc-{i:05d}" for i in range(2500)]
        assert ids == sorted(ids)

        failed = []
        cursor = None
        while True:
            page = await ds.list_page(DocStatus.FAILED, limit=100, cursor=cursor)
            assert all(r.status is DocStatus.FAILED for r in page.items)
            failed += [r.id for r in page.items]
            if not page.next_cursor:
                break
            cursor = page.next_cursor
        assert failed == [f"doc-{i:05d}" for i in range(3, 2500, 5)]
        # exactly one full last page: no cursor pointing at an empty page
        assert (await ds.list_page(DocStatus.FAILED, limit=500)).next_cursor is None


async def test_doc_status_rejects_bad_records(tmp_path):
    async with SQLiteDocStatusStore(cfg(tmp_path)) as ds:
        with pytest.raises(InvalidValueError):
            await ds.upsert([DocStatusRecord(id="ok"), DocStatusRecord(id="")])
        with pytest.raises(InvalidValueError):
            await ds.upsert([DocStatusRecord(id="x", metadata={"f": float("nan")})])
        assert await ds.count() == 0


# --- numpy vectors --------------------------------------------------------------------


async def test_vectors_file_written_on_flush_only_atomically(tmp_path):
    store = NumpyVectorStore(vcfg(tmp_path, "chunks"))
    path = tmp_path / "w1" / "vectors" / "chunks.npz"
    assert store.path == path
    async with store:
        await store.upsert(["a", "b"], rand(2), [{"x": 1}, {"y": "z"}])
        assert not path.exists()  # in memory until flush
        await store.flush()
        assert path.exists()
        stat = path.stat()
        await store.flush()  # not dirty: not rewritten
        assert path.stat().st_ino == stat.st_ino and path.stat().st_mtime_ns == stat.st_mtime_ns
        await store.delete(["missing"])  # no change: still clean
        await store.flush()
        assert path.stat().st_ino == stat.st_ino
        await store.upsert(["c"], rand(1, seed=1))
    assert path.stat().st_ino != stat.st_ino  # close flushed the change via a new file
    assert temp_files(tmp_path) == []
    with np.load(path, allow_pickle=False) as data:
        assert set(data.files) == {"vectors", "header"}
        assert data["vectors"].shape == (3, DIM)


async def test_vectors_reload_exact(tmp_path):
    ids = ["plain", "引号\"'`{}", "emoji🙂", "x" * 300]
    vecs = rand(4) * np.array([[1.0], [1e-3], [1e3], [7.0]], dtype=np.float32)
    meta = [{"i": 1, "f": 1.0, "b": True, "s": "字"}, {}, {"neg": -2}, {"big": 2**40}]
    async with NumpyVectorStore(vcfg(tmp_path)) as store:
        await store.upsert(ids, vecs, meta)
    async with NumpyVectorStore(vcfg(tmp_path)) as store:
        assert await store.count() == 4
        assert sorted([i async for i in store.ids()]) == sorted(ids)
        got = await store.get(ids + ["nope"])
        assert got[-1] is None
        for rec, v, m in zip(got, vecs, meta):
            assert np.array_equal(np.asarray(rec.vector, dtype=np.float32), v)  # bit-exact
            assert rec.metadata == m
            assert [type(x) for x in rec.metadata.values()] == [type(x) for x in m.values()]
        hits = await store.query(vecs[2], 1)
        assert hits[0].id == "emoji🙂" and hits[0].score == pytest.approx(1.0, abs=1e-6)


async def test_vectors_of_another_embedder_open_and_are_refused_when_read_or_written(tmp_path):
    """Issue 32: another embedder's store opens (status, documents, delete by id
    need no vectors); reading or writing vectors names the embedder recorded in
    the file, the configured one and the fix."""
    made_by = "sentence-transformers (minilm:384)"
    async with NumpyVectorStore(vcfg(tmp_path, dim=DIM).model_copy(update={"embedder": made_by})) as store:
        await store.upsert(["a", "b"], rand(2))
    wrong = NumpyVectorStore(vcfg(tmp_path, dim=DIM + 1).model_copy(update={"embedder": "hash (hash-9)"}))
    async with wrong:
        assert await wrong.count() == 2 and sorted([i async for i in wrong.ids()]) == ["a", "b"]
        for call in (wrong.upsert(["c"], rand(1, DIM + 1)), wrong.query(rand(1, DIM + 1)[0], 1), wrong.get(["a"])):
            with pytest.raises(DimensionMismatchError) as info:
                await call
            message = str(info.value)
            assert f"dimension {DIM} made by the embedder {made_by}" in message, message
            assert f"hash (hash-9) makes vectors of dimension {DIM + 1}" in message
            assert "RAGKIT_EMBEDDER" in message and "re-index" in message and str(wrong.path) in message
        await wrong.delete(["a"])  # deleting ids reads no vector
    async with NumpyVectorStore(vcfg(tmp_path, dim=DIM)) as store:  # still the first embedder's, less "a"
        assert [r is not None for r in await store.get(["a", "b"])] == [False, True]
    # an emptied store takes any embedder's vectors: there are none to mix with
    async with NumpyVectorStore(vcfg(tmp_path, "empty", dim=4)) as empty:
        await empty.upsert(["a"], rand(1, 4))
        await empty.delete(["a"])
    async with NumpyVectorStore(vcfg(tmp_path, "empty", dim=5)) as other:
        await other.upsert(["b"], rand(1, 5))
    async with NumpyVectorStore(vcfg(tmp_path, "empty", dim=5)) as other:
        assert len((await other.get(["b"]))[0].vector) == 5


async def test_vectors_failed_write_keeps_old_file(tmp_path, monkeypatch):
    store = NumpyVectorStore(vcfg(tmp_path))
    await store.open()
    await store.upsert(["a"], rand(1))
    await store.flush()
    before = store.path.read_bytes()
    await store.upsert(["b"], rand(1, seed=2))

    def boom(fh, **arrays):
        fh.write(b"partial garbage")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", boom)
    with pytest.raises(StoreError, match="disk full"):  # the OS error, named with its file
        await store.flush()
    assert store.path.read_bytes() == before
    assert temp_files(tmp_path) == []
    monkeypatch.undo()
    await store.close()  # still dirty: the retry writes it
    async with NumpyVectorStore(vcfg(tmp_path)) as again:
        assert await again.count() == 2


async def test_vectors_stale_temp_files_removed_on_open(tmp_path):
    async with NumpyVectorStore(vcfg(tmp_path)) as store:
        await store.upsert(["a"], rand(1))
    folder = tmp_path / "w1" / "vectors"
    stale = folder / f".vecs.npz.{DEAD_PID}.abcd.tmp"
    stale.write_bytes(b"half a file")
    ours = folder / f".vecs.npz.{os.getpid()}.abcd.tmp"  # a live writer's: left alone
    ours.write_bytes(b"in progress")
    async with NumpyVectorStore(vcfg(tmp_path)) as store:
        assert await store.count() == 1
    assert not stale.exists() and ours.exists()


async def test_vectors_query_matches_brute_force(tmp_path):
    n = 3000
    vecs = rand(n, seed=3)
    ids = [f"v{i:04d}" for i in range(n)]
    meta = [{"g": i % 5, "even": i % 2 == 0} for i in range(n)]
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    async with NumpyVectorStore(vcfg(tmp_path)) as store:
        await store.upsert(ids, vecs, meta)
        for seed in range(5):
            q = rand(1, seed=100 + seed)[0]
            truth = unit @ (q / np.linalg.norm(q))
            hits = await store.query(q, 10)
            expected = np.argsort(-truth)[:10]
            assert [h.id for h in hits] == [ids[i] for i in expected]
            for h in hits:
                assert h.score == pytest.approx(truth[int(h.id[1:])], abs=1e-5)
            flt = {"g": {"$in": [1, 3]}, "even": True}
            hits = await store.query(q, 7, filter=flt)
            ok = np.array([matches_filter(m, flt) for m in meta])
            expected = [i for i in np.argsort(-truth) if ok[i]][:7]
            assert [h.id for h in hits] == [ids[i] for i in expected]
            hits = await store.query(q, n, min_score=0.3)
            got = {h.id for h in hits}
            assert all(h.score >= 0.3 for h in hits)
            assert {ids[i] for i in np.flatnonzero(truth >= 0.3 + 1e-5)} <= got
            assert got <= {ids[i] for i in np.flatnonzero(truth >= 0.3 - 1e-5)}
            keys = [(-round(h.score, 6), h.id) for h in hits]
            assert keys == sorted(keys)
        assert len(await store.query(rand(1)[0], 10 * n)) == n
        assert await store.query(rand(1)[0], 0) == []


async def test_vectors_ties_ordered_by_id_at_top_k_boundary(tmp_path):
    base = np.ones(DIM, dtype=np.float32)
    ids = [f"id-{i:03d}" for i in range(200)][::-1]  # inserted in reverse id order
    async with NumpyVectorStore(vcfg(tmp_path)) as store:
        await store.upsert(ids, np.tile(base, (200, 1)) * np.arange(1, 201, dtype=np.float32)[:, None])
        hits = await store.query(base, 5)
        assert [h.id for h in hits] == ["id-000", "id-001", "id-002", "id-003", "id-004"]


async def test_vectors_extreme_magnitudes(tmp_path):
    vecs = np.array(
        [[3e38] + [1e38] * (DIM - 1), [1e-20] * DIM, [-1e-20] + [1e-20] * (DIM - 1)],
        dtype=np.float32,
    )
    async with NumpyVectorStore(vcfg(tmp_path)) as store:
        await store.upsert(["huge", "tiny", "tiny2"], vecs)
        hits = await store.query(np.ones(DIM), 3)
        scores = {h.id: h.score for h in hits}
        unit = vecs.astype(np.float64) / np.linalg.norm(vecs.astype(np.float64), axis=1, keepdims=True)
        expected = unit @ (np.ones(DIM) / np.sqrt(DIM))
        for i, name in enumerate(["huge", "tiny", "tiny2"]):
            assert scores[name] == pytest.approx(expected[i], abs=1e-5)
            assert -1.0 <= scores[name] <= 1.0


async def test_vectors_delete_compacts_and_persists(tmp_path):
    n = 5000
    vecs = rand(n, seed=4)
    ids = [f"v{i}" for i in range(n)]
    async with NumpyVectorStore(vcfg(tmp_path)) as store:
        await store.upsert(ids, vecs)
        await store.delete(ids[: n - 100])
        assert vector_rows(store) == (100, 0)  # compacted
        await store.delete(["v4999", "v4999", "never"])
        assert await store.count() == 99
        hits = await store.query(vecs[4950], 1)
        assert hits[0].id == "v4950"
        await store.upsert(["v0"], vecs[:1])  # re-insert a deleted id
        assert (await store.get(["v0"]))[0] is not None
    async with NumpyVectorStore(vcfg(tmp_path)) as store:
        assert await store.count() == 100
        assert sorted([i async for i in store.ids()]) == sorted(["v0"] + ids[n - 100 : n - 1])


async def test_vectors_upsert_replaces_and_validates(tmp_path):
    async with NumpyVectorStore(vcfg(tmp_path)) as store:
        await store.upsert(["a"], rand(1), [{"old": 1}])
        new = rand(1, seed=9)
        await store.upsert(["a"], new, [{"new": 2}])
        (rec,) = await store.get(["a"])
        assert rec.metadata == {"new": 2} and np.array_equal(np.float32(rec.vector), new[0])
        with pytest.raises(DimensionMismatchError):
            await store.upsert(["b", "c"], rand(2, DIM + 1))
        with pytest.raises(InvalidValueError):
            await store.upsert(["b"], np.zeros((1, DIM)))
        with pytest.raises(InvalidValueError):
            await store.query(rand(1)[0], 3, filter={"x": {"$gt": 1}})
        assert await store.count() == 1
        await store.upsert([], np.empty((0, DIM)))


async def test_vectors_concurrent_writes_and_flushes(tmp_path):
    async with NumpyVectorStore(vcfg(tmp_path)) as store:

        async def worker(t):
            for i in range(25):
                await store.upsert([f"{t}-{i}"], rand(1, seed=t * 100 + i))
                if i % 5 == 0:
                    await store.flush()
                if i % 7 == 0:
                    await store.delete([f"{t}-{i}"])

        await asyncio.gather(*(worker(t) for t in range(20)))
        expected = 20 * (25 - 4)
        assert await store.count() == expected
    async with NumpyVectorStore(vcfg(tmp_path)) as store:
        assert await store.count() == expected
    assert temp_files(tmp_path) == []


async def test_vectors_100k_by_384_is_fast(tmp_path):
    n, dim = 100_000, 384
    vecs = np.random.default_rng(5).normal(size=(n, dim)).astype(np.float32)
    ids = [f"c{i}" for i in range(n)]
    async with NumpyVectorStore(vcfg(tmp_path, dim=dim)) as store:
        t0 = time.perf_counter()
        await store.upsert(ids, vecs)
        upsert_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for i in range(10):
            hits = await store.query(vecs[i], 20)
            assert hits[0].id == ids[i]
        query_s = (time.perf_counter() - t0) / 10
        t0 = time.perf_counter()
        await store.delete(ids[::3])
        delete_s = time.perf_counter() - t0
    # generous bounds (shared CI machines); the real numbers are ~10x smaller
    assert upsert_s < 5 and query_s < 0.5 and delete_s < 2, (upsert_s, query_s, delete_s)


# --- networkx graph -------------------------------------------------------------------


async def test_graph_degree_counts_self_loop_once(tmp_path):
    async with NetworkXGraphStore(cfg(tmp_path)) as g:
        await g.upsert_edges([("a", "a", {}), ("b", "a", {"w": 1}), ("a", "c", {})])
        assert await g.degrees(["a", "b", "c", "zzz"]) == [3, 1, 1, 0]
        assert g.graph.degree("a") == 4  # what networkx would say
        assert await g.edge_count() == 3
        assert await g.nodes_edges(["a", "zzz"]) == [[("a", "a"), ("a", "b"), ("a", "c")], None]
        assert await g.edge_degrees([("a", "b")]) == [4]
        await g.upsert_node("lonely", {})
        assert await g.nodes_edges(["lonely"]) == [[]]
        await g.delete_node("a")
        assert await g.edge_count() == 0 and await g.degrees(["b"]) == [0]


async def test_graph_returns_copies_and_keeps_none_of_the_callers(tmp_path):
    async with NetworkXGraphStore(cfg(tmp_path)) as g:
        props = {"tags": ["x", "y"], "n": 1}
        await g.upsert_node("a", props)
        props["tags"].append("z")
        props["n"] = 2
        got = await g.get_node("a")
        assert got == {"tags": ["x", "y"], "n": 1}
        got["tags"].append("mutated")
        await g.upsert_edge("a", "b", {"ids": [1, 2]})
        edge = await g.get_edge("b", "a")
        edge["ids"].append(3)
        async for node in g.nodes():
            node.properties.get("tags", []).append("m")
        async for e in g.edges():
            e.properties["ids"].append(4)
        assert await g.get_node("a") == {"tags": ["x", "y"], "n": 1}
        assert await g.get_edge("a", "b") == {"ids": [1, 2]}


async def test_graph_persists_json_exactly(tmp_path):
    weird = ['quo"te', "back`tick", "{brace}", "中文", "🙂", "a b", "\u2028line sep"]
    async with NetworkXGraphStore(cfg(tmp_path, "kg")) as g:
        path = tmp_path / "w1" / "graph" / "kg.json"
        assert g.path == path
        await g.upsert_nodes({n: {"name": n, "flag": True, "i": 1, "f": 1.0, "mixed": [1, 2.5, "s"]} for n in weird})
        await g.upsert_edges([(weird[i + 1], weird[i], {"w": float(i)}) for i in range(len(weird) - 1)])
        await g.upsert_edge("solo", "solo", {})
        assert not path.exists()
        await g.flush()
        assert path.exists() and temp_files(tmp_path) == []
        mtime = path.stat().st_mtime_ns
        await g.flush()
        assert path.stat().st_mtime_ns == mtime
        data = json.loads(path.read_bytes().decode("utf-8"))
        assert data["format"].startswith("ragkit.networkx-graph/")
        assert all(a <= b for a, b, _ in data["edges"])
    async with NetworkXGraphStore(cfg(tmp_path, "kg")) as g:
        assert await g.node_count() == len(weird) + 1 and await g.edge_count() == len(weird)
        for n in weird:
            got = await g.get_node(n)
            assert got == {"name": n, "flag": True, "i": 1, "f": 1.0, "mixed": [1, 2.5, "s"]}
            assert [type(v) for v in got.values()] == [str, bool, int, float, list]
            assert [type(v) for v in got["mixed"]] == [int, float, str]
        assert await g.get_edges([(weird[0], weird[1]), (weird[1], weird[0])]) == [{"w": 0.0}] * 2
        assert await g.degrees(["solo"]) == [1]
        edges = [e async for e in g.edges()]
        assert all(e.source <= e.target for e in edges) and len(edges) == len(weird)


async def test_graph_file_from_before_the_unicode_rule_still_opens(tmp_path):
    """A graph file written when ids and values could hold lone surrogates
    ([graph.text.unicode] refuses them now) opens with them as they were."""
    from ragkit.storage.networkx_graph import FORMAT

    old_id = "old \ud800 name"
    data = {"format": FORMAT, "nodes": [[old_id, {"d": "was \udfff"}], ["b", {}]], "edges": [["b", old_id, {}]]}
    path = tmp_path / "w1" / "graph" / "kg.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    async with NetworkXGraphStore(cfg(tmp_path, "kg")) as g:
        assert {n.id: n.properties async for n in g.nodes()} == {old_id: {"d": "was \udfff"}, "b": {}}
        assert await g.edge_count() == 1 and await g.degrees(["b"]) == [1]


async def test_graph_drop_removes_file_and_keeps_others(tmp_path):
    a = NetworkXGraphStore(cfg(tmp_path, "a"))
    b = NetworkXGraphStore(cfg(tmp_path, "b"))
    async with a, b:
        await a.upsert_edge("x", "y", {})
        await b.upsert_edge("x", "y", {})
        await a.flush()
        await b.flush()
        await a.drop()
        assert not a.path.exists() and b.path.exists()
        assert a.is_open and await a.node_count() == 0
    assert not a.path.exists()  # nothing to flush after a drop
    async with NetworkXGraphStore(cfg(tmp_path, "a")) as again:
        assert await again.node_count() == 0


async def test_vectors_drop_removes_file(tmp_path):
    a = NumpyVectorStore(vcfg(tmp_path, "a"))
    b = NumpyVectorStore(vcfg(tmp_path, "b"))
    async with a, b:
        await a.upsert(["x"], rand(1))
        await b.upsert(["x"], rand(1))
        await a.flush()
        await b.flush()
        await a.drop()
        assert not a.path.exists() and b.path.exists()
        assert await a.count() == 0 and await a.query(rand(1)[0], 5) == []
        await a.upsert(["y"], rand(1))
    async with NumpyVectorStore(vcfg(tmp_path, "a")) as again:
        assert [i async for i in again.ids()] == ["y"]


async def test_graph_drop_during_flush_is_not_undone(tmp_path):
    g = NetworkXGraphStore(cfg(tmp_path))
    await g.open()
    await g.upsert_nodes({f"n{i}": {"i": i} for i in range(20_000)})
    flushing = asyncio.create_task(g.flush())
    await asyncio.sleep(0)  # let the flush take its snapshot and start writing
    await g.drop()
    await flushing
    assert not g.path.exists()
    await g.close()
    async with NetworkXGraphStore(cfg(tmp_path)) as again:
        assert await again.node_count() == 0


# --- file helper ------------------------------------------------------------------------


def test_atomic_write_replaces_and_cleans_up(tmp_path):
    target = tmp_path / "sub" / "f.bin"
    journal_file.atomic_write_bytes(target, b"one")
    assert target.read_bytes() == b"one"

    def failing(fh):
        fh.write(b"tw")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        journal_file.atomic_write(target, failing)
    assert target.read_bytes() == b"one"
    assert list(target.parent.iterdir()) == [target]
    journal_file.remove_file(target)
    journal_file.remove_file(target)  # missing: fine
    assert not target.exists()


async def test_a_new_database_another_process_is_reading_opens_when_it_is_free(tmp_path):
    """Two ``ragkit index`` started together both open a new SQLite file, and
    putting it in WAL mode needs the file to itself: SQLite runs no busy
    handler for that, so the second failed at once with "database is locked"
    (seen in CI). Here another connection holds a write on the new file for
    0.3 s while the store opens: the store waits, then opens in WAL mode.

    Troubleshoot: ``ragkit.storage._sqlite._use_wal``.
    """
    path = tmp_path / "w1" / "ragkit.sqlite"
    path.parent.mkdir()
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE t (x)")  # a new file: rollback journal, as SQLite creates one
    other.execute("BEGIN IMMEDIATE")  # the other process's write (its own conversion, say), held
    release = threading.Timer(0.3, other.execute, ["COMMIT"])
    release.start()
    store = SQLiteKVStore(cfg(tmp_path))
    started = time.monotonic()
    await store.open()
    try:
        assert time.monotonic() - started >= 0.25, "opened while the other write held the file"
        await store.upsert({"k": {"v": 1}})
        assert await store.get("k") == {"v": 1}
        with contextlib.closing(sqlite3.connect(path)) as another:
            assert another.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        release.join()
        await store.close()
        other.close()


async def test_a_database_locked_past_the_busy_timeout_is_named_as_such(tmp_path, monkeypatch):
    """A lock held longer than the busy timeout says so (it said "If its disk
    is full ..."), and the file is left as it was."""
    monkeypatch.setattr("ragkit.storage._sqlite.BUSY_TIMEOUT_MS", 200)
    path = tmp_path / "w1" / "ragkit.sqlite"
    path.parent.mkdir()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("CREATE TABLE t (x)")
    other.execute("INSERT INTO t VALUES (1)")
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="stayed locked by another connection for 0.2 s") as caught:
            await SQLiteKVStore(cfg(tmp_path)).open()
        assert "run the command again" in str(caught.value) and "disk is full" not in str(caught.value)
    finally:
        other.execute("COMMIT")
        other.close()
    with contextlib.closing(sqlite3.connect(path)) as again:
        assert again.execute("SELECT x FROM t").fetchall() == [(1,)]


@pytest.mark.parametrize("content", [b'{"format": "another/1", "nodes": [], "edges": []}', b"[1, 2]"])
async def test_a_graph_file_of_another_format_is_refused_by_name(tmp_path, content):
    """A JSON file at the graph's path that is not a ragkit graph (another
    format, or not an object) is not loaded as one: the error names the file,
    the format expected and the fix."""
    store = NetworkXGraphStore(cfg(tmp_path))
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(content)
    with pytest.raises(StoreError, match=r"cannot read graph file .*not a ragkit\.networkx-graph/1 file; restore"):
        await store.open()


async def test_a_doc_status_adapter_that_ignores_its_page_limit_is_named(tmp_path):
    """``list_page`` asks ``_list_page`` for ``limit + 1`` records; an adapter
    that returns more (it ignored the limit, and reads a whole store per page)
    is refused by the base class with a message naming it."""

    class Unlimited(SQLiteDocStatusStore):
        async def _list_page(self, status, limit, after):
            return await super()._list_page(status, 1_000, after)

    async with Unlimited(cfg(tmp_path)) as ds:
        await ds.upsert([DocStatusRecord(id=f"d{i}") for i in range(5)])
        assert len((await ds.list_page(limit=4)).items) == 4  # 5 rows: as many as asked
        with pytest.raises(StoreError, match=r"^Unlimited\._list_page returned 5 records when asked for at most 3: "
                                             "the adapter must apply its limit$"):
            await ds.list_page(limit=2)
