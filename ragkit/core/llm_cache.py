"""LLM calls through a cache and a concurrency limit, with usage accounting.

The cache key is the model identity plus the exact request (prompt, system,
history, options), so a redo after a crash or a rebuild after a delete costs no
new calls for anything already asked.

Waiting calls get a free slot in priority order: extraction (bulk work that
only fills the committer's queue) after everything else. A summary call holds up
the single committer, and with it every extracted document; queued behind a few
dozen extraction calls it left the committer a growing backlog that ran alone,
with idle slots, after the last extraction (benchmarks/README.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ragkit.protocols import LLM, ChatRequest, KVStore

BULK_ROLES = frozenset({"extraction"})
"""Roles served after every other waiting call."""


@dataclass
class LLMStats:
    calls: Counter = field(default_factory=Counter)
    cache_hits: Counter = field(default_factory=Counter)
    input_tokens: Counter = field(default_factory=Counter)
    output_tokens: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {
            "calls": dict(self.calls),
            "cache_hits": dict(self.cache_hits),
            "input_tokens": dict(self.input_tokens),
            "output_tokens": dict(self.output_tokens),
        }


class PrioritySemaphore:
    """A semaphore whose waiters are served lowest ``priority`` first, then in
    arrival order. ``async with sem`` waits at priority 0, ``sem.slot(p)`` at p."""

    def __init__(self, value: int) -> None:
        self._free = value
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()

    @contextlib.asynccontextmanager
    async def slot(self, priority: int = 0) -> AsyncIterator[None]:
        await self.acquire(priority)
        try:
            yield
        finally:
            self.release()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    async def acquire(self, priority: int = 0) -> None:
        if self._free and not self._waiters:
            self._free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (priority, next(self._arrivals), waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot just as it was cancelled: pass it on
            raise

    def release(self) -> None:
        """Hand the slot to the first waiter still waiting, else free it."""
        while self._waiters:
            waiter = heapq.heappop(self._waiters)[2]
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


class CachedLLM:
    def __init__(self, llm: LLM, cache: KVStore | None, max_concurrency: int = 8) -> None:
        self.llm = llm
        self.cache = cache
        self.semaphore = PrioritySemaphore(max_concurrency)
        self.stats = LLMStats()

    async def complete(self, request: ChatRequest, *, use_cache: bool = True) -> str:
        key = request.cache_key(self.llm.model_id)
        if use_cache and self.cache is not None:
            hit = await self.cache.get(key)
            if hit is not None:
                self.stats.cache_hits[request.role] += 1
                return hit["text"]
        async with self.semaphore.slot(1 if request.role in BULK_ROLES else 0):
            completion = await self.llm.complete(request)
        self.stats.calls[request.role] += 1
        self.stats.input_tokens[request.role] += completion.usage.input_tokens
        self.stats.output_tokens[request.role] += completion.usage.output_tokens
        if use_cache and self.cache is not None:
            await self.cache.upsert(
                {key: {"text": completion.text, "model_id": self.llm.model_id, "role": request.role}}
            )
        return completion.text

    async def stream(self, request: ChatRequest):
        """Pieces of the answer as they come; never cached (a stream may be cut)."""
        async with self.semaphore:
            self.stats.calls[request.role] += 1
            async for piece in self.llm.stream(request):
                yield piece

    async def forget(self, request: ChatRequest) -> None:
        """Drop a cached answer that turned out unusable, so a retry asks again."""
        if self.cache is not None:
            await self.cache.delete([request.cache_key(self.llm.model_id)])
