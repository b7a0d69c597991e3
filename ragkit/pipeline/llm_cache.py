"""LLM calls through a cache and a concurrency limit, with usage accounting.

The cache key is the model identity plus the exact request (prompt, system,
history, options), so a redo after a crash or a rebuild after a delete costs no
new calls for anything already asked.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field

from ragkit.protocols import LLM, ChatRequest, KVStore


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


class CachedLLM:
    def __init__(self, llm: LLM, cache: KVStore | None, max_concurrency: int = 8) -> None:
        self.llm = llm
        self.cache = cache
        self.semaphore = asyncio.Semaphore(max_concurrency)
        self.stats = LLMStats()

    async def complete(self, request: ChatRequest, *, use_cache: bool = True) -> str:
        key = request.cache_key(self.llm.model_id)
        if use_cache and self.cache is not None:
            hit = await self.cache.get(key)
            if hit is not None:
                self.stats.cache_hits[request.role] += 1
                return hit["text"]
        async with self.semaphore:
            completion = await self.llm.complete(request)
        self.stats.calls[request.role] += 1
        self.stats.input_tokens[request.role] += completion.usage.input_tokens
        self.stats.output_tokens[request.role] += completion.usage.output_tokens
        if use_cache and self.cache is not None:
            await self.cache.upsert(
                {key: {"text": completion.text, "model_id": self.llm.model_id, "role": request.role}}
            )
        return completion.text

    async def forget(self, request: ChatRequest) -> None:
        """Drop a cached answer that turned out unusable, so a retry asks again."""
        if self.cache is not None:
            await self.cache.delete([request.cache_key(self.llm.model_id)])
