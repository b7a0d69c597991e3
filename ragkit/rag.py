"""The Python API: ``RAG`` ties settings, stores, models and the pipeline together.

Async methods are the real ones (``ainsert``, ``adelete``, ``astatus``); the
sync names wrap them with ``asyncio.run`` for scripts and notebooks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ragkit.backends import build_model
from ragkit.errors import ConfigError
from ragkit.pipeline.index import IndexConfig, Indexer, IndexReport, Progress
from ragkit.pipeline.llm_cache import CachedLLM
from ragkit.pipeline.load import LoadReport, load_documents
from ragkit.pipeline.stores import Stores
from ragkit.plugins import create_model
from ragkit.protocols import LLM, Embedder, Tokenizer
from ragkit.schema import DocStatus, Document
from ragkit.settings import Settings, load_settings


class RAG:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        llm: LLM | str | None = None,
        embedder: Embedder | str | None = None,
        tokenizer: Tokenizer | None = None,
        index: IndexConfig | None = None,
        progress: Progress | None = None,
        **overrides: Any,
    ) -> None:
        settings = settings or load_settings().settings
        self.settings = settings.model_copy(update=overrides) if overrides else settings
        self.embedder: Embedder = _model("embedder", embedder, self.settings)
        self.tokenizer: Tokenizer = tokenizer or build_model(self.settings, "tokenizer")
        self._llm = llm
        self.index_config = index or self.settings.index
        self.progress = progress
        self.stores = Stores.from_settings(self.settings, self.embedder.dimension)
        self._opened = False
        self._cached_llm: CachedLLM | None = None

    # -- lifecycle -------------------------------------------------------------

    async def aopen(self) -> RAG:
        if not self._opened:
            await self.stores.open()
            self._opened = True
        return self

    async def aclose(self) -> None:
        if self._opened:
            await self.stores.close()
            self._opened = False
        self._cached_llm = None  # its semaphore belongs to this event loop

    async def __aenter__(self) -> RAG:
        return await self.aopen()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def llm(self) -> CachedLLM:
        if self._cached_llm is None:
            llm = _model("llm", self._llm, self.settings)
            if llm is None:
                raise ConfigError(
                    "no LLM configured: set [llm] name in ragkit.toml or RAGKIT_LLM "
                    "(installed: see `ragkit plugins`)"
                )
            self._cached_llm = CachedLLM(llm, self.stores.llm_cache, self.index_config.llm_concurrency)
        return self._cached_llm

    def indexer(self) -> Indexer:
        return Indexer(self.stores, self.llm, self.embedder, self.tokenizer, self.index_config, self.progress)

    # -- write side ------------------------------------------------------------

    async def ainsert(
        self, inputs: str | Path | Document | Iterable[str | Path | Document]
    ) -> tuple[LoadReport, IndexReport]:
        """Index texts, files or folders; returns the load and index reports."""
        if isinstance(inputs, (str, Path, Document)):
            inputs = [inputs]
        loaded = load_documents(inputs)
        await self.aopen()
        return loaded, await self.indexer().insert(loaded.documents)

    async def adelete(self, doc_ids: Iterable[str]) -> list[str]:
        await self.aopen()
        return await self.indexer().delete(list(doc_ids))

    async def astatus(self) -> dict[str, int]:
        await self.aopen()
        counts = await self.stores.doc_status.counts()
        return {s.value: counts.get(s, 0) for s in DocStatus}

    def insert(self, inputs: Any) -> tuple[LoadReport, IndexReport]:
        return asyncio.run(self._once(self.ainsert(inputs)))

    def delete(self, doc_ids: Iterable[str]) -> list[str]:
        return asyncio.run(self._once(self.adelete(doc_ids)))

    def status(self) -> dict[str, int]:
        return asyncio.run(self._once(self.astatus()))

    async def _once(self, coro: Any) -> Any:
        """Sync calls each run in their own event loop, so stores are closed after."""
        try:
            return await coro
        finally:
            await self.aclose()


def _model(kind: str, given: Any, settings: Settings) -> Any:
    if given is None:
        return build_model(settings, kind)
    return create_model(kind, given) if isinstance(given, str) else given
