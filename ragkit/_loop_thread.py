"""An event loop in a daemon thread, and running coroutines on a given loop
from another thread: the machinery under ``RAG``'s sync methods.

A daemon thread, so that an object nobody closed never holds up the
interpreter's exit. Its loop runs under ``asyncio.run``, which cancels what is
left and shuts down async generators and the default executor when it stops.

Not anyio's ``BlockingPortal``: a call through ``portal.call`` takes twice as
long as ``call_on`` (153 against 72 µs, ``benchmarks/seams.py sync``), and the
RAG must also run work on a loop it does not own (the caller's, where its
stores are open), which only ``call_on``/``await_on`` do.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """A running event loop in its own daemon thread, until ``stop()``."""

    def __init__(self, name: str = "ragkit-loop") -> None:
        started: concurrent.futures.Future[asyncio.AbstractEventLoop] = concurrent.futures.Future()
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(started),), name=name, daemon=True)
        self._thread.start()
        self.loop = started.result()

    async def _serve(self, started: concurrent.futures.Future[asyncio.AbstractEventLoop]) -> None:
        self._stopping = asyncio.Event()
        started.set_result(asyncio.get_running_loop())
        await self._stopping.wait()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def is_current(self) -> bool:
        """Whether the caller runs in this loop's thread (where waiting for the loop deadlocks)."""
        return threading.current_thread() is self._thread

    def stop(self) -> None:
        """Stop the loop (tasks still running are cancelled) and wait for its
        thread, unless called from that thread."""
        if self.alive and self._stopping is not None:
            self.loop.call_soon_threadsafe(self._stopping.set)
            if not self.is_current():
                self._thread.join()


def call_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on ``loop`` (running in another thread) and wait for its result.

    Interrupted while waiting (Ctrl-C, a timeout), the work is cancelled too.
    """
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result(timeout)
    finally:
        future.cancel()  # a no-op once it is done


async def await_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on ``loop`` (running in another thread) and await it from the
    running loop; cancelling the awaiting task cancels the work."""
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


async def _next(items: AsyncIterator[T]) -> T | None:
    return await anext(items, None)


async def close_items(items: Any) -> None:
    """Close an iterator left early: its ``aclose()`` (or ``close()``), awaited
    when it returns a coroutine; nothing when it has neither."""
    close = getattr(items, "aclose", None) or getattr(items, "close", None)
    if close is not None:
        result = close()
        if asyncio.iscoroutine(result):
            await result


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The running event loop of this thread, or None."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def iterate_on(loop: asyncio.AbstractEventLoop, items: AsyncIterator[T]) -> Iterator[T]:
    """A plain iterator over an async iterator that lives on ``loop``
    (``None`` ends it: the items are answer pieces). Left early, the async
    iterator is closed on its loop."""
    try:
        while (item := call_on(loop, _next(items))) is not None:
            yield item
    finally:
        if loop.is_running() and not _runs_here(loop):
            call_on(loop, close_items(items))


async def relay_from(loop: asyncio.AbstractEventLoop, items: AsyncIterator[T]) -> AsyncIterator[T]:
    """The same as ``iterate_on``, for a caller on another event loop."""
    try:
        while (item := await await_on(loop, _next(items))) is not None:
            yield item
    finally:
        if loop.is_running():
            await await_on(loop, close_items(items))


def _runs_here(loop: asyncio.AbstractEventLoop) -> bool:
    return running_loop() is loop
