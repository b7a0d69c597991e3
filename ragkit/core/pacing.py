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

The writer's calls to a worker thread go to threads of its own
(``in_writer_thread``), not to the loop's default executor: that one has
``cpu_count + 4`` threads (6 on two cores), and a folder of documents queued
there (one chunking per document in flight, 32 by default) would make a
request's own thread work (a query's context, its JSON) wait behind all of
it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ragkit.core.pools import PerProcess

T = TypeVar("T")

SLICE = 0.01
"""Seconds of work between two turns of the loop: the most one slice delays a
request by, small against a query's own tens of milliseconds."""


class Pacer:
    """``await pace()`` in a long loop: yields to the event loop every ``slice`` seconds."""

    def __init__(self, slice: float = SLICE) -> None:
        self.slice = slice
        self._since = time.perf_counter()

    def due(self) -> bool:
        """Whether the slice is used up: a loop whose items are small checks
        this instead of awaiting per item (``await pace()`` costs a coroutine)."""
        return time.perf_counter() - self._since >= self.slice

    async def __call__(self) -> None:
        if self.due():
            await asyncio.sleep(0)
            self._since = time.perf_counter()


WRITER_THREADS = 2
"""Threads for the writer's pure work: as many as this machine class has
cores; more only queue for the GIL (a check of extractions holds it)."""

_writer_threads = PerProcess(lambda: ThreadPoolExecutor(WRITER_THREADS, thread_name_prefix="ragkit-writer"))


async def in_writer_thread(fn: Callable[..., T], /, *args: object) -> T:
    """``asyncio.to_thread`` on the writer's own threads (see above): the
    default executor stays free for the requests' work."""
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return await asyncio.get_running_loop().run_in_executor(_writer_threads.get(), call)
