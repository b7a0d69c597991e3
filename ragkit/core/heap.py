"""Keep the garbage collector's full passes short while a writer's stores grow.

A full collection scans every object the collector tracks, on whichever
thread triggers it: the serving loop's, most of the time. While a writer
indexes, the in-memory stores (graph, vectors, records) and the extractions
grow by hundreds of thousands of objects; CPython then runs a full pass each
time the long-lived heap grew by a quarter, and each pass rescans all of it
(up to 610 ms per pass, 26 passes, at 10 documents x 200 chunks;
benchmarks/findings.md). While ``freezing_survivors`` is held, what survives
a full pass is moved out of the collector's view (``gc.freeze``), so the next
pass scans only what came after it (156 ms at most in the same run).

The price: a reference cycle among frozen objects that becomes garbage later
is not reclaimed until ``thaw``; objects freed by reference counting (nearly
all) are freed as before, and young cycles are still collected by the passes
that run before anything is frozen. ``RAG`` thaws when it closes its stores.

Freeing is work too: the last reference to a batch's structures (its
extractions, the graph update's indexed rows), dropped at once, frees
hundreds of thousands of objects in one C call that holds the GIL for its
whole length (measured: 1.3 s at 50 documents x 200 chunks, on the loop).
``release`` empties such a container an item at a time instead, paced
(``ragkit.core.pacing``), so the freeing happens in slices.

What is freed is not given back: glibc's allocator keeps the free blocks of
its heaps for reuse, and a heap whose free blocks lie between blocks in use
never shrinks. After indexing ×3 of the scale benchmark, 229 of the 414 MiB
of the C heap were free and held (``mallinfo2``): peak RSS 808 MiB, and 628
MiB when ``malloc_trim`` ran every second, which returns the free pages
inside the heap too. ``give_back`` does that after each committed batch, in
a worker thread: trimming hundreds of MiB of scattered free blocks took 67
ms, which the loop would otherwise spend not serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

from ragkit.core.pacing import Pacer

__all__ = ["freezing_survivors", "give_back", "release", "thaw"]

GIVE_BACK_EVERY = 1.0
"""Seconds between two ``malloc_trim`` calls at most: a call walks the free
blocks of every heap (milliseconds for hundreds of MiB)."""
_last_give_back = -GIVE_BACK_EVERY


_holders = 0
_guard = threading.Lock()


def _after_full_pass(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()


@contextlib.contextmanager
def freezing_survivors() -> Iterator[None]:
    """While held (by any number of writers of this process), each full
    collection's survivors are frozen."""
    global _holders
    with _guard:
        _holders += 1
        if _holders == 1:
            gc.callbacks.append(_after_full_pass)
    try:
        yield
    finally:
        with _guard:
            _holders -= 1
            if _holders == 0:
                gc.callbacks.remove(_after_full_pass)


def thaw() -> None:
    """Give frozen objects back to the collector (when stores close)."""
    gc.unfreeze()


async def release(*containers: list[Any] | dict[Any, Any] | set[Any], pace: Pacer | None = None) -> None:
    """Empty ``containers`` (lists, dicts, sets) in slices: their items, when
    nothing else holds them, are freed a few at a time with the loop getting
    its turn between slices. Only for containers about to be dropped."""
    pace = pace or Pacer()
    for container in containers:
        pop = container.popitem if isinstance(container, dict) else container.pop
        while container:
            pop()  # an item at a time: one may be large (a document's extractions)
            if pace.due():
                await pace()


@lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or ``None`` where there is none (macOS,
    Windows, musl): there the allocator's own policy stands."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own C library
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


async def give_back(every: float = GIVE_BACK_EVERY) -> bool:
    """Return the free pages of the C heaps to the system, at most once per
    ``every`` seconds; True if it ran. In a worker thread: the call releases
    the GIL (ctypes), so the loop serves while the allocator walks its heaps."""
    global _last_give_back
    trim = _malloc_trim()
    now = time.monotonic()
    if trim is None or now - _last_give_back < every:
        return False
    _last_give_back = now
    await asyncio.to_thread(trim, 0)
    return True
