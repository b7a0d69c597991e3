"""LLM calls through a cache and a concurrency limit, with usage accounting.

The cache key is the model identity plus the exact request (prompt, system,
history, options), so a redo after a crash or a rebuild after a delete costs no
new calls for anything already asked.

Waiting calls get a free slot in priority order: extraction (bulk work that
only fills the committer's queue) after everything else. A summary call holds up
the single committer, and with it every extracted document; queued behind a few
dozen extraction calls it left the committer a growing backlog that ran alone,
with idle slots, after the last extraction (benchmarks/README.md).

Every answer is made storable (``ragkit.core.text.clean``) before it is cached
or returned, so an answer holding a lone surrogate or a NUL can neither fail
its cache write nor, cached, fail every later run. ``complete_checked`` caches
an answer only once the caller's check accepted it: an extraction is parsed and
validated before it is cached, never after.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypeVar

from ragkit.core.text import clean
from ragkit.ids import digest
from ragkit.protocols import LLM, ChatRequest, KVStore

T = TypeVar("T")

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


_counting: ContextVar[LLMStats | None] = ContextVar("ragkit_llm_counting", default=None)


@contextlib.contextmanager
def counting(usage: LLMStats | None) -> Iterator[LLMStats | None]:
    """Count into ``usage`` (as well as each LLM's own stats) the calls and
    cache hits made in this block, by it and the tasks it starts: what one
    ingestion job made, apart from the queries served meanwhile. ``None``
    counts nothing for the block."""
    token = _counting.set(usage)
    try:
        yield usage
    finally:
        _counting.reset(token)


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

    async def complete(self, request: ChatRequest, *, use_cache: bool = True, scope: str | None = None) -> str:
        """``scope`` names the documents the request may draw on (a query's
        ``Scope.key``): answers cached for one scope never serve another."""
        if use_cache:
            hit = await self._cached(request, scope)
            if hit is not None:
                return hit
        text = await self._ask(request)
        if use_cache:
            await self._store(request, text, scope)
        return text

    async def complete_checked(self, request: ChatRequest, check: Callable[[str], T], *, scope: str | None = None) -> T:
        """``check(answer)``, caching the answer only when the check returns.

        A check that raises leaves nothing cached (an earlier cached answer it
        rejects is forgotten), so the next run asks the model again. ``scope``
        keeps the answers of one identity space apart: a principal's
        submission must not learn, from a hit, that someone else's document
        holds the same text.
        """
        hit = await self._cached(request, scope)
        if hit is not None:
            try:
                return check(hit)
            except Exception:
                await self.forget(request, scope)
                raise
        text = await self._ask(request)
        result = check(text)
        await self._store(request, text, scope)
        return result

    def _key(self, request: ChatRequest, scope: str | None = None) -> str:
        key = request.cache_key(self.llm.model_id)
        return key if scope is None else digest(key, scope)

    async def _cached(self, request: ChatRequest, scope: str | None = None) -> str | None:
        if self.cache is None:
            return None
        hit = await self.cache.get(self._key(request, scope))
        if hit is None:
            return None
        self._count("cache_hits", request.role)
        return clean(hit["text"])  # cached before answers were cleaned: NUL was storable

    async def _ask(self, request: ChatRequest) -> str:
        async with self.semaphore.slot(1 if request.role in BULK_ROLES else 0):
            completion = await self.llm.complete(request)
        self._count("calls", request.role)
        self._count("input_tokens", request.role, completion.usage.input_tokens)
        self._count("output_tokens", request.role, completion.usage.output_tokens)
        return clean(completion.text)

    def _count(self, what: str, role: str, n: int = 1) -> None:
        for stats in (self.stats, _counting.get()):
            if stats is not None:
                getattr(stats, what)[role] += n

    async def _store(self, request: ChatRequest, text: str, scope: str | None = None) -> None:
        if self.cache is not None:
            await self.cache.upsert({
                self._key(request, scope):
                    {"text": text, "model_id": self.llm.model_id, "role": request.role}
            })

    async def stream(self, request: ChatRequest):
        """Pieces of the answer as they come; never cached (a stream may be cut)."""
        async with self.semaphore:
            self._count("calls", request.role)
            async for piece in self.llm.stream(request):
                yield piece

    async def forget(self, request: ChatRequest, scope: str | None = None) -> None:
        """Drop a cached answer that turned out unusable, so a retry asks again."""
        if self.cache is not None:
            await self.cache.delete([self._key(request, scope)])
