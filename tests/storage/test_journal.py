"""The journal of the file-backed embedded stores (graph and vector): a flush
appends only what changed, a torn tail is ignored, a damaged middle is an error,
compaction and generations keep reloads exact, and kill -9 loses no confirmed flush.

Every test runs on both stores. A store's state is compared with a reference
store that received the same batches and never touched the disk.

Troubleshooting: ``reopened`` copies the files to a fresh folder before opening
them (opening then closing compacts, which would change the files under test).
A state difference names the store and the batch count; inspect the journal
with ``ragkit.storage.snapshot_journal.read_journal(path)``. The kill tests run
``child_main`` of this module in a child process: run it by hand with
``python -c "import sys; sys.path.insert(0, 'tests/storage'); import asyncio,
test_journal as t; asyncio.run(t.child_main('/tmp/j', 'graph', 'loop'))"``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ragkit.errors import StoreError
from ragkit.protocols.base import StoreConfig
from ragkit.storage import NetworkXGraphStore, NumpyVectorStore
from ragkit.storage import snapshot_journal as journal_file
from ragkit.testing.store_files import journal_good_bytes, journaled_file

DIM = 16
KINDS = ["graph", "vector"]


# --- the same deterministic batches for the stores, the references and the children ---


def batch_size(i: int) -> int:
    return 200 if i == 0 else 12


def make(kind: str, root: Path, namespace: str = "s"):
    cfg = StoreConfig(namespace=namespace, workspace="w", working_dir=root, dimension=DIM)
    return NetworkXGraphStore(cfg) if kind == "graph" else NumpyVectorStore(cfg)


async def apply_batch(store, i: int, size: int | None = None) -> None:
    """Batch ``i``: new items, updates of the previous batch, deletions (of
    edges, of nodes with their edges), and an id deleted then written again."""
    size = batch_size(i) if size is None else size
    if isinstance(store, NetworkXGraphStore):
        await _graph_batch(store, i, size)
    else:
        await _vector_batch(store, i, size)


async def _graph_batch(g: NetworkXGraphStore, i: int, size: int) -> None:
    await g.upsert_nodes({f"n{i}-{j}": {"batch": i, "j": j, "tags": ["t", str(j)]} for j in range(size)})
    await g.upsert_edges([(f"n{i}-{j + 1}", f"n{i}-{j}", {"batch": i}) for j in range(size - 1)])
    if i == 0:
        return
    await g.upsert_edges([(f"n{i - 1}-0", f"n{i}-0", {"link": i}), (f"x{i}", f"x{i}", {})])
    await g.upsert_nodes({f"n{i - 1}-{j}": {"updated": i} for j in range(0, size, 3)})
    await g.delete_edges([(f"n{i - 1}-{j}", f"n{i - 1}-{j + 1}") for j in range(4, size, 5)])
    await g.delete_nodes([f"n{i - 1}-{j}" for j in range(5, size, 4)])
    await g.delete_node(f"n{i - 1}-1")  # its edges go; re-adding the node must not revive them
    await g.upsert_node(f"n{i - 1}-1", {"readded": i})


async def _vector_batch(v: NumpyVectorStore, i: int, size: int) -> None:
    vecs = np.random.default_rng(i).normal(size=(size, DIM)).astype(np.float32)
    await v.upsert([f"v{i}-{j}" for j in range(size)], vecs, [{"batch": i, "j": j} for j in range(size)])
    if i == 0:
        return
    again = np.random.default_rng(1000 + i).normal(size=(2, DIM)).astype(np.float32)
    await v.upsert([f"v{i - 1}-1", f"v{i - 1}-2"], again, [{"updated": i}, {"updated": -i}])
    await v.delete([f"v{i - 1}-{j}" for j in range(3, size, 4)])
    await v.delete([f"v{i - 1}-2"])
    await v.upsert([f"v{i - 1}-2"], again[::-1][:1], [{"readded": i}])


async def state(store) -> dict:
    if isinstance(store, NetworkXGraphStore):
        nodes = {n.id: n.properties async for n in store.nodes()}
        edges = {(e.source, e.target): e.properties async for e in store.edges()}
        return {"nodes": nodes, "edges": edges}
    ids = sorted([i async for i in store.ids()])
    return {r.id: (r.vector, r.metadata) for r in await store.get(ids)}


async def reference(kind: str, root: Path, batches: int) -> dict:
    """The state after ``batches`` batches, built in memory (never flushed)."""
    store = make(kind, root / f"ref-{batches}")
    await store.open()
    for i in range(batches):
        await apply_batch(store, i)
    return await state(store)


_scratch = itertools.count()


def files_of(store) -> dict[str, bytes]:
    """The store's snapshot and journal, by name."""
    folder, name = store.path.parent, store.path.name
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name.startswith(name)}


async def reopened(kind: str, root: Path, files: dict[str, bytes]) -> dict:
    """The state a new process loads from ``files`` (see ``files_of``), opened in a
    fresh folder under ``root`` so that the files under test stay as they are.

    The store is left open: it holds no file handles, and closing would compact,
    a full rewrite with fsyncs that makes the every-byte test slow.
    """
    store = make(kind, root / f"scratch-{next(_scratch)}")
    store.path.parent.mkdir(parents=True)
    for name, data in files.items():
        (store.path.parent / name).write_bytes(data)
    await store.open()
    return await state(store)


def journal_size(store) -> int:
    journal = journaled_file(store).journal
    return journal.stat().st_size if journal.exists() else 0


@pytest.fixture
def journal_small_stores(monkeypatch):
    """Let small stores journal too (normally a snapshot under 64 KiB is simply
    rewritten), so that tests can use small, fast stores."""
    monkeypatch.setattr(journal_file, "SMALL_SNAPSHOT", 0)


# --- torn tail, damaged middle ----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_torn_tail_at_every_byte_loads_previous_flush(kind, tmp_path, journal_small_stores):
    store = make(kind, tmp_path)
    await store.open()
    sizes = []
    for i in range(3):
        await apply_batch(store, i)
        await store.flush()
        sizes.append(journal_size(store))
    before_last, end = sizes[1], sizes[2]
    assert 0 < before_last < end  # batches 1 and 2 are journal records
    files = files_of(store)
    name = journaled_file(store).journal.name
    two, three = await reference(kind, tmp_path, 2), await reference(kind, tmp_path, 3)
    assert await reopened(kind, tmp_path, files) == three

    for cut in range(before_last, end):
        torn = {**files, name: files[name][:cut]}
        assert await reopened(kind, tmp_path, torn) == two, f"journal cut at byte {cut}"

    # A store opened over a torn tail appends over it, not after it, and leaves
    # none of it behind even when the new record is shorter.
    again = make(kind, tmp_path / "torn")
    again.path.parent.mkdir(parents=True)
    torn_length = end - 10
    torn = {**files, name: files[name][:torn_length]}
    for file_name, data in torn.items():
        (again.path.parent / file_name).write_bytes(data)
    async with again:
        assert await state(again) == two
        await apply_batch(again, 2, size=1)
        await again.flush()
        assert before_last < journal_size(again) < torn_length
        expected = await state(again)
        assert expected != two and await reopened(kind, tmp_path, files_of(again)) == expected


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("where", ["header", "payload", "length", "magic", "crc"])
async def test_damaged_middle_record_is_a_clear_error(kind, where, tmp_path, journal_small_stores):
    store = make(kind, tmp_path)
    await store.open()
    sizes = []
    for i in range(3):
        await apply_batch(store, i)
        await store.flush()
        sizes.append(journal_size(store))
    journal = journaled_file(store).journal
    data = bytearray(journal.read_bytes())
    header = journal_file.read_frames(bytes(data))[0][0]
    first = 12 + len(header)  # batch 1's record starts after the header frame
    offset = {"header": 14, "magic": first + 1, "length": first + 5, "crc": first + 9,
              "payload": first + 20}[where]
    data[offset] ^= 0x5A
    with pytest.raises(StoreError) as info:
        await reopened(kind, tmp_path, {**files_of(store), journal.name: bytes(data)})
    message = str(info.value)
    assert journal.name in message and "damaged" in message
    assert "backup" in message and "delete" in message


@pytest.mark.parametrize("kind", KINDS)
async def test_damaged_last_record_is_a_torn_tail(kind, tmp_path, journal_small_stores):
    """Undistinguishable from a tail a power cut left unwritten: the last flush is lost."""
    store = make(kind, tmp_path)
    await store.open()
    for i in range(3):
        await apply_batch(store, i)
        await store.flush()
    data = bytearray(journaled_file(store).journal.read_bytes())
    data[-3] ^= 0x01
    damaged = {**files_of(store), journaled_file(store).journal.name: bytes(data)}
    assert await reopened(kind, tmp_path, damaged) == await reference(kind, tmp_path, 2)


# --- sizes: a flush costs what changed -----------------------------------------------


async def _grow(kind: str, store, n: int) -> None:
    if kind == "graph":
        await store.upsert_nodes({f"n{i:06d}": {"v": f"{i:06d}", "w": 1.5} for i in range(n)})
    else:
        vecs = np.random.default_rng(n).normal(size=(n, DIM)).astype(np.float32)
        await store.upsert([f"v{i:06d}" for i in range(n)], vecs, [{"v": f"{i:06d}"} for i in range(n)])


async def _change(kind: str, store, n: int, round_: int) -> None:
    """``n`` changes whose records all have the same size: half of them updates,
    half deletions, of items ``_grow`` wrote (for rounds 0-4)."""
    ids = [f"{round_ * 1000 + i:06d}" for i in range(n)]
    if kind == "graph":
        await store.upsert_nodes({f"n{i}": {"v": i, "w": 2.5} for i in ids[::2]})
        await store.delete_nodes([f"n{i}" for i in ids[1::2]])
    else:
        vecs = np.ones((len(ids[::2]), DIM), dtype=np.float32)
        await store.upsert([f"v{i}" for i in ids[::2]], vecs, [{"v": i} for i in ids[::2]])
        await store.delete([f"v{i}" for i in ids[1::2]])


@pytest.mark.parametrize("kind", KINDS)
async def test_flush_appends_what_changed_not_the_store(kind, tmp_path):
    """With the default threshold: after N changes a flush appends a + b*N bytes,
    the same for a store 4x larger, and leaves the snapshot untouched."""
    growth: dict[int, list[int]] = {}
    snapshot_size: dict[int, int] = {}
    for n_items in (5_000, 20_000):
        store = make(kind, tmp_path, f"s{n_items}")
        await store.open()
        await _grow(kind, store, n_items)
        await store.flush()
        snapshot = store.path.stat()
        snapshot_size[n_items] = snapshot.st_size
        assert snapshot.st_size > journal_file.SMALL_SNAPSHOT and journal_size(store) == 0
        await _change(kind, store, 2, 0)  # starts the journal (header)
        await store.flush()
        sizes = []
        for round_, n in enumerate((2, 20, 200), start=1):
            before = journal_size(store)
            await _change(kind, store, n, round_)
            await store.flush()
            sizes.append(journal_size(store) - before)
        after = store.path.stat()
        assert (after.st_ino, after.st_mtime_ns) == (snapshot.st_ino, snapshot.st_mtime_ns)
        growth[n_items] = sizes
        await store.close()
    assert growth[5_000] == growth[20_000]
    d2, d20, d200 = growth[5_000]
    assert d20 - d2 > 0 and d200 - d20 == 10 * (d20 - d2)  # affine in N
    assert d200 < 0.05 * snapshot_size[5_000]


# --- compaction and generations -------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_compaction_when_journal_outgrows_snapshot(kind, tmp_path):
    store = make(kind, tmp_path)
    await store.open()
    await _grow(kind, store, 3_000)
    await store.flush()
    assert journaled_file(store).generation == 1  # the first flush writes a snapshot
    round_ = 0
    while journaled_file(store).generation == 1:
        snapshot_size = store.path.stat().st_size
        await _change(kind, store, 400, round_)
        await store.flush()
        round_ += 1
        assert journal_size(store) <= snapshot_size  # compacts rather than outgrow it
        assert round_ < 100, "never compacted"
    assert round_ > 3  # a few appends first
    assert not journaled_file(store).journal.exists()  # a fresh journal starts later
    expected = await state(store)
    assert await reopened(kind, tmp_path, files_of(store)) == expected
    await _change(kind, store, 10, 99)  # then appends again, to the new generation
    await store.flush()
    expected = await state(store)
    journal = journal_file.read_journal(journaled_file(store).journal)
    assert journal.generation == 2 and len(journal.payloads) == 1
    assert await reopened(kind, tmp_path, files_of(store)) == expected
    await store.close()  # close folds the journal in
    assert not journaled_file(store).journal.exists()
    async with make(kind, tmp_path) as again:
        assert await state(again) == expected and journaled_file(again).generation == 3


@pytest.mark.parametrize("kind", KINDS)
async def test_stale_journal_generation_is_ignored(kind, tmp_path, journal_small_stores):
    """A crash after a compaction replaced the snapshot but before it removed the
    journal leaves an older journal: replaying it would undo later changes."""
    store = make(kind, tmp_path)
    await store.open()
    await apply_batch(store, 0)
    await store.flush()
    await apply_batch(store, 1)
    await store.flush()
    stale = journaled_file(store).journal.read_bytes()
    await apply_batch(store, 2)  # updates and deletes what batch 1 wrote
    await store.close()  # compaction: generation 2
    journaled_file(store).journal.write_bytes(stale)  # as if the removal never happened
    three = await reference(kind, tmp_path, 3)
    async with make(kind, tmp_path) as again:
        assert await state(again) == three
        await apply_batch(again, 3)
        await again.flush()  # restarts the journal rather than appending to the stale one
        assert journal_file.read_journal(journaled_file(again).journal).generation == 2
        assert await reopened(kind, tmp_path, files_of(again)) == await reference(kind, tmp_path, 4)


@pytest.mark.parametrize("kind", KINDS)
async def test_journal_newer_than_snapshot_or_orphaned_is_an_error(kind, tmp_path, journal_small_stores):
    store = make(kind, tmp_path)
    await store.open()
    await apply_batch(store, 0)
    await store.flush()
    old_snapshot = store.path.read_bytes()  # generation 1
    await apply_batch(store, 1)
    await store.close()  # generation 2
    await store.open()
    await apply_batch(store, 2)
    await store.flush()  # a journal of generation 2
    journal = journaled_file(store).journal
    assert journal_file.read_journal(journal).generation == 2
    with pytest.raises(StoreError, match="newer than") as info:
        await reopened(kind, tmp_path, {**files_of(store), store.path.name: old_snapshot})
    # The message names which store's journal: a workspace has one of each kind.
    assert f"{kind} journal " in str(info.value) and journal.name in str(info.value) and "delete" in str(info.value)
    store.path.unlink()  # someone deleted the snapshot only
    with pytest.raises(StoreError, match="missing") as info:
        await make(kind, tmp_path).open()
    assert f"{kind} journal {journal}" in str(info.value) and "delete" in str(info.value)


@pytest.mark.parametrize("kind", KINDS)
async def test_snapshot_files_without_journal_still_open(kind, tmp_path, journal_small_stores):
    """Files written before the journal existed: no generation, no journal."""
    store = make(kind, tmp_path)
    store.path.parent.mkdir(parents=True)
    if kind == "graph":
        store.path.write_text(json.dumps({
            "format": "ragkit.networkx-graph/1",
            "nodes": [["a", {"k": [1, 2.5]}], ["b", {}]],
            "edges": [["a", "b", {"w": 1.0}]],
        }))
        expected = {"nodes": {"a": {"k": [1, 2.5]}, "b": {}, "c": {}},
                    "edges": {("a", "b"): {"w": 1.0}, ("b", "c"): {}}}
    else:
        header = json.dumps({"format": "ragkit.numpy-vectors/1", "dimension": DIM,
                             "ids": ["a", "b"], "metadata": [{"k": 1}, {}]}).encode()
        vecs = np.arange(2 * DIM, dtype=np.float32).reshape(2, DIM) + 1
        with open(store.path, "wb") as fh:
            np.savez(fh, vectors=vecs, header=np.frombuffer(header, dtype=np.uint8))
        expected = {"a": (vecs[0].tolist(), {"k": 1}), "b": (vecs[1].tolist(), {}),
                    "c": ([1.0] * DIM, {})}
    await store.open()
    assert journaled_file(store).generation == 0
    if kind == "graph":
        await store.upsert_edge("b", "c", {})
    else:
        await store.upsert(["c"], np.ones((1, DIM)))
    await store.flush()  # a journal of generation 0 over the old file
    assert journal_file.read_journal(journaled_file(store).journal).generation == 0
    assert await reopened(kind, tmp_path, files_of(store)) == expected
    await store.close()
    async with make(kind, tmp_path) as again:
        assert await state(again) == expected and journaled_file(again).generation == 1


# --- concurrency, failures, drop ------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_writes_during_a_flush_go_to_the_next_append(kind, tmp_path, journal_small_stores):
    store = make(kind, tmp_path)
    await store.open()
    await apply_batch(store, 0)
    await store.flush()
    await apply_batch(store, 1)
    flushing = asyncio.create_task(store.flush())
    await asyncio.sleep(0)  # the flush has encoded batch 1 and is writing it
    await apply_batch(store, 2)
    await flushing
    assert await reopened(kind, tmp_path, files_of(store)) == await reference(kind, tmp_path, 2)
    await store.flush()
    assert await reopened(kind, tmp_path, files_of(store)) == await reference(kind, tmp_path, 3)
    await store.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_failed_append_is_retried_over_its_partial_bytes(kind, tmp_path, monkeypatch, journal_small_stores):
    store = make(kind, tmp_path)
    await store.open()
    await apply_batch(store, 0)
    await store.flush()
    await apply_batch(store, 1)
    await store.flush()
    real = journal_file.write_at

    def half_then_fail(path, start, data):
        real(path, start, data[: len(data) // 2])
        raise OSError("disk full")

    monkeypatch.setattr(journal_file, "write_at", half_then_fail)
    await apply_batch(store, 2)
    with pytest.raises(OSError, match="disk full"):
        await store.flush()
    assert journaled_file(store).dirty
    assert await reopened(kind, tmp_path, files_of(store)) == await reference(kind, tmp_path, 2)
    monkeypatch.setattr(journal_file, "write_at", real)
    await store.flush()  # over the partial bytes
    assert await reopened(kind, tmp_path, files_of(store)) == await reference(kind, tmp_path, 3)
    await store.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_drop_removes_snapshot_and_journal(kind, tmp_path, journal_small_stores):
    store = make(kind, tmp_path)
    await store.open()
    for i in range(2):
        await apply_batch(store, i)
        await store.flush()
    assert store.path.exists() and journaled_file(store).journal.exists()
    await store.drop()
    assert not store.path.exists() and not journaled_file(store).journal.exists()
    await apply_batch(store, 0)
    await store.close()
    async with make(kind, tmp_path) as again:
        assert await state(again) == await reference(kind, tmp_path, 1)


# --- kill -9 --------------------------------------------------------------------------


async def child_main(root: str, kind: str, mode: str) -> None:
    """The child of the kill tests. ``loop``: batch after batch, each flushed,
    then ``DONE i`` printed. ``hang``: batches 0-3 flushed, then the append of
    batch 4 stops half-way (fsynced) and the child waits to be killed."""
    journal_file.SMALL_SNAPSHOT = 0  # journal from the start, compact often
    store = make(kind, Path(root))
    await store.open()
    for i in itertools.count():
        if mode == "hang" and i == 4:
            _hang_in_next_append()
        await apply_batch(store, i)
        await store.flush()
        print(f"DONE {i}", flush=True)


def _hang_in_next_append() -> None:
    real = journal_file.write_at

    def half(path, start, data):
        real(path, start, data[: len(data) // 2])
        print(f"MID {start}", flush=True)
        time.sleep(600)

    journal_file.write_at = half


CHILD = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
import test_journal
asyncio.run(test_journal.child_main(*sys.argv[2:]))
"""


class Child:
    """A child python process running ``child_main``; its stdout lines are read by a thread."""

    def __init__(self, *args: object) -> None:
        here = Path(__file__).resolve().parent
        env = dict(os.environ)
        env["PYTHONPATH"] = str(here.parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(CHILD), str(here), *map(str, args)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def wait_for(self, prefix: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            self.seen.append(line)
            if line.startswith(prefix):
                return
        self.kill()
        pytest.fail(f"child never printed {prefix!r}; stderr:\n{self.proc.stderr.read()}")

    def kill(self) -> list[str]:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        time.sleep(0.1)  # let the reader thread take the last lines
        while not self.lines.empty():
            self.seen.append(self.lines.get_nowait())
        return self.seen


needs_sigkill = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")


@needs_sigkill
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("round_", range(3))
async def test_kill_9_while_appending_and_compacting(kind, round_, tmp_path):
    """Killed at a random moment, the store reopens as of a whole number of
    batches, at least every batch whose flush was confirmed."""
    child = Child(tmp_path, kind, "loop")
    try:
        child.wait_for("DONE 3")
        time.sleep(random.Random(round_).uniform(0.0, 0.4))
    finally:
        lines = child.kill()
    assert child.proc.returncode == -signal.SIGKILL
    done = max(int(line.split()[1]) for line in lines if line.startswith("DONE"))
    async with make(kind, tmp_path) as store:
        got = await state(store)
    # Batch done + 1 may have been on its way to the disk when the kill came.
    candidates = [await reference(kind, tmp_path, n) for n in (done + 1, done + 2)]
    assert got in candidates, f"{kind}: state is not that of {done + 1} or {done + 2} batches"


@needs_sigkill
@pytest.mark.parametrize("kind", KINDS)
async def test_kill_9_mid_append_loads_previous_flush(kind, tmp_path, journal_small_stores):
    child = Child(tmp_path, kind, "hang")
    try:
        child.wait_for("MID")
    finally:
        child.kill()
    store = make(kind, tmp_path)
    journal = journaled_file(store).journal
    half_written = journal.stat().st_size
    async with store:
        assert await state(store) == await reference(kind, tmp_path, 4)
        assert journal_good_bytes(store) < half_written  # the torn tail
        await apply_batch(store, 4)
        await store.flush()  # over the torn tail
        assert await reopened(kind, tmp_path, files_of(store)) == await reference(kind, tmp_path, 5)
