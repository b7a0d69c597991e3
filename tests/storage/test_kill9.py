"""Acceptance: data written through the embedded defaults survives ``kill -9``.

A child process writes through the four default stores, flushes, says so and
sleeps; the test SIGKILLs it and opens fresh instances. A second test kills a
child that keeps rewriting its vector and graph files at a random moment and
checks that what is on disk is always a complete snapshot.
"""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ragkit.protocols.base import StoreConfig
from ragkit.schema import DocStatus
from ragkit.storage import (
    NetworkXGraphStore,
    NumpyVectorStore,
    SQLiteDocStatusStore,
    SQLiteKVStore,
)

pytestmark = pytest.mark.skipif(
    not hasattr(signal, "SIGKILL"), reason="needs POSIX signals"
)

DIM = 16

_PRELUDE = """
import asyncio, sys
import numpy as np
from ragkit.protocols.base import StoreConfig
from ragkit.schema import DocStatus, DocStatusRecord
from ragkit.storage import (
    NetworkXGraphStore, NumpyVectorStore, SQLiteDocStatusStore, SQLiteKVStore,
)
root = sys.argv[1]
DIM = int(sys.argv[2])

def cfg(ns, **kw):
    return StoreConfig(namespace=ns, workspace="w", working_dir=root, **kw)

def vectors(n, seed):
    return np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
"""

WRITE_ONCE = _PRELUDE + """
async def main():
    kv = SQLiteKVStore(cfg("chunks"))
    ds = SQLiteDocStatusStore(cfg("doc_status"))
    vs = NumpyVectorStore(cfg("chunks_vdb", dimension=DIM))
    gs = NetworkXGraphStore(cfg("kg"))
    for s in (kv, ds, vs, gs):
        await s.open()
    await kv.upsert({f"chunk-{i}": {"content": f"text {i} \u6587\u5b57", "i": i} for i in range(300)})
    await kv.delete(["chunk-0"])
    await ds.upsert([DocStatusRecord(id=f"doc-{i}") for i in range(50)])
    await ds.transition("doc-7", DocStatus.PROCESSING)
    await ds.transition("doc-7", DocStatus.PROCESSED)
    await vs.upsert([f"chunk-{i}" for i in range(300)], vectors(300, 1),
                    [{"doc": f"doc-{i % 50}"} for i in range(300)])
    await vs.delete(["chunk-0"])
    await gs.upsert_edges([(f"e{i}", f"e{i + 1}", {"w": float(i)}) for i in range(99)])
    await gs.upsert_edge("e0", "e0", {"self": True})
    for s in (kv, ds, vs, gs):
        await s.flush()
    print("FLUSHED", flush=True)
    # Writes after the marker that are committed on return (SQLite) must survive too.
    await kv.upsert({"late": {"committed": True}})
    print("LATE", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""

WRITE_LOOP = _PRELUDE + """
BATCH = int(sys.argv[3])

async def main():
    vs = NumpyVectorStore(cfg("vecs", dimension=DIM))
    gs = NetworkXGraphStore(cfg("graph"))
    await vs.open()
    await gs.open()
    i = 0
    while True:
        await vs.upsert([f"{i}-{j}" for j in range(BATCH)], vectors(BATCH, i),
                        [{"batch": i}] * BATCH)
        await gs.upsert_edges([(f"{i}-{j}", f"{i}-{j + 1}", {"batch": i}) for j in range(BATCH)])
        await vs.flush()
        await gs.flush()
        print(f"DONE {i}", flush=True)
        i += 1

asyncio.run(main())
"""


WRITE_THEN_HANG_MID_FILE = _PRELUDE + """
import os, time
from ragkit.storage import snapshot_journal as journal_file

real_atomic_write = journal_file.atomic_write
state = {"hang": False}

def atomic_write(target, write):
    if not state["hang"]:
        return real_atomic_write(target, write)
    import io
    buf = io.BytesIO()
    write(buf)
    data = buf.getvalue()
    def half(fh):
        fh.write(data[: len(data) // 2])
        fh.flush()
        os.fsync(fh.fileno())
        print("MID " + target.name, flush=True)
        time.sleep(600)
    return real_atomic_write(target, half)

journal_file.atomic_write = atomic_write

async def main():
    store = (NumpyVectorStore(cfg("vecs", dimension=DIM)) if sys.argv[3] == "vector"
             else NetworkXGraphStore(cfg("graph")))
    await store.open()
    async def write(i):
        if isinstance(store, NumpyVectorStore):
            await store.upsert([f"v{i}"], vectors(1, i), [{"i": i}])
        else:
            await store.upsert_edge(f"n{i}", f"n{i + 1}", {"i": i})
    for i in range(10):
        await write(i)
    await store.flush()
    print("FLUSHED", flush=True)
    state["hang"] = True
    for i in range(10, 20):
        await write(i)
    await store.flush()  # hangs half-way through the temp file

asyncio.run(main())
"""


class Child:
    """A child python process whose stdout lines are read by a thread."""

    def __init__(self, code: str, *args: object) -> None:
        env = dict(os.environ)
        repo = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def wait_for(self, prefix: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.proc.poll() is not None and self.lines.empty():
                self.kill()
                err = self.proc.stderr.read() if self.proc.stderr else ""
                pytest.fail(f"child never printed {prefix!r}; stderr:\n{err}")
            try:
                line = self.lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if line.startswith(prefix):
                return line

    def drain(self) -> list[str]:
        out = []
        while True:
            try:
                out.append(self.lines.get_nowait())
            except queue.Empty:
                return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._thread.join(timeout=5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def cfg(root: Path, ns: str, **kw) -> StoreConfig:
    return StoreConfig(namespace=ns, workspace="w", working_dir=root, **kw)


async def test_flushed_data_survives_kill_9(tmp_path):
    child = Child(WRITE_ONCE, tmp_path, DIM)
    try:
        child.wait_for("FLUSHED")
        child.wait_for("LATE")
    finally:
        child.kill()
    assert child.proc.returncode == -signal.SIGKILL

    expected_vectors = np.random.default_rng(1).normal(size=(300, DIM)).astype(np.float32)

    async with SQLiteKVStore(cfg(tmp_path, "chunks")) as kv:
        assert await kv.count() == 300  # 299 chunks + "late"
        assert await kv.get("chunk-5") == {"content": "text 5 \u6587\u5b57", "i": 5}
        assert await kv.get("chunk-0") is None
        assert await kv.get("late") == {"committed": True}

    async with SQLiteDocStatusStore(cfg(tmp_path, "doc_status")) as ds:
        counts = await ds.counts()
        assert counts[DocStatus.PENDING] == 49 and counts[DocStatus.PROCESSED] == 1
        (doc,) = await ds.get(["doc-7"])
        assert doc.status is DocStatus.PROCESSED and doc.updated_at.tzinfo is not None

    async with NumpyVectorStore(cfg(tmp_path, "chunks_vdb", dimension=DIM)) as vs:
        assert await vs.count() == 299
        records = await vs.get([f"chunk-{i}" for i in range(300)])
        assert records[0] is None
        for i, rec in enumerate(records[1:], start=1):
            assert np.array_equal(np.float32(rec.vector), expected_vectors[i])
            assert rec.metadata == {"doc": f"doc-{i % 50}"}
        hits = await vs.query(expected_vectors[42], 1, filter={"doc": "doc-42"})
        assert hits[0].id == "chunk-42"

    async with NetworkXGraphStore(cfg(tmp_path, "kg")) as gs:
        assert await gs.node_count() == 100 and await gs.edge_count() == 100
        assert await gs.get_edge("e6", "e5") == {"w": 5.0}
        assert await gs.get_edge("e0", "e0") == {"self": True}
        assert await gs.degrees(["e0", "e50"]) == [2, 2]

    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


@pytest.mark.parametrize("round_", range(4))
async def test_kill_9_mid_rewrite_leaves_a_complete_file(tmp_path, round_):
    batch = 400  # files grow by ~25 KB of vectors per flush: rewrites take a while
    child = Child(WRITE_LOOP, tmp_path, DIM, batch)
    try:
        child.wait_for("DONE 2")
        time.sleep(random.Random(round_).uniform(0.0, 0.4))
    finally:
        child.kill()
    confirmed = [int(line.split()[1]) for line in child.drain() if line.startswith("DONE")]
    last_done = max(confirmed, default=2)

    # Whatever moment the kill hit, each file is a complete snapshot of whole batches,
    # and every flush the child reported as done is in it.
    async with NumpyVectorStore(cfg(tmp_path, "vecs", dimension=DIM)) as vs:
        n = await vs.count()
        assert n % batch == 0 and n // batch >= last_done + 1
        batches = n // batch
        ids = {i async for i in vs.ids()}
        assert ids == {f"{i}-{j}" for i in range(batches) for j in range(batch)}
        probe = np.random.default_rng(batches - 1).normal(size=(batch, DIM)).astype(np.float32)
        (rec,) = await vs.get([f"{batches - 1}-7"])
        assert np.array_equal(np.float32(rec.vector), probe[7])
        assert rec.metadata == {"batch": batches - 1}

    async with NetworkXGraphStore(cfg(tmp_path, "graph")) as gs:
        edges = await gs.edge_count()
        assert edges % batch == 0 and edges // batch >= last_done + 1
        assert await gs.node_count() == (edges // batch) * (batch + 1)

    # Opening removed the temp file a killed writer may have left behind.
    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


@pytest.mark.parametrize("kind", ["vector", "graph"])
async def test_kill_9_with_half_written_temp_file(tmp_path, kind):
    child = Child(WRITE_THEN_HANG_MID_FILE, tmp_path, DIM, kind)
    try:
        child.wait_for("FLUSHED")
        child.wait_for("MID")
    finally:
        child.kill()
    temps = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert len(temps) == 1 and temps[0].stat().st_size > 0  # the torn write is there

    # The target still holds the previous complete snapshot; the torn temp file is
    # ignored, and removed because its writer is dead.
    if kind == "vector":
        async with NumpyVectorStore(cfg(tmp_path, "vecs", dimension=DIM)) as vs:
            assert sorted([i async for i in vs.ids()]) == sorted(f"v{i}" for i in range(10))
    else:
        async with NetworkXGraphStore(cfg(tmp_path, "graph")) as gs:
            assert await gs.edge_count() == 10 and await gs.get_edge("n4", "n5") == {"i": 4}
    assert not temps[0].exists()
