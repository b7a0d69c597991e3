"""The Python API: ``RAG`` ties settings, stores, models and the pipeline together.

Every operation is an async method (``ainsert``, ``aquery``, ``adelete``...)
with a sync twin of the same signature (``insert``, ``query``, ``delete``...).

Event loops (decisions, in one place):

- A RAG's stores, and the model clients, belong to the event loop that opened
  them, its *home* loop: network clients and locks are bound to a loop.
- Sync methods run on a loop the object owns, in a daemon thread started by the
  first sync call; the stores stay open between calls. The caller's own loop is
  never used, so they work inside a running loop too (a notebook cell, a
  FastAPI handler), blocking it while they wait.
- An async method awaited on another loop than the home loop runs on the home
  loop (and is awaited from the caller's): ``rag.insert(...)`` in one notebook
  cell and ``await rag.aquery(...)`` in the next just work. A stream is relayed
  piece by piece. Only RAG's methods are routed: ``rag.stores``,
  ``rag.indexer()`` and ``rag.querier()`` are for code running on the home loop.
- A sync method called on the home loop's own thread (after an async call in
  the same loop, or from a progress callback) would wait for the loop it blocks:
  it raises a ``RuntimeError`` naming the async twin. So does any call while the
  stores are open on a loop that has stopped (``asyncio.run`` ended without
  ``aclose``).
- ``close()`` / ``aclose()`` (or leaving ``with RAG() as rag:`` /
  ``async with RAG() as rag:``) closes the stores and model clients and stops
  the owned loop thread. The object stays usable: the next call opens again.
- A RAG never closed does not hold up the interpreter's exit (a daemon thread),
  and a ``weakref.finalize`` closes its stores when it is collected or at exit
  (every write operation has already flushed them by then).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, NamedTuple, ParamSpec, TypeVar

from pydantic import ValidationError

from ragkit.access import AccessList, Principal
from ragkit._loop_thread import LoopThread, await_on, call_on, iterate_on, relay_from, running_loop
from ragkit.backends import build_model, build_store, build_stores
from ragkit.core import heap
from ragkit.core.llm_cache import CachedLLM, counting
from ragkit.core.stores import Stores
from ragkit.protocols.vector import embedder_label
from ragkit.errors import InputNotFoundError, InvalidValueError, describe_validation_error
from ragkit.executors import Executor, executor_for, model_recipe
from ragkit.offline import default_llm
from ragkit.pipeline.edit import CustomKG, CustomKGReport, GraphEditor
from ragkit.pipeline.documents import DocumentPage, list_documents, readable_counts, resolve_documents
from ragkit.pipeline.export import ExportSummary, export_graph
from ragkit.pipeline.identity import claim
from ragkit.pipeline.index import IndexConfig, Indexer, IndexReport, Progress
from ragkit.pipeline.load import LoadReport, load_documents
from ragkit.pipeline.migrate import PROGRESS_NAMESPACE, MigrateReport, migrate
from ragkit.plugins import create_model
from ragkit.protocols import LLM, Embedder, Reranker, Tokenizer
from ragkit.query.engine import Querier
from ragkit.query.graph_read import EntityInfo, RelationInfo, GraphReader
from ragkit.schema import DocStatus, Document, QueryParam, QueryResult, Subgraph
from ragkit.settings import Settings, load_settings

P = ParamSpec("P")
T = TypeVar("T")
AsyncMethod = Callable[Concatenate["RAG", P], Coroutine[Any, Any, T]]

log = logging.getLogger(__name__)

_STOPPED_HOME = (
    "this RAG's stores are open on an event loop that is no longer running (an asyncio.run that "
    "ended without `await rag.aclose()`?). Fix: call rag.close() (or `await rag.aclose()`) once, "
    "then use `async with RAG(...) as rag:` inside one asyncio.run, or only the sync methods "
    "(rag.insert, rag.query), which keep a loop of their own"
)
_SYNC_ON_HOME = (
    "a sync RAG method was called on the event loop that has this RAG's stores open, which it "
    "would have to block while waiting for it. Fix: await the async twin here "
    "(`await rag.aquery(...)` for rag.query, `await rag.ainsert(...)` for rag.insert...)"
)


def _on_home_loop(method: AsyncMethod[P, T]) -> AsyncMethod[P, T]:
    """An async method that runs on the RAG's home loop even when awaited on another."""

    @functools.wraps(method)
    async def run(self: RAG, /, *args: P.args, **kwargs: P.kwargs) -> T:
        home = self._home_elsewhere()
        if home is None:
            return await method(self, *args, **kwargs)
        result = await await_on(home, method(self, *args, **kwargs))
        if isinstance(result, QueryResult) and result.stream is not None:
            result.stream = relay_from(home, result.stream)
        return result

    return run


def _sync(method: AsyncMethod[P, T]) -> Callable[Concatenate[RAG, P], T]:
    """The sync twin of an async method: the same parameters and result (and
    so the same signature for ``inspect`` and type checkers), run on the home loop."""

    @functools.wraps(method)
    def run(self: RAG, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._wait(method(self, *args, **kwargs))

    run.__name__ = method.__name__.removeprefix("a")
    run.__qualname__ = f"RAG.{run.__name__}"
    return run


class InsertResult(NamedTuple):
    """What ``insert`` did: a named pair, so ``loaded, report = rag.insert(...)`` works too."""

    loaded: LoadReport
    """One ``LoadItem`` per input (and per file inside a folder): ``path``,
    ``outcome`` (loaded, loaded_with_replacements, loaded_with_warnings,
    skipped, failed), ``message`` (why), ``doc_id``; ``loaded.problems`` lists the
    items not simply loaded."""
    report: IndexReport
    """Ids processed, skipped as unchanged, failed (id -> error) and replaced;
    chunks written; the run's LLM calls and tokens."""


@dataclass
class _Loops:
    """Where a RAG's work runs; shared with its finalizer, which must not hold the RAG."""

    home: asyncio.AbstractEventLoop | None = None
    """The loop the stores are open on; ``None`` while they are closed."""
    thread: LoopThread | None = None
    """The sync API's own loop, once a sync method has run."""


def _close_when_collected(loops: _Loops, stores: Stores) -> None:
    thread = loops.thread
    if thread is None or not thread.alive:
        return
    if loops.home is thread.loop and not thread.is_current():
        try:
            call_on(thread.loop, stores.close(), timeout=30)
        except Exception as exc:  # at exit, nobody is left to raise to
            log.warning("closing the stores of an unclosed RAG failed: %s", exc)
    loops.home = None
    thread.stop()


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
        # How a remote executor's workers build the same models (ragkit.executors).
        self._recipes = {"llm": model_recipe("llm", llm, self.settings),
                         "embedder": model_recipe("embedder", embedder, self.settings)}
        self._executor: Executor | None = None
        self._placed: tuple[CachedLLM, Embedder] | None = None
        self.tokenizer: Tokenizer = tokenizer or build_model(self.settings, "tokenizer")
        self.reranker: Reranker | None = _model("reranker", reranker, self.settings)
        self._llm = llm
        self.index_config = index or self.settings.index
        self.progress = progress
        self.stores = build_stores(self.settings, self.embedder.dimension, embedder=embedder_label(self.embedder))
        self._cached_llm: CachedLLM | None = None
        self._loops = _Loops()
        self._opening: asyncio.Future[None] | None = None
        self._thread_lock = threading.Lock()
        self._finalizer: weakref.finalize | None = None

    # -- event loops -------------------------------------------------------------

    def _home_elsewhere(self, closing: bool = False) -> asyncio.AbstractEventLoop | None:
        """The home loop when an async call must be sent there; ``None``: run here.
        A stopped home loop is an error, except for closing, which then closes
        the stores here as well as they can be."""
        home = self._loops.home
        if home is None or home is asyncio.get_running_loop():
            return None
        if home.is_running():
            return home
        if closing:
            return None
        raise RuntimeError(_STOPPED_HOME)

    def _loop_for_sync(self, closing: bool = False) -> asyncio.AbstractEventLoop:
        home = self._loops.home
        if home is not None and home.is_running():
            if running_loop() is home:
                raise RuntimeError(_SYNC_ON_HOME)
            return home
        if home is not None and not closing:
            raise RuntimeError(_STOPPED_HOME)
        return self._own_loop()

    def _own_loop(self) -> asyncio.AbstractEventLoop:
        with self._thread_lock:
            thread = self._loops.thread
            if thread is None or not thread.alive:
                thread = self._loops.thread = LoopThread()
                if self._finalizer is None:
                    self._finalizer = weakref.finalize(self, _close_when_collected, self._loops, self.stores)
            if thread.is_current():
                raise RuntimeError(_SYNC_ON_HOME)
            return thread.loop

    def _wait(self, coro: Coroutine[Any, Any, T], closing: bool = False) -> T:
        """Run ``coro`` on the home loop (the own loop when nothing is open) and wait."""
        try:
            loop = self._loop_for_sync(closing)
        except BaseException:
            coro.close()  # never started: no "coroutine was never awaited" warning
            raise
        return call_on(loop, coro)

    # -- lifecycle -------------------------------------------------------------

    @_on_home_loop
    async def aopen(self) -> RAG:
        """Open the stores on the running loop, which becomes the home loop;
        every method opens them on first use, so this is optional."""
        if self._loops.home is None:
            self._loops.home = asyncio.get_running_loop()  # concurrent callers wait below, not open twice
            self._opening = asyncio.ensure_future(self._open_stores())
        if self._opening is not None and not self._opening.done():
            await asyncio.shield(self._opening)
        elif self._opening is not None:
            # Open for a while (a server): see what another process wrote since.
            await self.stores.refresh()
        return self

    async def _open_stores(self) -> None:
        try:
            await self.stores.open()
        except BaseException:
            self._loops.home = None
            with contextlib.suppress(Exception):  # the open's own error is the one to report
                await self.stores.close()
            raise

    async def aclose(self) -> None:
        """Close the stores and the model clients, and stop the sync API's loop
        thread; the object stays usable (the next call opens again)."""
        home = self._home_elsewhere(closing=True)
        await (self._close_here() if home is None else await_on(home, self._close_here()))
        thread = self._loops.thread
        if thread is not None and not thread.is_current():
            self._loops.thread = None
            await asyncio.to_thread(thread.stop)

    def close(self) -> None:
        """Sync form of ``aclose``."""
        if self._loops.home is not None:
            self._wait(self._close_here(), closing=True)
        thread, self._loops.thread = self._loops.thread, None
        if thread is not None:
            thread.stop()

    async def _close_here(self) -> None:
        opening = self._opening
        if opening is not None and not opening.done() and opening.get_loop() is asyncio.get_running_loop():
            await asyncio.wait([opening])  # an open still under way: close what it opens
        if self._loops.home is None:
            return
        try:
            await self.stores.close()
        finally:
            self._loops.home = None
            executor, self._executor, self._placed = self._executor, None, None
            if executor is not None:
                executor.close()  # a Ray executor's actors, and its connection when it made one
            heap.thaw()  # the stores' state frozen at commits may now be garbage
            llm = self._cached_llm.llm if self._cached_llm is not None else None
            for model in (llm, self.embedder, self.reranker):
                close = getattr(model, "aclose", None)
                if close is not None:
                    await close()  # a remote model's HTTP client belongs to this loop

    async def __aenter__(self) -> RAG:
        return await self.aopen()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> RAG:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def llm(self) -> CachedLLM:
        if self._cached_llm is None:
            llm = _model("llm", self._llm, self.settings)
            if llm is None:
                llm = default_llm()  # the offline rules; says so once per process on stderr
            self._cached_llm = CachedLLM(llm, self.stores.llm_cache, self.index_config.llm_concurrency)
        return self._cached_llm

    @property
    def home_loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the stores are open on; ``None`` while they are closed."""
        return self._loops.home

    @property
    def loop_thread(self) -> LoopThread | None:
        """The sync API's own loop thread, once a sync method has run; ``None``
        again after ``close``."""
        return self._loops.thread

    @property
    def executor(self) -> Executor:
        """Where indexing's loaders, chunking and model calls run (``[index] executor``)."""
        if self._executor is None:
            self._executor = executor_for(self.index_config, self._recipes)
        return self._executor

    def indexer(self) -> Indexer:
        llm, embedder = self._index_models()
        return Indexer(self.stores, llm, embedder, self.tokenizer, self.index_config, self.progress, self.executor)

    def _index_models(self) -> tuple[CachedLLM, Embedder]:
        """The models as the executor places them. A remote LLM gets a cache of
        its own over the same store (same keys: its ``model_id`` is the model's)
        and the same counters, so reports and progress read as in-process."""
        if self.index_config.executor == "local":
            return self.llm, self.embedder
        if self._placed is None:
            llm, embedder = self.executor.models(self.llm.llm, self.embedder)
            cached = CachedLLM(llm, self.stores.llm_cache, self.index_config.llm_concurrency)
            cached.stats = self.llm.stats
            self._placed = cached, embedder
        return self._placed

    # -- write side ------------------------------------------------------------

    @_on_home_loop
    async def ainsert(
        self,
        texts: str | Iterable[str] | None = None,
        *,
        paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None,
        documents: Document | Iterable[Document] | None = None,
        access: AccessList | None = None,
        principal: Principal | None = None,
    ) -> InsertResult:
        """Index ``texts`` (each string is a document's content, never a path),
        the files and folders in ``paths`` and ready ``documents``; returns the
        load and index reports (``InsertResult``). A path in ``paths`` that does
        not exist raises ``InputNotFoundError`` before anything is read or
        written (a typo must not pass as a smaller corpus); a file that exists
        but cannot be read fails alone, in ``result.loaded.items``. ``access``: who may read the inputs that carry
        no list of their own (``ragkit.access``; none: everyone, or the list a
        document already had).

        ``principal``: the write is made as that principal (what ``ragkit
        serve`` does for a keyed request): each document's list must let it
        read the document (else ``WriteAccessError``, and nothing is written),
        no list means everyone, and the documents get identities of their own
        (``ragkit.pipeline.identity``), so a submission never changes or
        reveals a document the principal may not read. The report then covers
        the submitted documents only."""
        inputs = _insert_inputs(texts, paths, documents)
        missing = [p.as_posix() for p in inputs if isinstance(p, Path) and not os.path.lexists(p)]
        if missing:
            raise InputNotFoundError(missing)
        loaded = load_documents(inputs, limits=self.settings.loaders, submit=self.executor.loader_submit())
        docs = loaded.documents
        await self.aopen()
        if principal is not None:
            docs = claim(docs, principal, access)
            ids = {d.id for d in docs}
            # Interrupted work of others is finished first, out of this report
            # and out of what this insert counts as its own model calls; an
            # earlier attempt at these documents is taken up in it.
            with counting(None):
                llm, embedder = self._index_models()
                quiet = Indexer(self.stores, llm, embedder, self.tokenizer, self.index_config, executor=self.executor)
                await quiet.recover(besides=ids)
            return InsertResult(loaded, await self.indexer().insert(docs, recover=ids))
        if access is not None:
            docs = [d if d.access is not None else d.model_copy(update={"access": access}) for d in docs]
        return InsertResult(loaded, await self.indexer().insert(docs))

    @_on_home_loop
    async def adelete(self, targets: str | Iterable[str], *, principal: Principal | None = None) -> list[str]:
        """Delete the documents named by id or by the path they were indexed
        from; returns the deleted ids. Every name is resolved first: an unknown
        one raises ``DocumentNotFoundError`` and nothing is deleted. With
        ``principal``, names resolve among the documents it may read only (a
        hidden document is unknown, with the same error)."""
        await self.aopen()
        names = [targets] if isinstance(targets, str) else list(targets)
        resolution = await resolve_documents(self.stores, names, principal=principal)
        return await self.indexer().delete(resolution.require_all())

    @_on_home_loop
    async def adocuments(
        self, status: DocStatus | str | None = None, limit: int = 100, cursor: str | None = None,
        *, principal: Principal | None = None,
    ) -> DocumentPage:
        """One page of documents (id, path, status, chunks, error, times);
        ``next_cursor`` fetches the next. With ``principal``: only the
        documents it may read, and ``total`` counts only those."""
        await self.aopen()
        return await list_documents(self.stores, status, limit, cursor, principal=principal)

    @_on_home_loop
    async def astatus(self, *, principal: Principal | None = None) -> dict[str, int]:
        """Documents per status; with ``principal``, of the documents it may read only."""
        await self.aopen()
        if principal is not None:
            return await readable_counts(self.stores, principal)
        counts = await self.stores.doc_status.counts()
        return {s.value: counts.get(s, 0) for s in DocStatus}

    # -- read side -------------------------------------------------------------

    def querier(self) -> Querier:
        return Querier(self.stores, self.llm, self.embedder, self.tokenizer, self.reranker)

    @_on_home_loop
    async def aquery(
        self, question: str, param: QueryParam | None = None, *, principal: Principal | None = None, **options: Any
    ) -> QueryResult:
        """Answer ``question``; ``options`` are QueryParam fields (``mode="local"``).
        With ``stream=True``, ``result.stream`` is an async iterator of answer pieces.
        With ``principal``, every stage sees only the documents it may read
        (``doc_ids``/``doc_filter`` narrow that further, never widen it)."""
        # Validated as one model, so options given as keywords are checked too.
        try:
            param = QueryParam.model_validate({**(param or QueryParam()).model_dump(), **options})
        except ValidationError as exc:
            raise InvalidValueError(f"query parameters: {describe_validation_error(exc)}") from None
        await self.aopen()
        return await self.querier().query(question, param, principal=principal)

    def query(
        self, question: str, param: QueryParam | None = None, *, principal: Principal | None = None, **options: Any
    ) -> QueryResult:
        """Sync form of ``aquery``; with ``stream=True``, ``result.stream`` is a
        plain iterator of answer pieces (``answer`` is set once it ends)."""
        result = self._wait(self.aquery(question, param, principal=principal, **options))
        if result.stream is not None:
            result.stream = iterate_on(self._loop_for_sync(), result.stream)
        return result

    # -- graph reads (``query/graph_read.py``) ---------------------------------------

    def graph_reader(self, principal: Principal | None = None) -> GraphReader:
        return GraphReader(self.stores, principal)

    @_on_home_loop
    async def asearch_entities(self, text: str, *, limit: int = 20, principal: Principal | None = None) -> list[str]:
        """Entity keys whose name contains ``text`` (case-insensitive), best match first."""
        await self.aopen()
        return await self.graph_reader(principal).search_entities(text, limit)

    @_on_home_loop
    async def aentity(self, name: str, *, principal: Principal | None = None) -> EntityInfo | None:
        """One entity's properties, degree and source documents and chunks;
        ``None`` when there is none (or ``principal`` may read none of its sources)."""
        await self.aopen()
        return await self.graph_reader(principal).entity(name)

    @_on_home_loop
    async def arelation(self, source: str, target: str, *, principal: Principal | None = None) -> RelationInfo | None:
        """One relation (either direction) with its sources, or ``None``."""
        await self.aopen()
        return await self.graph_reader(principal).relation(source, target)

    @_on_home_loop
    async def asubgraph(
        self, name: str, *, depth: int = 1, max_nodes: int = 100, max_edges: int = 200,
        principal: Principal | None = None,
    ) -> Subgraph:
        """The neighbourhood of an entity, breadth first, cut at ``max_nodes`` and
        ``max_edges`` (``truncated`` says so); empty when there is no such entity."""
        await self.aopen()
        return await self.graph_reader(principal).subgraph(name, depth, max_nodes, max_edges)

    open = _sync(aopen)
    insert = _sync(ainsert)
    delete = _sync(adelete)
    documents = _sync(adocuments)
    status = _sync(astatus)
    search_entities = _sync(asearch_entities)
    entity = _sync(aentity)
    relation = _sync(arelation)
    subgraph = _sync(asubgraph)

    # -- graph editing and export ------------------------------------------------

    def editor(self, principal: Principal | None = None) -> GraphEditor:
        """Edits recompute with the indexer's merger (and so its LLM), so that an
        edited graph is what indexing the edited facts would give. With
        ``principal``, the edit sees and changes what it may read only
        (``ragkit.pipeline.edit``)."""
        return GraphEditor(self.stores, self.indexer().updater, principal)

    async def _edit(self, op: str, *args: Any, principal: Principal | None = None, **kwargs: Any) -> Any:
        await self.aopen()
        return await getattr(self.editor(principal), op)(*args, **kwargs)

    # Every edit takes ``principal=``: made as that principal, as ``editor`` says.

    @_on_home_loop
    async def acreate_entity(
        self, name: str, type: str = "entity", description: str = "", *, principal: Principal | None = None
    ) -> dict:
        return await self._edit("create_entity", name, type, description, principal=principal)

    @_on_home_loop
    async def aedit_entity(
        self, name: str, *, description: str | None = None, type: str | None = None, principal: Principal | None = None
    ) -> dict:
        return await self._edit("edit_entity", name, description=description, type=type, principal=principal)

    @_on_home_loop
    async def arename_entity(self, old: str, new: str, *, principal: Principal | None = None) -> dict:
        return await self._edit("rename_entity", old, new, principal=principal)

    @_on_home_loop
    async def adelete_entity(self, name: str, *, principal: Principal | None = None) -> None:
        await self._edit("delete_entity", name, principal=principal)

    @_on_home_loop
    async def amerge_entities(self, sources: list[str], target: str, *, principal: Principal | None = None) -> dict:
        return await self._edit("merge_entities", sources, target, principal=principal)

    @_on_home_loop
    async def acreate_relation(
        self, source: str, target: str, keywords: str = "", description: str = "", strength: float = 1.0,
        *, principal: Principal | None = None,
    ) -> dict:
        return await self._edit("create_relation", source, target, keywords, description, strength, principal=principal)

    @_on_home_loop
    async def aedit_relation(
        self, source: str, target: str, *,
        keywords: str | None = None, description: str | None = None, weight: float | None = None,
        principal: Principal | None = None,
    ) -> dict:
        return await self._edit(
            "edit_relation", source, target, keywords=keywords, description=description, weight=weight, principal=principal
        )

    @_on_home_loop
    async def adelete_relation(self, source: str, target: str, *, principal: Principal | None = None) -> None:
        await self._edit("delete_relation", source, target, principal=principal)

    @_on_home_loop
    async def ainsert_custom_kg(self, kg: CustomKG | dict) -> CustomKGReport:
        return await self._edit("insert_custom_kg", CustomKG.model_validate(kg))

    @_on_home_loop
    async def aexport(
        self, path: str | Path, format: str | None = None, *, principal: Principal | None = None
    ) -> ExportSummary:
        """Needs no LLM: it only reads the stores. With ``principal``: only what
        the documents it may read support, descriptions recomputed from them."""
        await self.aopen()
        return await export_graph(self.stores, path, format, principal=principal)

    @_on_home_loop
    async def amigrate(
        self, target: Settings | str | os.PathLike[str], *, force: bool = False, batch: int = 256,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> MigrateReport:
        """Copy this workspace, stored embeddings and LLM cache included, into
        ``target`` (settings, or a settings file), which must use the same
        embedder; resumes an interrupted copy, verifies, and refuses a
        non-empty target unless ``force`` (``ragkit.pipeline.migrate``, docs/migrate.md)."""
        target = target if isinstance(target, Settings) else load_settings(target).settings
        await self.aopen()
        embedder = build_model(target, "embedder")
        stores = build_stores(target, embedder.dimension, embedder=embedder_label(embedder))
        record = build_store(target, "kv", PROGRESS_NAMESPACE)
        record.fence = stores.lock  # the progress record is written under the target's lock too
        try:
            await stores.open()
            await record.open()
            return await migrate(self.stores, stores, record, force=force, batch=batch, progress=progress)
        finally:
            await record.close()
            await stores.close()
            close = getattr(embedder, "aclose", None)
            if close is not None:
                await close()  # a remote embedder's HTTP client belongs to this loop

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
    migrate = _sync(amigrate)


def _model(kind: str, given: Any, settings: Settings) -> Any:
    if given is None:
        return build_model(settings, kind)
    return create_model(kind, given) if isinstance(given, str) else given


# -- what insert accepts ----------------------------------------------------------


def _insert_inputs(texts: Any, paths: Any, documents: Any) -> list[str | Path | Document]:
    """The inputs of ``insert`` for the loader, each of the kind its argument
    says (a string in ``texts`` is content, in ``paths`` a path), or a
    ``TypeError`` that names the right argument for a misplaced one."""
    if texts is None and paths is None and documents is None:
        raise TypeError("insert() needs something to index: texts, paths=[...] or documents=[...]")
    found: list[str | Path | Document] = []
    found += _items_of_argument("texts", texts, str)
    for path in _items_of_argument("paths", paths, (str, os.PathLike)):
        if not os.fspath(path).strip():
            raise ValueError("insert(): an empty path in paths= (it would mean the current folder); drop it")
        found.append(Path(path))
    found += _items_of_argument("documents", documents, Document)
    return found


_WHERE = {
    "texts": "texts (the first argument) takes strings, the contents to index",
    "paths": "paths= takes files and folders, as strings or Path objects",
    "documents": "documents= takes ragkit.schema.Document objects",
}


def _items_of_argument(name: str, value: Any, kind: type | tuple[type, ...]) -> list[Any]:
    """The items of ``insert``'s argument ``name`` (one value or an iterable of
    them), or a ``TypeError`` for the first one not of ``kind``."""
    if value is None:
        return []
    single = isinstance(value, (str, bytes, os.PathLike, Document, Mapping)) or not isinstance(value, Iterable)
    items = [value] if single else list(value)
    for item in items:
        if not isinstance(item, kind):
            raise TypeError(f"insert(): {_WHERE[name]}; got {_short_repr(item)}. {_fix_for_misplaced(item)}")
    return items


def _fix_for_misplaced(item: Any) -> str:
    """Which argument of ``insert`` takes ``item``."""
    if isinstance(item, os.PathLike):
        return "Fix: pass files and folders as paths=[...]"
    if isinstance(item, Document):
        return "Fix: pass Document objects as documents=[...]"
    if isinstance(item, bytes):
        return "Fix: decode the bytes to a string first"
    return "Fix: give texts as strings, files as paths=[...], Document objects as documents=[...]"


def _short_repr(item: Any) -> str:
    text = repr(item)
    return text if len(text) <= 60 else text[:57] + "..."
