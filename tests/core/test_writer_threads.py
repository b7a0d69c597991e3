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


def test_a_forked_process_gets_writer_threads_of_its_own():
    """A fork of a process that used the writer's threads (a pre-forking
    server, multiprocessing's fork) copies the pool without its threads: the
    child's writer work must still run, not wait on them forever (every
    mutmut child of a target whose tests index a document hung on this)."""
    from ragkit.testing.forking import check_in_fork

    assert asyncio.run(in_writer_thread(lambda: 6 * 7)) == 42  # the parent's threads are started now
    check_in_fork(lambda: asyncio.run(asyncio.wait_for(in_writer_thread(lambda: 6 * 7), 20)) == 42)
