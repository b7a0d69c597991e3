"""A flush of a large embedded store leaves the event loop free to serve.

The graph and vector stores encode what they save (JSON of every node, edge,
id and metadata) before writing it. On a store of hundreds of thousands of
items that is a second of CPU work; done on the loop in one call, it kept a
server's requests waiting for the whole of it. The encoding now runs in a
worker thread, in pieces short enough that the interpreter switches back to
the loop's thread between two of them, while the store's writes wait for it
(so the snapshot is consistent).

What is asserted is behaviour, not speed: a ticker on the loop keeps ticking
during the flush, and the longest gap between two ticks is a small part of
the flush (``GAP_SHARE``), whatever the machine's load. Before the change, the
longest gap was the encoding itself (about 80% of the flush). And writes made
while the flush encodes are neither lost nor mixed into it.

Troubleshooting: a failure prints the flush's duration, the ticks and the
longest gap. A new long single call in a store's ``_encode_changes`` or
``_snapshot`` (one ``json.dumps`` of the whole store holds the GIL from start
to end, in a thread as well) must be split (``snapshot_journal.json_array``).
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from ragkit.protocols.base import StoreConfig
from ragkit.storage import NetworkXGraphStore, NumpyVectorStore
from ragkit.testing.store_files import journaled_file

N = 60_000
GAP_SHARE = 0.3
"""The longest gap between two ticks may be at most this part of the flush."""


def make(kind: str, root) -> NetworkXGraphStore | NumpyVectorStore:
    cfg = StoreConfig(namespace="big", workspace="w", working_dir=root, dimension=8)
    return NetworkXGraphStore(cfg) if kind == "graph" else NumpyVectorStore(cfg)


async def fill(store, n: int, start: int = 0) -> None:
    text = "a description long enough to cost something to encode, " * 3
    ids = [f"item {i:06d}" for i in range(start, start + n)]
    if isinstance(store, NetworkXGraphStore):
        await store.upsert_nodes({i: {"description": text, "source_id": "c1<SEP>c2", "n": k} for k, i in enumerate(ids)})
        await store.upsert_edges([(a, b, {"description": text, "weight": 1.0}) for a, b in zip(ids, ids[1:])])
    else:
        vectors = np.random.default_rng(start).standard_normal((n, 8)).astype(np.float32)
        await store.upsert(ids, vectors, [{"doc_id": f"d{k % 97}", "text": text} for k in range(n)])


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


@pytest.mark.parametrize("kind", ["graph", "vector"])
async def test_a_large_flush_lets_the_loop_turn(kind, tmp_path):
    store = make(kind, tmp_path)
    await store.open()
    await fill(store, N)
    ticker = Ticker()
    task = asyncio.create_task(ticker.run())
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    await store.compact()  # the whole store: a snapshot
    ended = time.perf_counter()
    task.cancel()
    gaps = ticker.gaps(started, ended)
    flush = ended - started
    report = f"{kind}: flush {flush:.3f} s, {len(gaps) - 1} ticks, longest gap {max(gaps):.3f} s"
    assert len(gaps) > 10, report
    assert max(gaps) < GAP_SHARE * flush, report
    await store.close()


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
