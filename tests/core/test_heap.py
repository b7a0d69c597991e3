"""The writer's GC policy: survivors of a full pass are frozen only while a
writer holds it, the hook goes away with the last holder, and thaw gives the
objects back; ``release`` frees a container in slices, and ``give_back``
returns the freed pages to the system (``ragkit.core.heap``)."""

import asyncio
import gc
import sys
import threading
import weakref

import pytest

from ragkit.core import heap
from ragkit.core.pacing import Pacer


def test_survivors_of_a_full_pass_are_frozen_only_while_held():
    heap.thaw()
    kept = [[i] for i in range(1000)]  # tracked objects that survive
    hooks = len(gc.callbacks)
    with heap.freezing_survivors():
        with heap.freezing_survivors():  # a second writer of the process
            gc.collect()
            assert gc.get_freeze_count() >= len(kept)
        assert len(gc.callbacks) == hooks + 1  # the first writer still holds it
    assert len(gc.callbacks) == hooks
    heap.thaw()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gc.get_freeze_count() == 0, "frozen after the last writer let go"
    assert len(kept) == 1000


def test_a_cycle_that_dies_after_thaw_is_collected():
    heap.thaw()
    with heap.freezing_survivors():
        node: list = []
        node.append(node)  # a cycle, alive now
        gc.collect()
    del node
    heap.thaw()
    assert gc.collect() >= 1


async def test_release_frees_in_slices_with_the_loop_running_between():
    """``release`` empties a list, a dict and a set, and other tasks run while
    part of the items is freed and part is not. Failing: the container was
    dropped in one go (the loop saw no state in between) or kept items."""
    class Item:
        pass

    items = [Item() for _ in range(100)]
    table = {i: Item() for i in range(100)}
    bag = {Item() for _ in range(100)}
    refs = [weakref.ref(x) for x in [*items, *table.values(), *bag]]
    seen: list[int] = []

    async def watch() -> None:
        while True:
            seen.append(sum(r() is not None for r in refs))
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0)
    await heap.release(items, table, bag, pace=Pacer(0.0))
    watcher.cancel()
    assert not items and not table and not bag
    assert all(r() is None for r in refs)
    assert seen[0] == 300 and any(0 < n < 300 for n in seen), seen


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's (the allocator elsewhere keeps its own policy)")
async def test_give_back_returns_the_free_pages_between_blocks_in_use(monkeypatch):
    """90 MiB freed between blocks still in use stay in the process until
    ``give_back``: the heap cannot shrink from its top. The trim runs off the
    loop's thread (it walks every free block: tens of milliseconds)."""
    trim = heap._malloc_trim()
    assert trim is not None, "glibc without malloc_trim: the indexer's memory is not given back"
    threads: list[int] = []

    def trim_and_record(pad: int) -> int:
        threads.append(threading.get_ident())
        return trim(pad)

    monkeypatch.setattr(heap, "_malloc_trim", lambda: trim_and_record)
    blocks = [bytearray(2048) for _ in range(50_000)]  # past pymalloc's 512 bytes: glibc's heap
    kept = blocks[::10]
    del blocks
    before = _rss_mib()
    assert await heap.give_back(every=0.0)
    after = _rss_mib()
    assert before - after > 40, (before, after)
    assert threads and threading.get_ident() not in threads, "trimmed on the loop's thread"
    assert not await heap.give_back(every=3600.0)  # at most once per period
    assert len(threads) == 1
    assert len(kept) == 5_000
