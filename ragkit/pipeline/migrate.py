"""Copy a workspace from one backend combination to another (``ragkit migrate``).

What is copied: every KV namespace of :class:`ragkit.core.stores.Stores` (full
documents, chunks, extractions, document paths, the LLM cache), the three
vector stores *with their stored embeddings* (``VectorStore.records``: nothing
is embedded again), the graph's nodes and edges with all their properties, and
last the doc-status records, which carry the access lists. Nothing is
extracted again, and no model is called.

How (docs/migrate.md is the user's view):

- **Parts, pages.** Each store is a part, copied in order (doc status last: a
  target cut off mid-copy lists no document). A part is read with the store's
  own paged scan (``keys()``, ``records()``, ``nodes()``, ``edges()``,
  ``list_page``), ``batch`` records at a time, and written a page at a time, so
  memory holds one page, whatever the workspace's size.
- **Progress record.** After each page is written, the target stores are
  flushed and the progress record (``PROGRESS_KEY`` in the target's KV
  namespace ``PROGRESS_NAMESPACE``) says how many records of the part are
  copied. A run that finds an unfinished record resumes: finished parts are
  skipped, and the scan of the interrupted part writes, over the stretch the
  record counts, only what the target lacks (or holds otherwise), so a
  scan in another order than the interrupted one's loses nothing.
- **Refusals.** A target holding anything (and no unfinished record) is
  refused unless ``force``, which empties it first; so is a source that
  changed since an interrupted run began (its counts, and its doc-status
  generation where the store keeps one), source and target sharing a store,
  and vector stores of different embedders or dimensions.
- **Locks.** The writer lock of both workspaces is held for the whole copy:
  nothing writes the source while it is read, nor the target while it is written.
- **Verification.** Afterwards every part's count must be equal on both sides,
  and a sample of each part (drawn at random over the part's scan, or its
  first page for a part finished by an earlier run) must read back equal:
  records, properties and metadata exactly, vectors by direction (Qdrant and
  Chroma keep unit vectors, and cosine search does not see the length).
"""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from ragkit.core.stores import Stores, in_pages
from ragkit.errors import MigrateError
from ragkit.protocols import KVStore, VectorStore
from ragkit.schema import DocStatusRecord

PROGRESS_NAMESPACE = "migration"
"""The target's KV namespace holding the progress record (never copied itself)."""
PROGRESS_KEY = "progress"
FORMAT = "ragkit-migration/1"
DIRECTION_TOLERANCE = 1e-5
"""Unit vectors of a sample may differ by this much per component (float32 rounding)."""

Progress = Callable[[str, int, int], None]
"""``progress(part, records done, records in the part)``, after every page."""
Item = tuple[Any, Any]
"""A record of a part as ``(key, value)``."""


class MigrateReport(BaseModel):
    source: str
    """The source's backends and workspace (``describe``)."""
    target: str
    resumed: bool
    """An interrupted run's copy was taken up."""
    records: dict[str, int]
    """Records per part (the source's count, equal to the target's)."""
    copied: dict[str, int]
    """Records written by this run, per part."""
    verified: dict[str, int]
    """Sampled records compared per part."""
    seconds: float


class _Part:
    """One store of a workspace as the copy sees it (subclasses per kind)."""

    def __init__(self, name: str, field: str, exact: bool = True) -> None:
        self.name, self.field = name, field
        self.exact = exact
        """False for the LLM cache: queries of the source (readers, which the
        writer lock lets in) may add answers while it is copied; those added
        after its scan are not copied, which a cache can afford."""

    def store(self, stores: Stores) -> Any:
        return getattr(stores, self.field)

    async def count(self, stores: Stores) -> int:
        return await self.store(stores).count()

    def pages(self, stores: Stores, batch: int) -> AsyncIterator[list[Item]]:
        raise NotImplementedError

    async def write(self, stores: Stores, items: list[Item]) -> None:
        raise NotImplementedError

    async def read(self, stores: Stores, keys: list[Any]) -> list[Any]:
        """The values of ``keys`` (``None`` where missing), as ``pages`` gives them."""
        raise NotImplementedError

    def same(self, a: Any, b: Any) -> bool:
        return a == b


class _KV(_Part):
    async def pages(self, stores: Stores, batch: int) -> AsyncIterator[list[Item]]:
        store: KVStore = self.store(stores)
        async for keys in in_pages(store.keys(), batch):
            yield [(k, v) for k, v in zip(keys, await store.get_many(keys)) if v is not None]

    async def write(self, stores: Stores, items: list[Item]) -> None:
        await self.store(stores).upsert(dict(items))

    async def read(self, stores: Stores, keys: list[Any]) -> list[Any]:
        return await self.store(stores).get_many(keys)


class _Vectors(_Part):
    async def pages(self, stores: Stores, batch: int) -> AsyncIterator[list[Item]]:
        store: VectorStore = self.store(stores)
        async for records in store.records(batch):
            yield [(r.id, (r.vector, r.metadata)) for r in records]

    async def write(self, stores: Stores, items: list[Item]) -> None:
        ids = [k for k, _ in items]
        vectors = np.asarray([v for _, (v, _) in items], dtype=np.float32)
        await self.store(stores).upsert(ids, vectors, [m for _, (_, m) in items])

    async def read(self, stores: Stores, keys: list[Any]) -> list[Any]:
        found = await self.store(stores).get(keys)
        return [None if r is None else (r.vector, r.metadata) for r in found]

    def same(self, a: Any, b: Any) -> bool:
        return a[1] == b[1] and bool(np.allclose(_unit(a[0]), _unit(b[0]), atol=DIRECTION_TOLERANCE, rtol=0))


def _unit(vector: Sequence[float]) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float64)
    return v / np.linalg.norm(v)


class _Nodes(_Part):
    async def count(self, stores: Stores) -> int:
        return await stores.graph.node_count()

    async def pages(self, stores: Stores, batch: int) -> AsyncIterator[list[Item]]:
        async for nodes in in_pages(stores.graph.nodes(), batch):
            yield [(n.id, n.properties) for n in nodes]

    async def write(self, stores: Stores, items: list[Item]) -> None:
        await stores.graph.upsert_nodes(dict(items))

    async def read(self, stores: Stores, keys: list[Any]) -> list[Any]:
        return await stores.graph.get_nodes(keys)


class _Edges(_Part):
    async def count(self, stores: Stores) -> int:
        return await stores.graph.edge_count()

    async def pages(self, stores: Stores, batch: int) -> AsyncIterator[list[Item]]:
        async for edges in in_pages(stores.graph.edges(), batch):
            yield [(e.key, e.properties) for e in edges]

    async def write(self, stores: Stores, items: list[Item]) -> None:
        await stores.graph.upsert_edges([(a, b, props) for (a, b), props in items])

    async def read(self, stores: Stores, keys: list[Any]) -> list[Any]:
        return await stores.graph.get_edges(keys)


class _DocStatus(_Part):
    async def pages(self, stores: Stores, batch: int) -> AsyncIterator[list[Item]]:
        cursor = None
        while True:
            page = await stores.doc_status.list_page(None, batch, cursor)
            if page.items:
                yield [(r.id, r) for r in page.items]
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def write(self, stores: Stores, items: list[Item]) -> None:
        await stores.doc_status.upsert([r for _, r in items])

    async def read(self, stores: Stores, keys: list[Any]) -> list[Any]:
        return await stores.doc_status.get(keys)

    def same(self, a: DocStatusRecord, b: DocStatusRecord) -> bool:
        return a.model_dump() == b.model_dump()


def parts(stores: Stores) -> list[_Part]:
    """Every store of a workspace, in the order they are copied. The KV and
    vector namespaces are read off ``Stores``, so a namespace added there is copied too."""
    kv = [_KV(f"kv:{s.namespace}", f, exact=s is not stores.llm_cache) for f, s in vars(stores).items()
          if isinstance(s, KVStore)]
    vec = [_Vectors(f"vector:{s.namespace}", f) for f, s in vars(stores).items() if isinstance(s, VectorStore)]
    return [*kv, *vec, _Nodes("graph:nodes", "graph"), _Edges("graph:edges", "graph"), _DocStatus("doc_status", "doc_status")]


def describe(stores: Stores) -> str:
    """``workspace W on kv=sqlite, vector=numpy, graph=sqlite, doc_status=sqlite``."""
    backends = {"kv": stores.chunks, "vector": stores.chunk_vectors, "graph": stores.graph, "doc_status": stores.doc_status}
    names = ", ".join(f"{kind}={type(s).name or type(s).__name__}" for kind, s in backends.items())
    return f"workspace {stores.doc_status.workspace!r} on {names}"


def check_compatible(source: Stores, target: Stores) -> None:
    """Refuse what a copy cannot make right: one store on both sides, or vectors
    another embedder (or dimension) would have to read."""
    for s, t in zip(source.all(), target.all()):
        if type(s) is type(t) and s.config.model_dump(exclude={"embedder", "dimension"}) == t.config.model_dump(
            exclude={"embedder", "dimension"}
        ):
            raise MigrateError(
                f"the source and the target are the same {type(s).name or type(s).__name__} store "
                f"({s.workspace}/{s.namespace}): a workspace cannot be copied onto itself. Fix: give the "
                "target another workspace (--to-workspace, or `workspace` in the target's settings) or other backends"
            )
    s, t = source.chunk_vectors.config, target.chunk_vectors.config
    if (s.embedder, s.dimension) != (t.embedder, t.dimension):
        raise MigrateError(
            f"the source's vectors are made by {s.embedder or 'an unnamed embedder'} (dimension {s.dimension}), "
            f"but the target is configured with {t.embedder or 'an unnamed embedder'} (dimension {t.dimension}): "
            "migrate copies the stored embeddings and embeds nothing again, so both must use one embedder. "
            "Fix: set the target's [embedder] (name and options) to the source's, or index the documents "
            "again into the target with `ragkit index` instead"
        )


async def fingerprint(stores: Stores, all_parts: list[_Part]) -> dict[str, Any]:
    """What says the source is the one an interrupted run began to copy."""
    found: dict[str, Any] = {p.name: await p.count(stores) for p in all_parts if p.exact}
    found["generation"] = await stores.doc_status.generation()
    return found


class _Record:
    """The progress record in the target, saved after every page."""

    def __init__(self, store: KVStore, data: dict[str, Any]) -> None:
        self.store, self.data = store, data

    def step(self, name: str) -> dict[str, Any]:
        return self.data["steps"].setdefault(name, {"done": False, "copied": 0})

    async def save(self) -> None:
        await self.store.upsert({PROGRESS_KEY: self.data})
        await self.store.flush()


async def _empty(target: Stores, all_parts: list[_Part]) -> dict[str, int]:
    """The target's non-empty parts with their counts ({} when it holds nothing)."""
    counts = {p.name: await p.count(target) for p in all_parts}
    return {name: n for name, n in counts.items() if n}


async def _start(
    source: Stores, target: Stores, progress_store: KVStore, all_parts: list[_Part], force: bool
) -> tuple[_Record, bool]:
    """The progress record to copy under: a new one, or the interrupted run's."""
    now = await fingerprint(source, all_parts)
    found = await progress_store.get(PROGRESS_KEY)
    where = describe(target)
    if found is not None and not force:
        if found.get("finished"):
            raise MigrateError(
                f"the target ({where}) already holds a finished migration of {found.get('source')}. Fix: "
                "pass --force (RAG.migrate(force=True)) to empty the target and copy again, or choose another target workspace"
            )
        if found.get("format") != FORMAT or found.get("fingerprint") != now:
            raise MigrateError(
                f"an interrupted migration into the target ({where}) began from {found.get('source')}, "
                "which has changed since (or is another workspace), so the copy cannot be resumed. Fix: pass "
                "--force (RAG.migrate(force=True)) to empty the target and start over"
            )
        return _Record(progress_store, found), True
    if not force:
        held = await _empty(target, all_parts)
        if held:
            listed = ", ".join(f"{n} {name}" for name, n in held.items())
            raise MigrateError(
                f"the target ({where}) is not empty (it holds {listed}); migrate copies into an empty workspace. "
                "Fix: choose another target workspace (--to-workspace, or `workspace` in the target's settings), "
                "or pass --force (RAG.migrate(force=True)) to empty it first: what it holds is deleted"
            )
    else:
        for store in target.all():
            await store.drop()
        await progress_store.drop()
    record = _Record(progress_store, {"format": FORMAT, "source": describe(source), "fingerprint": now,
                                      "steps": {}, "finished": False})
    await record.save()
    return record, False


class _Sample:
    """A uniform sample of ``size`` keys over a scan (reservoir sampling), in
    memory bounded by ``size`` whatever the part's length."""

    def __init__(self, size: int, seed: int) -> None:
        self.size, self.seen, self.keys = size, 0, []
        self.rng = random.Random(seed)

    def offer(self, keys: list[Any]) -> None:
        for key in keys:
            self.seen += 1
            if len(self.keys) < self.size:
                self.keys.append(key)
            else:
                slot = self.rng.randrange(self.seen)
                if slot < self.size:
                    self.keys[slot] = key


async def _copy(
    part: _Part, source: Stores, target: Stores, record: _Record, batch: int, sample: _Sample,
    total: int, progress: Progress | None,
) -> int:
    """Copy one part page by page; returns the records written."""
    state = record.step(part.name)
    resumed_to, scanned, written = state["copied"], 0, 0
    async for page in part.pages(source, batch):
        todo = page
        if scanned < resumed_to:  # the interrupted run may have written these: write what the target lacks
            have = await part.read(target, [k for k, _ in page])
            todo = [(k, v) for (k, v), got in zip(page, have) if got is None or not part.same(v, got)]
        if todo:
            await part.write(target, todo)
            await part.store(target).flush()  # durable before the record says so
        scanned += len(page)
        written += len(todo)
        sample.offer([k for k, _ in page])
        state["copied"] = max(resumed_to, scanned)
        await record.save()
        if progress is not None:
            progress(part.name, scanned, total)
    state["done"] = True
    await record.save()
    return written


async def _verify(part: _Part, source: Stores, target: Stores, keys: list[Any]) -> tuple[list[str], int]:
    """Problems found (counts, sampled records), as sentences, and the records compared."""
    problems = []
    ns, nt = await part.count(source), await part.count(target)
    if ns != nt and (part.exact or nt > ns):
        problems.append(f"{part.name}: {ns} records in the source, {nt} in the target")
    if not keys:
        async for page in part.pages(source, 16):
            keys = [k for k, _ in page]
            break
    mine, theirs = await part.read(source, keys), await part.read(target, keys)
    for key, a, b in zip(keys, mine, theirs):
        if a is not None and (b is None or not part.same(a, b)):
            problems.append(f"{part.name}: {key!r} " + ("is missing from the target" if b is None else "differs"))
    return problems, len(keys)


async def migrate(
    source: Stores,
    target: Stores,
    progress_store: KVStore,
    *,
    force: bool = False,
    batch: int = 256,
    sample: int = 32,
    progress: Progress | None = None,
    seed: int | None = None,
) -> MigrateReport:
    """Copy ``source``'s workspace into ``target`` (both open; see the module
    docstring). ``progress_store`` is the target's KV store of
    ``PROGRESS_NAMESPACE``, open, with the target's fence."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise MigrateError(f"batch must be an int >= 1, got {batch!r}")
    started = time.perf_counter()
    check_compatible(source, target)
    all_parts = parts(source)
    async with source.writing("migrate (reading the source)"), target.writing("migrate (writing the target)"):
        record, resumed = await _start(source, target, progress_store, all_parts, force)
        records = {p.name: int(record.data["fingerprint"].get(p.name) or await p.count(source)) for p in all_parts}
        samples = {p.name: _Sample(sample, seed if seed is not None else random.randrange(1 << 30)) for p in all_parts}
        copied = {p.name: 0 for p in all_parts}
        for part in all_parts:
            if not record.step(part.name)["done"]:
                copied[part.name] = await _copy(
                    part, source, target, record, batch, samples[part.name], records[part.name], progress
                )
        problems: list[str] = []
        verified: dict[str, int] = {}
        for part in all_parts:
            found, verified[part.name] = await _verify(part, source, target, samples[part.name].keys)
            problems += found
        if problems:
            shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
            raise MigrateError(
                f"the copy does not verify: {shown}. Fix: run the migration again with --force "
                "(RAG.migrate(force=True)) to copy afresh; if it fails again, report it with this message"
            )
        record.data["finished"] = True
        await record.save()
    return MigrateReport(
        source=describe(source),
        target=describe(target),
        resumed=resumed,
        records=records,
        copied=copied,
        verified=verified,
        seconds=round(time.perf_counter() - started, 3),
    )


def summary(report: MigrateReport) -> str:
    """One line for people: what moved where."""
    r = report.records
    vectors = sum(n for name, n in r.items() if name.startswith("vector:"))
    resumed = " (resumed an interrupted run)" if report.resumed else ""
    return (
        f"migrated {r['doc_status']} documents, {r.get('kv:chunks', 0)} chunks, {r['graph:nodes']} entities, "
        f"{r['graph:edges']} relations, {vectors} vectors and {r.get('kv:llm_cache', 0)} cached LLM answers "
        f"from {report.source} to {report.target}{resumed} in {report.seconds:.1f}s; "
        f"counts and {sum(report.verified.values())} sampled records verified"
    )

