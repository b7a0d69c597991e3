"""The file-level causes of lost data when two processes share a folder, one
store at a time.

Two store objects on one folder stand for two processes (nothing is shared
between them but the files):

- a reader closing never rewrites the snapshot nor removes the journal that a
  writer is still appending to (it did: close compacted whenever a journal
  existed, so the writer's next append hit ``FileNotFoundError``);
- a reader that opens while the writer compacts and starts a new journal gets
  a consistent state, never "journal newer than snapshot";
- ``refresh`` reloads what another process wrote, and never drops unsaved changes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragkit.protocols.base import StoreConfig
from ragkit.storage import NetworkXGraphStore, NumpyVectorStore, snapshot_journal
from ragkit.testing.store_files import journaled_file

KINDS = ["graph", "vector"]
DIM = 8


def make(kind: str, root: Path):
    cfg = StoreConfig(namespace="s", workspace="w", working_dir=root, dimension=DIM)
    return NetworkXGraphStore(cfg) if kind == "graph" else NumpyVectorStore(cfg)


async def apply_batch(store, i: int, size: int | None = None) -> None:
    """Batch ``i``: new items, and updates and deletions of the previous batch's
    (the first is large, so that later flushes append to a journal)."""
    size = size or (200 if i == 0 else 12)
    if isinstance(store, NetworkXGraphStore):
        await store.upsert_nodes({f"n{i}-{j}": {"batch": i} for j in range(size)})
        await store.upsert_edges([(f"n{i}-{j}", f"n{i}-{j + 1}", {"batch": i}) for j in range(size - 1)])
        if i:
            await store.upsert_nodes({f"n{i - 1}-0": {"updated": i}})
            await store.delete_nodes([f"n{i - 1}-{j}" for j in range(1, size, 3)])
        return
    vecs = np.random.default_rng(i).normal(size=(size, DIM)).astype(np.float32)
    await store.upsert([f"v{i}-{j}" for j in range(size)], vecs, [{"batch": i}] * size)
    if i:
        await store.delete([f"v{i - 1}-{j}" for j in range(1, size, 3)])


async def state(store) -> dict:
    if isinstance(store, NetworkXGraphStore):
        nodes = {n.id: n.properties async for n in store.nodes()}
        edges = {(e.source, e.target): e.properties async for e in store.edges()}
        return {"nodes": nodes, "edges": edges}
    ids = sorted([i async for i in store.ids()])
    return {r.id: (np.asarray(r.vector).tolist(), r.metadata) for r in await store.get(ids)}


async def reference(kind: str, root: Path, batches: int) -> dict:
    """The state after ``batches`` batches, built in memory (never flushed)."""
    store = make(kind, root / f"ref-{batches}")
    await store.open()
    for i in range(batches):
        await apply_batch(store, i)
    return await state(store)


@pytest.fixture(autouse=True)
def journal_small_stores(monkeypatch):
    monkeypatch.setattr(snapshot_journal, "SMALL_SNAPSHOT", 0)  # small stores journal too


@pytest.mark.parametrize("kind", KINDS)
async def test_a_reader_closing_leaves_the_writers_files_alone(kind, tmp_path):
    writer = make(kind, tmp_path)
    await writer.open()
    await apply_batch(writer, 0)
    await writer.flush()
    await apply_batch(writer, 1)
    await writer.flush()  # appended: a journal of the snapshot's generation
    assert journaled_file(writer).journal.exists()
    before = journaled_file(writer).signature()
    reader = make(kind, tmp_path)
    await reader.open()
    assert await state(reader) == await reference(kind, tmp_path, 2)
    await reader.close()
    assert journaled_file(writer).signature() == before  # nothing rewritten, nothing removed
    await apply_batch(writer, 2)
    await writer.flush()  # the journal is still there to append to
    again = make(kind, tmp_path)
    await again.open()
    assert await state(again) == await reference(kind, tmp_path, 3)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_reader_opening_during_a_compaction_sees_a_whole_state(kind, tmp_path):
    """The reader reads the journal (generation g), then the writer replaces the
    snapshot (g + 1) and starts a new journal (g + 1), then the reader reads the
    snapshot: it must use the new snapshot alone (the old journal is stale)."""
    writer = make(kind, tmp_path)
    await writer.open()
    await apply_batch(writer, 0)
    await writer.flush()
    await apply_batch(writer, 1)
    await writer.flush()  # generation 1 with a journal
    await apply_batch(writer, 2)
    compacted = await state(writer)
    await apply_batch(writer, 3)  # pending: the first append after the compaction

    reader = make(kind, tmp_path)
    read_journal = journaled_file(reader)._read_journal  # noqa: SLF001 - race injected at the read seam

    def writer_compacts_meanwhile():
        journal = read_journal()
        wf = journaled_file(writer)
        gen = wf.generation + 1
        # What writer.compact() then writer.flush() do, at this very moment:
        wf._compact(writer._snapshot(gen), gen)  # noqa: SLF001 - the private steps, run mid-read
        wf._append(writer._encode_changes(list(wf._pending)))  # noqa: SLF001 - the private steps, run mid-read
        return journal

    journaled_file(reader)._read_journal = writer_compacts_meanwhile  # noqa: SLF001 - race injection
    # The snapshot the writer writes holds batch 3 already (it encodes its memory):
    # the reader sees batches 0-3, whole, with no error.
    await reader.open()
    got = await state(reader)
    assert got == await state(writer) and got != compacted


@pytest.mark.parametrize("kind", KINDS)
async def test_refresh_reloads_what_another_wrote_and_keeps_unsaved_changes(kind, tmp_path):
    writer, reader = make(kind, tmp_path), make(kind, tmp_path)
    await writer.open()
    await reader.open()
    assert not await reader.refresh()  # nothing changed
    await apply_batch(writer, 0)
    await writer.flush()
    assert await reader.refresh()
    assert await state(reader) == await reference(kind, tmp_path, 1)
    await apply_batch(writer, 1)
    await writer.flush()
    await apply_batch(reader, 5, size=3)  # unsaved changes of its own: not thrown away
    assert not await reader.refresh()
    assert not await writer.refresh()  # its own writes are not news
