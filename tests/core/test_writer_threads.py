"""The writer's thread work has threads of its own (``ragkit.core.pacing``).

With every writer thread busy, a request's ``asyncio.to_thread`` still runs,
and the other way round: ingestion queued in one pool never makes the other
wait. Troubleshooting: a timeout here means the two share one executor again.
"""

from __future__ import annotations

import asyncio
import threading

from ragkit.core.pacing import WRITER_THREADS, in_writer_thread


async def test_writer_threads_and_the_default_executor_do_not_starve_each_other():
    release = threading.Event()
    writers = [asyncio.ensure_future(in_writer_thread(release.wait, 60)) for _ in range(WRITER_THREADS + 4)]
    try:
        name = await asyncio.wait_for(asyncio.to_thread(lambda: threading.current_thread().name), 30)
        assert not name.startswith("ragkit-writer")
    finally:
        release.set()
    assert all(await asyncio.gather(*writers))

    hold = threading.Event()
    busy = [asyncio.ensure_future(asyncio.to_thread(hold.wait, 60)) for _ in range(40)]
    try:
        name = await asyncio.wait_for(in_writer_thread(lambda: threading.current_thread().name), 30)
        assert name.startswith("ragkit-writer")
    finally:
        hold.set()
    await asyncio.gather(*busy)
