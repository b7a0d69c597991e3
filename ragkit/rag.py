"""The Python API: ``RAG`` ties settings, stores, models and the pipeline together.

Async methods are the real ones (``ainsert``, ``adelete``, ``astatus``); the
sync names wrap them with ``asyncio.run`` for scripts and notebooks.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from ragkit.backends import build_model
from pydantic import ValidationError

from ragkit.core.llm_cache import CachedLLM
from ragkit.core.stores import Stores
from ragkit.errors import ConfigError, InvalidValueError, describe_validation_error
from ragkit.offline import default_llm
from ragkit.pipeline.index import IndexConfig, Indexer, IndexReport, Progress
from ragkit.pipeline.load import LoadReport, load_documents
from ragkit.pipeline.edit import CustomKG, CustomKGReport, GraphEditor
from ragkit.pipeline.export import ExportSummary, export_graph
from ragkit.plugins import create_model
from ragkit.protocols import LLM, Embedder, Reranker, Tokenizer
from ragkit.query.engine import Querier
from ragkit.schema import DocStatus, Document, QueryParam, QueryResult
from ragkit.settings import Settings, load_settings

T = TypeVar("T")


def _sync(method: Callable[..., Awaitable[T]]) -> Callable[..., T]:
    """The sync twin of an async ``RAG`` method: its own event loop, stores
    closed after (see ``RAG._once``)."""

    @functools.wraps(method)
    def run(self: RAG, *args: Any, **kwargs: Any) -> T:
        return asyncio.run(self._once(method(self, *args, **kwargs)))

    run.__name__ = run.__qualname__ = method.__name__.removeprefix("a")
    return run


class RAG:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        llm: LLM | str | None = None,
        embedder: Embedder | str | None = None,
        reranker: Reranker | str | None = None,
        tokenizer: Tokenizer | None = None,
        index: IndexConfig | None = None,
        progress: Progress | None = None,
        **overrides: Any,
    ) -> None:
        settings = settings or load_settings().settings
        self.settings = settings.model_copy(update=overrides) if overrides else settings
        self.embedder: Embedder = _model("embedder", embedder, self.settings)
        self.tokenizer: Tokenizer = tokenizer or build_model(self.settings, "tokenizer")
        self.reranker: Reranker | None = _model("reranker", reranker, self.settings)
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
                llm = default_llm()  # the offline rules; says so once per process on stderr
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

    # -- read side -------------------------------------------------------------

    def querier(self) -> Querier:
        return Querier(self.stores, self.llm, self.embedder, self.tokenizer, self.reranker)

    async def aquery(self, question: str, param: QueryParam | None = None, **options: Any) -> QueryResult:
        """Answer ``question``; ``options`` are QueryParam fields (``mode="local"``)."""
        # Validated as one model, so options given as keywords are checked too.
        try:
            param = QueryParam.model_validate({**(param or QueryParam()).model_dump(), **options})
        except ValidationError as exc:
            raise InvalidValueError(f"query parameters: {describe_validation_error(exc)}") from None
        await self.aopen()
        return await self.querier().query(question, param)

    def query(self, question: str, param: QueryParam | None = None, **options: Any) -> QueryResult:
        """Sync form; with ``stream=True`` use ``aquery`` (a stream needs a running loop)."""
        if options.get("stream") or (param is not None and param.stream):
            raise ConfigError("stream=True needs the async API: `async for piece in (await rag.aquery(...)).stream`")
        return asyncio.run(self._once(self.aquery(question, param, **options)))

    insert = _sync(ainsert)
    delete = _sync(adelete)
    status = _sync(astatus)

    async def _once(self, coro: Any) -> Any:
        """Sync calls each run in their own event loop, so stores are closed after."""
        try:
            return await coro
        finally:
            await self.aclose()

    # -- graph editing and export ------------------------------------------------

    def editor(self) -> GraphEditor:
        """Edits recompute with the indexer's merger (and so its LLM), so that an
        edited graph is what indexing the edited facts would give."""
        return GraphEditor(self.stores, self.indexer().updater)

    async def _edit(self, op: str, *args: Any, **kwargs: Any) -> Any:
        await self.aopen()
        return await getattr(self.editor(), op)(*args, **kwargs)

    async def acreate_entity(self, name: str, type: str = "entity", description: str = "") -> dict:
        return await self._edit("create_entity", name, type, description)

    async def aedit_entity(self, name: str, *, description: str | None = None, type: str | None = None) -> dict:
        return await self._edit("edit_entity", name, description=description, type=type)

    async def arename_entity(self, old: str, new: str) -> dict:
        return await self._edit("rename_entity", old, new)

    async def adelete_entity(self, name: str) -> None:
        await self._edit("delete_entity", name)

    async def amerge_entities(self, sources: list[str], target: str) -> dict:
        return await self._edit("merge_entities", sources, target)

    async def acreate_relation(
        self, source: str, target: str, keywords: str = "", description: str = "", strength: float = 1.0
    ) -> dict:
        return await self._edit("create_relation", source, target, keywords, description, strength)

    async def aedit_relation(
        self, source: str, target: str, *,
        keywords: str | None = None, description: str | None = None, weight: float | None = None,
    ) -> dict:
        return await self._edit("edit_relation", source, target, keywords=keywords, description=description, weight=weight)

    async def adelete_relation(self, source: str, target: str) -> None:
        await self._edit("delete_relation", source, target)

    async def ainsert_custom_kg(self, kg: CustomKG | dict) -> CustomKGReport:
        return await self._edit("insert_custom_kg", CustomKG.model_validate(kg))

    async def aexport(self, path: str | Path, format: str | None = None) -> ExportSummary:
        """Needs no LLM: it only reads the stores."""
        await self.aopen()
        return await export_graph(self.stores, path, format)

    create_entity = _sync(acreate_entity)
    edit_entity = _sync(aedit_entity)
    rename_entity = _sync(arename_entity)
    delete_entity = _sync(adelete_entity)
    merge_entities = _sync(amerge_entities)
    create_relation = _sync(acreate_relation)
    edit_relation = _sync(aedit_relation)
    delete_relation = _sync(adelete_relation)
    insert_custom_kg = _sync(ainsert_custom_kg)
    export = _sync(aexport)


def _model(kind: str, given: Any, settings: Settings) -> Any:
    if given is None:
        return build_model(settings, kind)
    return create_model(kind, given) if isinstance(given, str) else given
