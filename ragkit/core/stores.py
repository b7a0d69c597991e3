"""The stores one workspace uses, opened and closed together, and the
workspace's writer lock (:mod:`ragkit.core.lock`) that every write holds: it
lives in the first store that offers a lease (doc status, graph, then the
others) or in a file beside the workspace, and every store asks it before
each write (its ``fence``), so a writer that lost it writes nothing more.

Built from settings by ``ragkit.backends.build_stores``: the wiring sits at
the top, and this bundle knows nothing of settings files or the registry."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from ragkit.core.lock import LockSettings, WriterLock, lease_for
from ragkit.protocols import DocStatusStore, GraphStore, KVStore, VectorStore

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Callable[..., Awaitable[Any]])
T = TypeVar("T")


async def in_pages(items: AsyncIterator[T], size: int) -> AsyncIterator[list[T]]:
    """A store's streamed items (``keys()``, ``nodes()``, ...) in lists of
    ``size``, the last one shorter: export and migrate read in bounded pages."""
    page: list[T] = []
    async for item in items:
        page.append(item)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page


def writes(what: str) -> Callable[[M], M]:
    """Run a method of an object with ``.stores`` under the workspace's writer
    lock (``Stores.writing``): the write entry points of the pipeline."""

    def mark(method: M) -> M:
        @functools.wraps(method)
        async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            async with self.stores.writing(what):
                return await method(self, *args, **kwargs)

        return run  # type: ignore[return-value]

    return mark


@dataclass
class Stores:
    full_docs: KVStore
    """doc id -> {content, file_path, metadata}"""
    chunks: KVStore
    """chunk id -> {content, doc_id, order, tokens, file_path}"""
    extractions: KVStore
    """chunk id -> the parsed extraction of that chunk: the per-source facts that
    every entity and relation is recomputed from (on merge, delete and repair)"""
    llm_cache: KVStore
    """request cache key -> {text, model_id, role}"""
    doc_paths: KVStore
    """file path -> {doc_id}: finds the old version of a changed file"""
    aliases: KVStore
    """entity resolution's blocks and synonym links (``core/alias_index.py``): derived from the entity keys"""
    alias_splits: KVStore
    """pairs of entities a user split: theirs, kept through deletes and re-indexing"""
    chunk_vectors: VectorStore
    entity_vectors: VectorStore
    relation_vectors: VectorStore
    graph: GraphStore
    doc_status: DocStatusStore

    def __post_init__(self) -> None:
        others = [s for s in self.all() if s is not self.doc_status and s is not self.graph]
        self.lock = WriterLock(lease_for(self.doc_status, self.graph, *others), LockSettings())
        for store in self.all():
            store.fence = self.lock  # every write under the lock checks it still holds it
        for store in self._file_stores():
            store.compact_on_close = False  # close() below compacts, under the lock

    def _file_stores(self) -> list:
        """The stores that keep a snapshot in memory (``refresh``/``compact`` hooks)."""
        return [s for s in self.all() if hasattr(s, "refresh") and hasattr(s, "compact")]

    @contextlib.asynccontextmanager
    async def writing(self, what: str) -> AsyncIterator[None]:
        """Hold the workspace's writer lock (waiting up to ``lock.timeout``):
        every write (index, delete, edit, repair) runs inside. Once the lock is
        taken, stores that hold a snapshot in memory reload what another
        process wrote since."""
        async with self.lock.hold(what, self.refresh):
            try:
                yield
            finally:
                if self.lock.sole:  # the last write out: what a failed one left unsaved is saved under the lock
                    await self._save_or_discard()

    @contextlib.asynccontextmanager
    async def atomic(self) -> AsyncIterator[None]:
        """One backend transaction per distinct ``transaction_scope()`` of the
        stores around the block (``ragkit.protocols.transaction``): the stores
        of one database write a commit batch whole or not at all. Stores
        without a scope write as they always do."""
        scopes: dict[int, Any] = {}
        for store in self.all():
            scope = store.transaction_scope()
            if scope is not None:
                scopes.setdefault(id(scope), scope)
        async with contextlib.AsyncExitStack() as stack:
            for scope in scopes.values():
                await stack.enter_async_context(scope.transaction())
            yield

    async def _save_or_discard(self) -> None:
        """Flush the stores that keep writes in memory, or, when this process
        lost the lock (another writer may be at work), drop what they kept."""
        if self.lock.lost:
            for store in self.all():
                if store.is_open:
                    await store.discard()
            return
        for store in self._file_stores():
            if store.is_open:
                await store.flush()

    async def refresh(self) -> None:
        """Reload the in-memory stores whose files another process changed
        (cheap when nothing changed: a stat per file)."""
        for store in self._file_stores():
            if store.is_open:
                await store.refresh()

    def all(self) -> list:
        return [getattr(self, f.name) for f in fields(self)]

    async def open(self) -> None:
        for store in self.all():
            await store.open()

    async def flush(self) -> None:
        for store in self.all():
            await store.flush()

    async def close(self) -> None:
        await self._compact()
        for store in self.all():
            await store.close()

    async def _compact(self) -> None:
        """Fold journals this process wrote into new snapshots, only if the
        writer lock is free right now: a snapshot is rewritten under the lock
        only, so a closing process never undoes or cuts off another's writes."""
        wrote = [s for s in self._file_stores() if s.is_open and s.wants_compaction]
        if not wrote:
            return
        async with self.lock.hold_if_free("compact") as held:
            if not held:
                return
            try:
                await self.refresh()  # another writer wrote since: its files are newer, and are its to compact
                for store in wrote:
                    if store.wants_compaction:
                        await self.lock.check()  # a compaction rewrites files: fenced like a write
                        await store.compact()
            except Exception as exc:  # the journal stays: nothing is lost, the next writer compacts
                log.warning("compacting at close failed: %s", exc)
