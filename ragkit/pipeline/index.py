"""Insert and delete: the write side, from documents to graph and indexes.

Documents are extracted concurrently (LLM calls bounded by one semaphore) and
handed to a single committer as they finish. The committer writes them in
batches of ``max_batch_docs`` (the last one smaller): chunks, extractions, the
graph update and vectors, then a flush, and only then marks them processed.
Its summary calls go before waiting extraction calls (``llm_cache``). So a
document is ``processed`` only when everything about it is durable, and a
document found ``processing`` after a crash is removed and redone; the LLM
cache makes the redo free. A delete marks its documents ``deleting`` first, so
one cut short is finished by the next run.

A document whose records no store could keep (``ragkit.core.text``) fails
alone, before the committer writes anything of its batch, with an error naming
the document and the cause; the other documents of the run and later runs are
not affected. A failed document's stored error is ``public_message`` (readers
of the workspace see it); the whole error, redacted, is in the report
(``IndexReport.failed_details``) for whoever ran the indexing.

A document of more than ``window_chunks`` chunks is extracted, merged and
committed one window at a time under the same commit lock as the batches
(``ragkit.pipeline.windows``); it stays ``processing`` until its last window,
then is marked processed with the committer's next batch, so it counts once.
Progress events: ``documents_unchanged`` (inputs already indexed),
``characters_planned`` (the text to index, when a run starts),
``chunks_counted`` and ``characters_chunked`` (each document once chunked:
with the characters still to chunk they estimate the run's chunks before all
are chunked), ``chunks_planned`` (a windowed document's chunk count),
``chunks_extracted`` (per document, or per chunk in a window),
``chunks_resumed`` (a windowed document's chunks committed before an
interruption, then also in ``chunks_committed``), ``chunks_committed`` (per
window) and ``documents_committed``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field

from ragkit.core import heap
from ragkit.core.llm_cache import CachedLLM
from ragkit.core.pacing import Pacer, in_writer_thread
from ragkit.core.stores import Stores, writes
from ragkit.core.text import clean, record_problem
from ragkit.errors import ExtractionError, public_message
from ragkit.executors import Executor, LocalExecutor
from ragkit.pipeline.chunk import get_chunker
from ragkit.pipeline.edit_journal import finish_interrupted_edit
from ragkit.pipeline.extract import ChunkExtraction, extract_chunk
from ragkit.pipeline.graph_update import PAGE as EXTRACTIONS_PAGE
from ragkit.core.alias_check import ModelCheck
from ragkit.core.alias_index import AliasIndex
from ragkit.pipeline.graph_update import Changes, GraphUpdater, embed_all
from ragkit.pipeline.identity import cache_space, path_key, path_keys
from ragkit.pipeline.merge import Merger
from ragkit.pipeline.summaries import finish_summaries, mark_pending, pending_documents
from ragkit.pipeline.windows import COMMITTED_MARK, SEGMENT_CHARS, committed_mark, iter_chunks
from ragkit.pipeline.windows import chunk_ids as plan_chunk_ids
from ragkit.protocols import Embedder, Tokenizer
from ragkit.schema import LEGACY_DELETING_FLAG, Chunk, DocStatus, DocStatusRecord, Document, utcnow
from ragkit.sections.index import IndexConfig

__all__ = ["IndexConfig", "IndexReport", "Indexer", "Progress"]

WRITE_PAGE = 16
"""Chunks or extractions written per store call (``_write``): encoding and
writing a page is one slice of the loop's time."""


DOC_PAGE_CHARS = 1 << 20
"""Characters of document text per ``full_docs`` write when a run starts."""

CHUNK_SLOTS_PER_CALL = 4
"""Chunks whose extraction has started, per concurrent LLM call."""


@dataclass
class DocOutcome:
    doc: Document
    chunks: list[Chunk] = field(default_factory=list)
    extractions: list[ChunkExtraction] = field(default_factory=list)
    error: str | None = None
    """What is stored and shown to readers (``public_message``)."""
    detail: str | None = None
    """The whole error, redacted, for the one who runs the indexing."""
    windowed_chunks: int = 0
    """Chunks already committed window by window (then ``chunks`` is empty)."""


@dataclass
class IndexReport:
    processed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Document id -> the error as stored in its status, for anyone who may read it."""
    failed_details: dict[str, str] = field(default_factory=dict)
    """Document id -> the whole error (the model server's words, its URL), redacted:
    for the CLI's output and the server log, never for a client or a store."""
    replaced: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    chunks: int = 0
    dropped_rows: int = 0
    seconds: float = 0.0
    llm: dict = field(default_factory=dict)


Progress = Callable[[str, int], None]


class Indexer:
    def __init__(
        self,
        stores: Stores,
        llm: CachedLLM,
        embedder: Embedder,
        tokenizer: Tokenizer,
        config: IndexConfig,
        progress: Progress | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.stores = stores
        self.llm = llm
        self.embedder = embedder
        self.executor = executor or LocalExecutor()  # where chunking runs (the models come placed)
        self.tokenizer = tokenizer
        self.config = config
        self.chunker = get_chunker(config.chunker, tokenizer, config.chunk_size, config.chunk_overlap)
        aliases = self.alias_index() if config.aliases else None
        self.updater = GraphUpdater(stores, Merger(llm, tokenizer, config.merge), embedder, aliases=aliases)
        self.progress = progress or (lambda event, n: None)
        self.segment_chars = SEGMENT_CHARS
        self._commit_lock = asyncio.Lock()  # batches and windows never merge at once
        self._resume: dict[str, int] = {}  # doc id -> chunks already committed (recover)
        # One large document at a time: a window already fills the LLM slots,
        # and memory then holds one window of extractions, not one per file.
        self._large = asyncio.Semaphore(1)
        # Chunks being extracted at once: enough to keep the model's slots
        # busy and let cache hits through (``_extract_chunk``).
        self._chunk_slots = asyncio.Semaphore(CHUNK_SLOTS_PER_CALL * config.llm_concurrency)

    def alias_index(self) -> AliasIndex:
        """Entity resolution's links as this configuration keeps them (with the
        model check when ``alias_check`` is on)."""
        check = ModelCheck(self.llm) if self.config.alias_check else None
        return AliasIndex(self.stores.aliases, self.stores.alias_splits, check)

    # -- insert ----------------------------------------------------------------

    @writes("index")
    async def insert(self, documents: Sequence[Document], *, recover: bool | Collection[str] = True) -> IndexReport:
        """Index ``documents``; first finish what an interrupted run left and
        retry failed documents, in this report: all of them (``recover``
        true), or those of the ids given only."""
        started = time.perf_counter()
        for vectors in (self.stores.chunk_vectors, self.stores.entity_vectors, self.stores.relation_vectors):
            vectors.check_stored()  # another embedder's store: say so before any model call, not after
        report = IndexReport()
        if recover is not False:
            report.recovered = await self.recover(report, only=None if recover is True else set(recover))
        todo = await self._admit(documents, report)
        with heap.freezing_survivors():  # the stores grow: full GC passes would rescan them on the loop
            await self._run(todo, report)
            await self._finish_summaries()
        report.seconds = time.perf_counter() - started
        report.llm = self.llm.stats.as_dict()
        return report

    async def _admit(self, documents: Sequence[Document], report: IndexReport) -> list[Document]:
        """Skip what is already processed; record the rest as pending."""
        unique = list({d.id: d for d in documents}.values())
        existing = await self.stores.doc_status.get([d.id for d in unique])
        unique = await self._keep_access(unique, existing)
        todo: list[Document] = []
        relisted: list[DocStatusRecord] = []
        recovered = set(report.processed)  # finished by this run's recovery: processed, not skipped
        skipped = len(report.skipped)
        for doc, status in zip(unique, existing):
            if status is not None and status.status is DocStatus.PROCESSED:
                if doc.id not in recovered:
                    report.skipped.append(doc.id)
                if status.access != doc.access:  # who may read it changed: no re-indexing needed
                    relisted.append(status.model_copy(update={"access": doc.access, "updated_at": utcnow()}))
                continue
            todo.append(doc)
        self.progress("documents_unchanged", len(report.skipped) - skipped)
        await self.stores.doc_status.upsert(relisted)
        now = utcnow()
        # A page of about DOC_PAGE_CHARS at a time: one store call encodes its
        # whole page on the loop (50 documents of 200 chunks: 291 ms in one).
        page: dict[str, dict] = {}
        size = 0
        for d in todo:
            page[d.id] = _doc_record(d)
            size += len(d.content)
            if size >= DOC_PAGE_CHARS:
                await self.stores.full_docs.upsert(page)
                page, size = {}, 0
        await self.stores.full_docs.upsert(page)
        await self.stores.doc_status.upsert(
            DocStatusRecord(
                id=d.id, status=DocStatus.PENDING, created_at=now, updated_at=now,
                content_hash=d.id, file_path=d.file_path, content_length=len(d.content),
                metadata=d.metadata, access=d.access,
            )
            for d in todo
        )
        return todo

    async def _keep_access(self, docs: list[Document], existing: list[DocStatusRecord | None]) -> list[Document]:
        """A document given without an access list keeps the one it had, or the
        one of the version indexed before from the same path: re-indexing a
        folder without its flags must not make its documents readable by all
        (an empty ``AccessList()`` does that on purpose)."""
        asked = [d for d, r in zip(docs, existing) if d.access is None and r is None and d.file_path]
        old = dict(zip((d.id for d in asked), await self._old_versions(asked)))
        old_ids = sorted({i for i in old.values() if i})
        old_access = {r.id: r.access for r in await self.stores.doc_status.get(old_ids) if r is not None}
        out = []
        for doc, record in zip(docs, existing):
            access = doc.access
            if access is None and record is not None:
                access = record.access
            elif access is None and old.get(doc.id):
                access = old_access.get(old[doc.id])
            out.append(doc if access == doc.access else doc.model_copy(update={"access": access}))
        return out

    async def _old_versions(self, docs: list[Document]) -> list[str | None]:
        """The id each document's path key points to: its own key, else the
        key by the path as given of workspaces from before absolute paths."""
        keys = [path_keys(d.file_path, d.metadata) for d in docs]
        wanted = sorted({k for ks in keys for k in ks})
        found = dict(zip(wanted, await self.stores.doc_paths.get_many(wanted))) if wanted else {}
        return [next((found[k]["doc_id"] for k in ks if found.get(k)), None) for ks in keys]

    async def _run(self, todo: list[Document], report: IndexReport) -> None:
        self.progress("characters_planned", sum(len(d.content) for d in todo))  # 0: nothing to index
        queue: asyncio.Queue[DocOutcome] = asyncio.Queue()
        doc_slots = asyncio.Semaphore(self.config.max_docs_in_flight)

        async def extract(doc: Document) -> None:
            async with doc_slots:
                await queue.put(await self._extract_doc(doc))

        tasks = [asyncio.create_task(extract(d)) for d in todo]
        try:
            remaining = len(todo)
            while remaining:
                # Full batches only (the last excepted): a batch re-merges every
                # entity it touches, so small ones cost summary calls and flushes.
                batch = [await queue.get()]
                while len(batch) < min(remaining, self.config.max_batch_docs):
                    batch.append(await queue.get())
                remaining -= len(batch)
                # One transaction across the stores that share a database: a
                # batch is there whole or not at all, whenever the process dies.
                async with self._commit_lock, self.stores.atomic():
                    await self._commit(batch, report)
                await heap.release(batch)  # its extractions: freed in slices, not in one call on the loop
                await heap.give_back()  # and the pages they held returned to the system
        finally:
            for task in tasks:
                task.cancel()

    async def _extract_doc(self, doc: Document) -> DocOutcome:
        outcome = DocOutcome(doc)
        try:
            if len(doc.content) > self.segment_chars:
                async with self._large:
                    outcome.windowed_chunks = await self._windowed(doc, None)
                return outcome
            outcome.chunks = await self.executor.chunk(self.chunker, doc)
            if len(outcome.chunks) > self.config.window_chunks:
                chunks, outcome.chunks = outcome.chunks, []
                async with self._large:
                    outcome.windowed_chunks = await self._windowed(doc, chunks)
                return outcome
            self._counted(doc, len(outcome.chunks))
            await self.stores.doc_status.upsert([await self._status(doc.id, DocStatus.PROCESSING, outcome.chunks)])
            outcome.extractions = list(
                await asyncio.gather(*(self._extract_chunk(c, cache_space(doc)) for c in outcome.chunks))
            )
            self.progress("chunks_extracted", len(outcome.chunks))
            problem = await in_writer_thread(unstorable, outcome.extractions)  # a pure check, seconds on a large document
            if problem:
                raise _unstorable_error(problem)
        except Exception as exc:  # one bad document must not stop the run
            from ragkit.redact import redact  # printed and logged: a server's error text may echo a key

            # An extraction error names only a chunk: say which document.
            named = f" ({_named(doc)})" if isinstance(exc, ExtractionError) else ""
            outcome.error = public_message(exc) + named
            outcome.detail = redact(f"{type(exc).__name__}: {exc}{named}", exc=exc)
        return outcome

    async def _windowed(self, doc: Document, chunks: list[Chunk] | None) -> int:
        """Extract, merge and commit ``doc`` one window of chunks at a time
        (``chunks`` given, or streamed from its text); returns the chunk count."""
        # Chunking the text (to plan the ids, then window by window) runs in a
        # worker thread: a segment is a million characters for tiktoken.
        ids = [c.id for c in chunks] if chunks is not None else await in_writer_thread(
            plan_chunk_ids, self.chunker, doc, self.segment_chars
        )
        done = self._resume.pop(doc.id, 0)
        await self.stores.doc_status.upsert([await self._status(doc.id, DocStatus.PROCESSING, ids=ids, mark=done)])
        self._counted(doc, len(ids))
        self.progress("chunks_planned", len(ids))
        if done:
            self.progress("chunks_resumed", done)
            self.progress("chunks_committed", done)
        stream = iter(chunks) if chunks is not None else iter_chunks(self.chunker, doc, self.segment_chars)
        window: list[Chunk] = []
        while (chunk := await _next_chunk(stream, chunks is None)) is not None:
            window.append(chunk)
            if len(window) == self.config.window_chunks:
                await self._window(doc, window, done)
                window = []
        if window:
            await self._window(doc, window, done)
        return len(ids)

    def _counted(self, doc: Document, chunks: int) -> None:
        self.progress("chunks_counted", chunks)
        self.progress("characters_chunked", len(doc.content))

    async def _window(self, doc: Document, window: list[Chunk], done: int) -> None:
        end = window[-1].order + 1
        if end <= done:  # committed before the run was cut short
            return
        extractions = list(await asyncio.gather(*(self._extract_one(c, cache_space(doc)) for c in window)))
        problem = await in_writer_thread(unstorable, extractions)
        if problem:
            raise _unstorable_error(problem)
        async with self._commit_lock, self.stores.atomic():
            await self._write(window, extractions)
            # After the flush: a crash from here on keeps these chunks.
            await self.stores.doc_status.upsert([await self._status(doc.id, DocStatus.PROCESSING, mark=end)])
        self.progress("chunks_committed", len(window))
        await heap.release(extractions)

    async def _extract_one(self, chunk: Chunk, space: str | None) -> ChunkExtraction:
        """One chunk of a window, counted as it finishes: a window's extraction
        takes minutes with a slow model, and progress must not sit still."""
        extraction = await self._extract_chunk(chunk, space)
        self.progress("chunks_extracted", 1)
        return extraction

    async def _extract_chunk(self, chunk: Chunk, space: str | None) -> ChunkExtraction:
        """One chunk's extraction, once one of ``_chunk_slots`` is free. Why: a
        chunk's prompt and cache key are a fraction of a millisecond of work
        before its first wait, and the documents in flight start thousands of
        chunks in one turn of the loop (6,400 at 32 documents of 200 chunks:
        1.3 s); behind the slots each start is one wait."""
        async with self._chunk_slots:
            return await extract_chunk(chunk, self.llm, self.config.extract, space)

    async def _write(self, chunks: list[Chunk], extractions: list[ChunkExtraction]) -> None:
        """Chunks, extractions, the graph update and vectors, then a flush.
        A page at a time, paced (``ragkit.core.pacing``): a batch of large
        documents is tens of thousands of records to encode, and the loop
        answers readers meanwhile."""
        pace = Pacer()
        for i in range(0, len(chunks), WRITE_PAGE):
            page = chunks[i : i + WRITE_PAGE]
            await self.stores.chunks.upsert({c.id: chunk_record(c) for c in page})
            await pace()
        changes = Changes()
        for i in range(0, len(extractions), WRITE_PAGE):
            page = extractions[i : i + WRITE_PAGE]
            await self.stores.extractions.upsert({e.chunk_id: e.model_dump(mode="json") for e in page})
            for ex in page:
                changes.add_extraction(ex)
            await pace()
        await self.updater.apply(changes, summarise=not self.config.merge.defer_summaries)
        for i in range(0, len(chunks), WRITE_PAGE):
            page = chunks[i : i + WRITE_PAGE]
            vectors = await embed_all(self.embedder, [c.content for c in page], pace)
            await self.stores.chunk_vectors.upsert([c.id for c in page], vectors, [chunk_meta(c) for c in page])
        await self.stores.flush()

    async def _status(
        self, doc_id: str, status: DocStatus, chunks: list[Chunk] | None = None, error: str | None = None,
        *, ids: list[str] | None = None, mark: int | None = None,
    ) -> DocStatusRecord:
        (record,) = await self.stores.doc_status.get([doc_id])
        assert record is not None
        update: dict = {"status": status, "updated_at": utcnow(), "error": error}
        if chunks is not None:
            ids = [c.id for c in chunks]
        if ids is not None:
            update["chunk_ids"] = ids
        # The windows' mark lives until the document is processed (a failed
        # one keeps it: its committed windows are still there to resume from).
        if status is DocStatus.PROCESSED or mark is not None:
            metadata = {k: v for k, v in record.metadata.items() if k != COMMITTED_MARK}
            if mark:
                metadata[COMMITTED_MARK] = mark
            update["metadata"] = metadata
        return record.model_copy(update=update)

    async def _commit(self, batch: list[DocOutcome], report: IndexReport) -> None:
        ok = [o for o in batch if o.error is None]
        failed = [o for o in batch if o.error is not None]
        chunks = [c for o in ok for c in o.chunks]
        extractions = [e for o in ok for e in o.extractions]
        await self._write(chunks, extractions)
        # Before the status: a processed document is never redone, so its old
        # version must be gone by then.
        report.replaced += await self._replace_old_versions([o.doc for o in ok])
        statuses = [await self._status(o.doc.id, DocStatus.PROCESSED) for o in ok]
        if self.config.merge.defer_summaries:  # cleared once their summaries are flushed
            statuses = [mark_pending(s) for s in statuses]
        statuses += [await self._status(o.doc.id, DocStatus.FAILED, error=o.error) for o in failed]
        await self.stores.doc_status.upsert(statuses)
        report.processed += [o.doc.id for o in ok]
        report.failed.update({o.doc.id: o.error or "" for o in failed})
        report.failed_details.update({o.doc.id: o.detail or o.error or "" for o in failed})
        report.chunks += len(chunks) + sum(o.windowed_chunks for o in ok)
        report.dropped_rows += sum(e.dropped for e in extractions)
        self.progress("documents_committed", len(ok))

    async def _replace_old_versions(self, docs: list[Document]) -> list[str]:
        """A changed file at a known path replaces the version indexed before."""
        with_path = [d for d in docs if d.file_path]
        if not with_path:
            return []
        old = await self._old_versions(with_path)
        stale = list(dict.fromkeys(i for d, i in zip(with_path, old) if i and i != d.id))
        # Delete, then repoint the path: a crash in between leaves the path on
        # the old id, so the redo of these documents finds it again.
        if stale:
            await self.delete(stale, keep_paths=True)
        await self.stores.doc_paths.upsert({_path_key(d): {"doc_id": d.id} for d in with_path})  # type: ignore[misc]
        return stale

    # -- recovery and delete ---------------------------------------------------

    @writes("recover")
    async def recover(
        self, report: IndexReport | None = None, *, only: Collection[str] | None = None,
        besides: Collection[str] = (),
    ) -> list[str]:
        """Finish interrupted deletes; undo and requeue interrupted inserts, and
        retry failed documents (answers already cached cost no new calls).
        ``only`` / ``besides``: of these documents only, or of all others."""
        def chosen(r: DocStatusRecord) -> bool:
            return (only is None or r.id in only) and r.id not in besides

        await finish_interrupted_edit(self.stores, self.updater)  # before anything it touched changes again
        deleting = [r.id for r in await self._list(DocStatus.DELETING) if chosen(r)]
        interrupted = [
            r for status in (DocStatus.PROCESSING, DocStatus.PENDING, DocStatus.FAILED)
            for r in await self._list(status) if chosen(r)
        ]
        # Workspaces from before DocStatus.DELETING marked a delete with a
        # metadata flag on a "processing" record: finish those deletes too.
        deleting += [r.id for r in interrupted if r.metadata.get(LEGACY_DELETING_FLAG)]
        if deleting:
            await self.delete(deleting)
        redo = [r for r in interrupted if not r.metadata.get(LEGACY_DELETING_FLAG)]
        if not redo:
            await self._finish_summaries()
            return deleting
        heads = await self._resumable(redo)
        await self._remove_contribution(redo, keep=heads)
        self._resume.update(heads)
        docs = await self.stores.full_docs.get_many([r.id for r in redo])
        requeue = [
            _stored_doc(r.id, d).model_copy(update={"access": r.access})  # its cache space follows the list
            for r, d in zip(redo, docs)
            if d is not None
        ]
        await self.stores.doc_status.upsert(
            r.model_copy(update={"status": DocStatus.PENDING, "updated_at": utcnow()}) for r in redo
        )
        await self._run(requeue, report or IndexReport())
        await self._finish_summaries()
        return deleting + [r.id for r in redo]

    async def _finish_summaries(self) -> None:
        """Summaries deferred by committed batches (``ragkit.pipeline.summaries``)."""
        await finish_summaries(self.stores, self.updater, await pending_documents(self.stores), self.progress)

    async def _resumable(self, records: Sequence[DocStatusRecord]) -> dict[str, int]:
        """Documents cut short between windows, with the chunks committed before:
        kept when chunking the text again still gives those chunk ids."""
        out: dict[str, int] = {}
        for rec in records:
            mark = committed_mark(rec.metadata)
            if not mark or len(rec.chunk_ids) < mark:
                continue
            (doc,) = await self.stores.full_docs.get_many([rec.id])
            if doc is None:
                continue
            again = await in_writer_thread(plan_chunk_ids, self.chunker, _stored_doc(rec.id, doc), self.segment_chars)
            if again[:mark] == rec.chunk_ids[:mark]:
                out[rec.id] = mark
        return out

    async def _list(self, status: DocStatus) -> list[DocStatusRecord]:
        """Every record of one status (recovery works on all of them at once)."""
        out: list[DocStatusRecord] = []
        cursor = None
        while True:
            page = await self.stores.doc_status.list_page(status, 500, cursor)
            out += page.items
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

    @writes("delete")
    async def delete(self, doc_ids: Sequence[str], *, keep_paths: bool = False) -> list[str]:
        """Remove documents and everything derived only from them; entities and
        relations they shared are recomputed once from the remaining sources."""
        await finish_interrupted_edit(self.stores, self.updater)  # an edit's chunks may be among these
        records = [r for r in await self.stores.doc_status.get(list(dict.fromkeys(doc_ids))) if r]
        if not records:
            return []
        # "deleting" before anything is removed, so that a crash mid-delete is
        # found by status and finished by recover(). The legacy flag goes: the
        # status now says it.
        await self.stores.doc_status.upsert(
            r.model_copy(update={
                "status": DocStatus.DELETING, "updated_at": utcnow(),
                "metadata": {k: v for k, v in r.metadata.items() if k != LEGACY_DELETING_FLAG},
            })
            for r in records
        )
        await self._remove_contribution(records)
        ids = [r.id for r in records]
        await self.stores.full_docs.delete(ids)
        if not keep_paths:
            paths = [key for r in records for key in path_keys(r.file_path, r.metadata)]
            current = await self.stores.doc_paths.get_many(paths)
            await self.stores.doc_paths.delete(
                p for p, rec in zip(paths, current) if rec and rec["doc_id"] in ids
            )
        await self.stores.flush()
        await self.stores.doc_status.delete(ids)
        return ids

    async def _remove_contribution(self, records: Sequence[DocStatusRecord], keep: dict[str, int] | None = None) -> None:
        """Undo what ``records`` added; ``keep`` spares each named document's
        first chunks (committed windows a resumed run goes on from)."""
        chunk_ids = await self._chunk_ids(records)
        if keep:
            kept = {c for r in records if r.id in keep for c in r.chunk_ids[: keep[r.id]]}
            chunk_ids = [c for c in chunk_ids if c not in kept]
        changes = Changes()
        pace = Pacer()
        step = EXTRACTIONS_PAGE  # a large document's extractions, a page at a time
        for i in range(0, len(chunk_ids), step):
            for rec in await self.stores.extractions.get_many(chunk_ids[i : i + step]):
                if rec is not None:
                    changes.remove_extraction(ChunkExtraction.model_validate(rec))
                await pace()
        changes.removed_chunks.update(chunk_ids)
        await self.updater.apply(changes)
        await self.stores.chunk_vectors.delete(chunk_ids)
        # The graph recomputed without these chunks is durable before their
        # extractions go: stores that write at once (SQLite) would otherwise lose
        # the facts a crash's redo needs to find what the chunks touched, while
        # the graph (flushed later) still named them as sources.
        await self.stores.flush()
        await self.stores.chunks.delete(chunk_ids)
        await self.stores.extractions.delete(chunk_ids)
        await self.stores.flush()

    async def _chunk_ids(self, records: Sequence[DocStatusRecord]) -> list[str]:
        """Chunk ids from the status record, or by re-chunking when a crash came
        before they were recorded (chunking is deterministic)."""
        out: list[str] = []
        for rec in records:
            if rec.chunk_ids:
                out += rec.chunk_ids
                continue
            (doc,) = await self.stores.full_docs.get_many([rec.id])
            if doc is not None:
                out += await in_writer_thread(plan_chunk_ids, self.chunker, _stored_doc(rec.id, doc), self.segment_chars)
        return list(dict.fromkeys(out))


async def _next_chunk(stream: Iterator[Chunk], chunking: bool) -> Chunk | None:
    """The next chunk, ``None`` at the end; computed in a worker thread when the
    stream chunks the text as it goes (``chunking``)."""
    return await in_writer_thread(next, stream, None) if chunking else next(stream, None)


def unstorable(extractions: Sequence[ChunkExtraction]) -> str | None:
    """Why some store would refuse these extractions (graph keys and properties
    come from them), or ``None``. The parser makes them storable; this is the
    check, before the committer writes a batch, that one document cannot abort."""
    for ex in extractions:
        problem = record_problem(ex.model_dump(mode="json"), f"chunk {ex.chunk_id}")
        if problem:
            return problem
    return None


def _path_key(doc: Document) -> str:
    return path_key(doc.file_path, doc.metadata) or ""


def _unstorable_error(problem: str) -> ExtractionError:
    # ``problem`` is ragkit's check (a record path and the bad character), not
    # the model's words: public, so a reader can tell why the document failed.
    message = f"the extraction cannot be stored ({problem})"
    return ExtractionError(message, public=message)


def _named(doc: Document) -> str:
    """A document as an error names it: id and file path (made printable)."""
    return f"document {doc.id}, {clean(doc.file_path) if doc.file_path else 'no file path'}"


def _doc_record(doc: Document) -> dict:
    record = {"content": doc.content, "file_path": doc.file_path, "metadata": doc.metadata}
    if doc.segments:  # pages and sections: chunking again (resume, delete) needs them
        record |= {"segments": [s.model_dump() for s in doc.segments], "unit": doc.unit}
    return record


def _stored_doc(doc_id: str, record: dict) -> Document:
    return Document(id=doc_id, content=record["content"], file_path=record.get("file_path"),
                    metadata=record.get("metadata") or {}, segments=record.get("segments") or [],
                    unit=record.get("unit") or "page")


def chunk_record(chunk: Chunk) -> dict:
    # A chunk without a location (custom KG chunks) stores none, as before locations existed.
    return chunk.model_dump(mode="json", exclude={"id"} | ({"location"} if chunk.location is None else set()))


def chunk_meta(chunk: Chunk) -> dict:
    meta = {"doc_id": chunk.doc_id, "order": chunk.order}
    if chunk.file_path:
        meta["file_path"] = chunk.file_path
    return meta
