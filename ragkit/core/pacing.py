"""Long work on the event loop, in short slices: the writer shares its loop.

Why: a workspace's writer runs on the loop that answers its readers (``ragkit
serve`` answers every request on one loop; ``RAG`` has one home loop for its
stores). Merging a large batch, building its graph update and encoding its
records is seconds of pure Python; run in one go it holds the loop, and
``/health`` waits as long as the merge does.

Why slices and not a worker thread: the work is interleaved with store calls,
and every store call starts on the loop, so the writer fence
(``BaseStore.fence``) is asked exactly as before and a store sees its calls in
order. Pure work that is one call goes to a worker thread
(``asyncio.to_thread``) instead: chunking a document (tiktoken releases the
GIL), a query's context, and inside the stores their statements and the
encoding of a flush (``ragkit.storage.snapshot_journal``; the store's writes wait for
it). Either way the loop's thread gets its turn: between slices here, at the
interpreter's switch interval (5 ms) there.

A loop over many items calls ``await pace()`` once per item (or page): it
returns at once until ``SLICE`` seconds of work have passed since the loop
last had its turn, and then yields once (``asyncio.sleep(0)``), so waiting
requests and timers run between two slices. One ``Pacer`` per sequence of
work: concurrent tasks must not share one (each would find the slice used up
by the others and none would do a whole slice).
"""

from __future__ import annotations

import asyncio
import time

SLICE = 0.01
"""Seconds of work between two turns of the loop: the most one slice delays a
request by, small against a query's own tens of milliseconds."""


class Pacer:
    """``await pace()`` in a long loop: yields to the event loop every ``slice`` seconds."""

    def __init__(self, slice: float = SLICE) -> None:
        self.slice = slice
        self._since = time.perf_counter()

    async def __call__(self) -> None:
        if time.perf_counter() - self._since >= self.slice:
            await asyncio.sleep(0)
            self._since = time.perf_counter()
