"""CachedLLM's priority semaphore: extraction waits behind every other role."""

from __future__ import annotations

import asyncio

import pytest

from ragkit.core.llm_cache import PrioritySemaphore


async def test_waiters_are_served_by_priority_then_arrival():
    sem = PrioritySemaphore(1)
    order: list[str] = []
    await sem.acquire()

    async def waiter(name: str, priority: int) -> None:
        async with sem.slot(priority):
            order.append(name)

    tasks = [asyncio.create_task(waiter(n, p)) for n, p in
             [("extract-1", 1), ("summary-1", 0), ("extract-2", 1), ("summary-2", 0)]]
    await asyncio.sleep(0)
    sem.release()
    await asyncio.gather(*tasks)
    assert order == ["summary-1", "summary-2", "extract-1", "extract-2"]


async def test_never_more_holders_than_slots_and_cancelled_waiters_pass_their_slot_on():
    sem = PrioritySemaphore(2)
    holding = peak = 0

    async def work(priority: int) -> None:
        nonlocal holding, peak
        async with sem.slot(priority):
            holding += 1
            peak = max(peak, holding)
            await asyncio.sleep(0.001)
            holding -= 1

    tasks = [asyncio.create_task(work(i % 2)) for i in range(20)]
    tasks[5].cancel()
    tasks[6].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert peak == 2 and sum(isinstance(r, asyncio.CancelledError) for r in results) == 2
    # Every slot came back: two more holders get in at once.
    await asyncio.wait_for(asyncio.gather(sem.acquire(), sem.acquire()), 1)


async def test_a_slot_handed_to_a_task_cancelled_at_that_moment_is_not_lost():
    sem = PrioritySemaphore(1)
    await sem.acquire()
    task = asyncio.create_task(sem.acquire())
    await asyncio.sleep(0)
    sem.release()  # hands the slot to the waiter...
    task.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(sem.acquire(), 1)


async def test_an_exception_inside_a_slot_releases_it():
    sem = PrioritySemaphore(1)
    with pytest.raises(RuntimeError):
        async with sem.slot(0):
            raise RuntimeError("boom")
    await asyncio.wait_for(sem.acquire(), 1)
