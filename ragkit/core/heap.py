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
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator
from typing import Any

from ragkit.core.pacing import Pacer

__all__ = ["freezing_survivors", "release", "thaw"]


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
