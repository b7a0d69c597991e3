"""A flush of a large embedded store leaves the event loop free to serve.

The graph and vector stores encode what they save (JSON of every node, edge,
id and metadata) before writing it. On a store of hundreds of thousands of
items that is a second of CPU work; done on the loop in one call, it kept a
server's requests waiting for the whole of it. The encoding now runs in a
worker thread, in pieces short enough that the interpreter switches back to
the loop's thread between two of them, while the store's writes wait for it
(so the snapshot is consistent).

What is asserted is behaviour, not speed: a ticker on the loop keeps ticking
during the flush, and the longest gap between two ticks is a small part
(``GAP_SHARE``) of what one ``json.dumps`` over the store's items takes on the
machine at that moment, which is what encoding in one call would hold the
loop for. The best of three tries counts: a long call fails every try, a busy
2-core machine stalls one now and then. And writes made while the flush
encodes are neither lost nor mixed into it.

Troubleshooting: a failure prints, per try, the flush's duration, the ticks,
the longest gap and collector pass, and the bound. A new long single call in
a store's ``_encode_changes`` or ``_snapshot`` (one ``json.dumps`` of the
whole store holds the GIL from start to end, in a thread as well) must be
split (``snapshot_journal.json_array``).
"""

from __future__ import annotations

import asyncio
import gc
import json
import time

import numpy as np
import pytest

from ragkit.protocols.base import StoreConfig
from ragkit.storage import NetworkXGraphStore, NumpyVectorStore
from ragkit.testing.store_files import journaled_file

N = 120_000
GAP_SHARE = 0.5
"""The longest gap between two ticks may be at most this part of one
``json.dumps`` call over the store's items (``one_call``): what a flush that
encodes in one call would hold the loop for, at the least."""
TRIES = 3


def make(kind: str, root) -> NetworkXGraphStore | NumpyVectorStore:
    cfg = StoreConfig(namespace="big", workspace="w", working_dir=root, dimension=8)
    return NetworkXGraphStore(cfg) if kind == "graph" else NumpyVectorStore(cfg)


TEXT = "a description long enough to cost something to encode, " * 3


def item_id(i: int) -> str:
    return f"item {i:06d}"


def node(k: int) -> dict:
    return {"description": TEXT, "source_id": "c1<SEP>c2", "n": k}


def meta(k: int) -> dict:
    return {"doc_id": f"d{k % 97}", "text": TEXT}


async def fill(store, n: int, start: int = 0) -> None:
    ids = [item_id(i) for i in range(start, start + n)]
    if isinstance(store, NetworkXGraphStore):
        await store.upsert_nodes({i: node(k) for k, i in enumerate(ids)})
        await store.upsert_edges([(a, b, {"description": TEXT, "weight": 1.0}) for a, b in zip(ids, ids[1:])])
    else:
        vectors = np.random.default_rng(start).standard_normal((n, 8)).astype(np.float32)
        await store.upsert(ids, vectors, [meta(k) for k in range(n)])


class Ticker:
    def __init__(self) -> None:
        self.times: list[float] = []

    async def run(self) -> None:
        while True:
            self.times.append(time.perf_counter())
            await asyncio.sleep(0.002)

    def gaps(self, start: float, end: float) -> list[float]:
        inside = [start] + [t for t in self.times if start < t < end] + [end]
        return [b - a for a, b in zip(inside, inside[1:])]


def one_call(kind: str, n: int) -> float:
    """Seconds of one ``json.dumps`` of the ``n`` items ``fill`` gave the
    store (a graph's nodes, a vector store's metadata), measured now: the
    machine's speed and load of the moment."""
    items = [[item_id(k), node(k)] for k in range(n)] if kind == "graph" else [meta(k) for k in range(n)]
    started = time.perf_counter()
    json.dumps(items, ensure_ascii=False)
    return time.perf_counter() - started


class CollectorPasses:
    """The longest garbage collector pass while it is installed."""

    def __init__(self) -> None:
        self.longest, self._start = 0.0, 0.0
        gc.callbacks.append(self._on)

    def _on(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.longest = max(self.longest, time.perf_counter() - self._start)

    def stop(self) -> None:
        gc.callbacks.remove(self._on)


async def measure_flush(kind: str, store) -> tuple[bool, str]:
    """One snapshot of the whole store with a ticker on the loop: whether the
    longest gap between two ticks stayed under ``GAP_SHARE`` of ``one_call``,
    and the report."""
    ticker = Ticker()
    # A full collection scans the whole process's heap, holding the GIL: in a
    # full test run that is every earlier test's leftovers, nothing of the
    # flush's making. Frozen here as a server's writer freezes its survivors
    # (ragkit.core.heap); the passes that still run are timed and reported.
    gc.collect()
    gc.freeze()
    passes = CollectorPasses()
    task = asyncio.create_task(ticker.run())
    await asyncio.sleep(0.01)
    try:
        started = time.perf_counter()
        await store.compact()
        ended = time.perf_counter()
    finally:
        task.cancel()
        passes.stop()
        gc.unfreeze()
    gaps = ticker.gaps(started, ended)
    flush = ended - started
    report = (
        f"flush {flush:.3f} s, {len(gaps) - 1} ticks, longest gap {max(gaps):.3f} s, "
        f"longest collector pass {passes.longest:.3f} s"
    )
    bound = GAP_SHARE * one_call(kind, N)
    return len(gaps) > 10 and max(gaps) < bound, f"{report}, bound {bound:.3f} s"


@pytest.mark.parametrize("kind", ["graph", "vector"])
async def test_a_large_flush_lets_the_loop_turn(kind, tmp_path):
    """Best of ``TRIES``: one long call holding the GIL fails every try; a
    2-core machine busy with other work can stall the loop once by itself
    (1.8 s of a 2.7 s flush was seen in a full CI run)."""
    store = make(kind, tmp_path)
    await store.open()
    await fill(store, N)
    reports = []
    for _ in range(TRIES):
        ok, report = await measure_flush(kind, store)
        reports.append(report)
        if ok:
            break
        journaled_file(store).touch([item_id(0)])  # dirty again: the next compact writes a whole snapshot
    await store.close()
    assert ok, f"{kind}: " + "; ".join(reports)


@pytest.mark.parametrize("kind", ["graph", "vector"])
async def test_writes_during_a_large_flush_wait_for_its_encoding(kind, tmp_path):
    store = make(kind, tmp_path)
    await store.open()
    await fill(store, N)
    flushing = asyncio.create_task(store.compact())
    await asyncio.sleep(0.005)  # the flush is encoding in its thread
    await fill(store, 1000, start=N)  # waits for the encoding, then lands in the next flush
    await flushing
    assert journaled_file(store).dirty
    await store.close()
    again = make(kind, tmp_path)
    await again.open()
    if kind == "graph":
        assert await again.node_count() == N + 1000 and await again.edge_count() == N + 1000 - 2
    else:
        assert await again.count() == N + 1000
    await again.close()
