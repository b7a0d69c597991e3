"""Bring entities and relations up to date after chunks were added or removed.

For every touched entity or relation: its sources are the stored ones, plus
chunks added, minus chunks removed. No source left: the node or edge and its
vector are deleted. Otherwise it is recomputed from the stored extractions of
its sources (``merge``), and written with its vector only if it changed.

A source chunk's extraction is read once per update, a page at a time, and only
its rows about touched entities and relations are kept, indexed by key: looking
a key up then costs its own fragments, not a scan of every row of every source
(which made a large update quadratic), and memory holds the touched keys'
fragments, not whole extractions.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from ragkit import ids
from ragkit.core.extraction import ChunkExtraction, Fragment, entity_text, relation_text
from ragkit.core.keys import Pair, entity_key, relation_key
from ragkit.core.heap import release
from ragkit.core.pacing import Pacer
from ragkit.core.stores import Stores
from ragkit.core.alias_index import AliasIndex
from ragkit.pipeline.merge import Draft, Merger
from ragkit.protocols import Embedder
from ragkit.schema import Entity, Relation

K = TypeVar("K", bound=Hashable)

PAGE = 8
"""Extractions read per store call: decoding a page (a large chunk's
extraction is tens of kilobytes of JSON) is one slice of the loop's time."""
KEYS_PAGE = 1024
"""Nodes or edges read or written per store call: one call's work is one
slice of the loop's time, not the whole update's."""


@dataclass
class Changes:
    """What a batch of inserted or deleted chunks touches."""

    added: dict[str, set[str]] = field(default_factory=dict)
    """entity key -> chunk ids that now mention it"""
    added_rel: dict[Pair, set[str]] = field(default_factory=dict)
    removed_chunks: set[str] = field(default_factory=set)
    entities: set[str] = field(default_factory=set)
    relations: set[Pair] = field(default_factory=set)

    def add_extraction(self, ex: ChunkExtraction) -> None:
        for ent in ex.entities:
            key = entity_key(ent.name)
            self.added.setdefault(key, set()).add(ex.chunk_id)
            self.entities.add(key)
        for rel in ex.relations:
            pair = relation_key(rel.source, rel.target)
            self.added_rel.setdefault(pair, set()).add(ex.chunk_id)
            self.relations.add(pair)

    def remove_extraction(self, ex: ChunkExtraction) -> None:
        self.removed_chunks.add(ex.chunk_id)
        self.entities.update(entity_key(e.name) for e in ex.entities)
        self.relations.update(relation_key(r.source, r.target) for r in ex.relations)


class GraphUpdater:
    def __init__(self, stores: Stores, merger: Merger, embedder: Embedder, concurrency: int = 16,
                 aliases: AliasIndex | None = None) -> None:
        self.stores = stores
        self.merger = merger
        self.embedder = embedder
        self.aliases = aliases
        """Entity resolution's links, kept up to date with the entities (``None``: off)."""
        self.concurrency = concurrency
        """Summary calls in flight at once."""
        self._entities: dict[str, dict[str, list[Entity]]] = {}
        """chunk id -> touched entity key -> its rows in that chunk"""
        self._relations: dict[str, dict[Pair, list[Relation]]] = {}
        self._changes = Changes()
        self._keys: dict[str, str] = {}
        self._rows: dict[str, Entity | Relation] = {}
        self._summarise = True
        self._pace = Pacer()

    @property
    def entity_fragments(self) -> Mapping[str, Mapping[str, list[Entity]]]:
        """What the last ``apply`` read, per source chunk: chunk id -> entity
        key -> its rows there (read-only; tests check rows are held once)."""
        return self._entities

    @property
    def relation_fragments(self) -> Mapping[str, Mapping[Pair, list[Relation]]]:
        """The same for relations: chunk id -> pair -> its rows there."""
        return self._relations

    async def apply(self, changes: Changes, *, summarise: bool = True) -> tuple[int, int]:
        """Returns (entities written or deleted, relations written or deleted).
        ``summarise=False`` stores joined description lines (a deferred summary).

        The CPU work (indexing rows, merging, encoding) runs in slices
        (``ragkit.core.pacing``): a large update shares the loop with readers."""
        self._pace = Pacer()
        # The previous update's rows are dropped here: freed in slices (a large
        # batch's are hundreds of thousands of objects, ``heap.release``).
        previous = (self._entities, self._relations, self._rows, self._keys)
        self._entities, self._relations, self._changes, self._keys, self._rows = {}, {}, changes, {}, {}
        await release(*previous, pace=self._pace)
        self._summarise = summarise
        # Relations first: deleting a node also deletes its edges, which would
        # hide them from the relation pass and leave their vectors behind.
        rels = await self._update_relations(changes)
        ents = await self._update_entities(changes)
        return ents, rels

    async def _load(self, chunk_ids: Iterable[str]) -> None:
        """Index the touched keys' rows of these chunks' extractions (once each)."""
        wanted = [c for c in dict.fromkeys(chunk_ids) if c not in self._entities]
        for i in range(0, len(wanted), PAGE):
            page = wanted[i : i + PAGE]
            for cid, rec in zip(page, await self.stores.extractions.get_many(page)):
                await self._pace()
                ents: dict[str, list[Entity]] = {}
                rels: dict[Pair, list[Relation]] = {}
                # Rows are validated one by one, and only the kept ones: a large
                # update reads many extractions for few of their rows.
                for row in rec.get("entities", ()) if rec is not None else ():
                    key = self._key(row["name"])
                    if key in self._changes.entities:
                        ents.setdefault(key, []).append(self._row(Entity, row))
                for row in rec.get("relations", ()) if rec is not None else ():
                    a, b = self._key(row["source"]), self._key(row["target"])
                    pair = (a, b) if a <= b else (b, a)
                    if pair in self._changes.relations:
                        rels.setdefault(pair, []).append(self._row(Relation, row))
                self._entities[cid], self._relations[cid] = ents, rels

    def _row(self, model: type[Entity] | type[Relation], row: dict) -> Entity | Relation:
        """The validated row, one shared (frozen) object per distinct row in
        this update. Why: a text whose passages recur (a long report quoting
        itself, a repeated corpus) gives the same row in many chunks, and each
        window holds the rows of every source of what it touches; shared, the
        working set grows with the distinct rows, not with how often they recur.
        A stored row's ``source_ids`` (its own chunk) is left out: the merge
        takes a fragment's chunk from ``Fragment.chunk_id``, never from the row."""
        fields = {k: v for k, v in row.items() if k != "source_ids"}
        text = model.__name__ + json.dumps(fields, sort_keys=True, ensure_ascii=False)
        found = self._rows.get(text)
        if found is None:
            found = self._rows[text] = model.model_validate(fields)
        return found

    def _key(self, name: str) -> str:
        """``entity_key``, remembered for this update (names repeat across chunks)."""
        key = self._keys.get(name)
        if key is None:
            key = self._keys[name] = entity_key(name)
        return key

    async def _current(self, read: Callable[[list[K]], Awaitable[list[dict | None]]], keys: list[K]) -> list[dict | None]:
        """The stored properties of ``keys``, read a page at a time (copying a
        large update's properties out of the store is work too)."""
        out: list[dict | None] = []
        for i in range(0, len(keys), KEYS_PAGE):
            out += await read(keys[i : i + KEYS_PAGE])
            await self._pace()
        return out

    async def _drafts(self, keys: list[K], current: list[dict | None], added: Mapping[K, set[str]],
                      draft: Callable[[K, list[Fragment]], Draft], rows: Callable[[str], Mapping[K, list]]) -> list:
        """(key, stored properties, new properties or ``None``: no source left)
        per key. The merges run one after another in slices; only the summary
        calls run concurrently (``concurrency``)."""
        sources: list[set[str]] = []
        wanted: set[str] = set()
        for key, props in zip(keys, current):  # hub entities have thousands of sources
            sources.append(_sources(props, added.get(key, set()), self._changes.removed_chunks))
            wanted |= sources[-1]
            await self._pace()
        await self._load(sorted(wanted))
        drafts: list[Draft | None] = []
        for key, found in zip(keys, sources):
            await self._pace()
            frags = [Fragment(c, r) for c in sorted(found) for r in rows(c).get(key, ())]
            drafts.append(draft(key, frags) if frags else None)
        # Tasks for the summaries only: a task per key would be a task step per
        # key in one turn of the loop, which is the long stretch again.
        todo = [i for i, d in enumerate(drafts) if d is not None and d.lines is not None]
        summarised = dict(zip(todo, await _bounded([self.merger.finish(drafts[i]) for i in todo], self.concurrency)))
        done = [summarised.get(i, d.props if d is not None else None) for i, d in enumerate(drafts)]
        await release(drafts, sources, pace=self._pace)
        return list(zip(keys, current, done))

    async def _update_entities(self, changes: Changes) -> int:
        keys = sorted(changes.entities)
        current = await self._current(self.stores.graph.get_nodes, keys)
        results = await self._drafts(
            keys, current, changes.added,
            lambda k, f: self.merger.entity_draft(k, f, summarise=self._summarise),
            lambda c: self._entities[c],
        )
        gone = [k for k, old, new in results if new is None and old is not None]
        changed = [(k, new) for k, old, new in results if new is not None and new != old]
        # Vectors before their elements: an update cut short (a kill, a model
        # error, a full disk) leaves an element at its old state, which the
        # next recompute sees as changed and writes again with its vector. The
        # other order left an element at its new state with no (or a stale)
        # vector, which no recompute rewrites (new == old). And the vector of
        # every key that no longer exists goes, the element there or not: a
        # write cut short may have left the vector of an element never written.
        vanished = [k for k, _, new in results if new is None]
        if self.aliases is not None:  # before the elements too, and idempotent: a cut-short update redoes it
            await self.aliases.update([k for k, _ in changed], vanished)
        await self.stores.entity_vectors.delete([ids.entity_id(k) for k in vanished])
        await self.stores.graph.delete_nodes(gone)
        for i in range(0, len(changed), KEYS_PAGE):
            page = changed[i : i + KEYS_PAGE]
            await write_entity_vectors(self.stores, self.embedder, page, self._pace)
            await self.stores.graph.upsert_nodes(dict(page))
        written = len(gone) + len(changed)
        await release(results, changed, current, pace=self._pace)
        return written

    async def _update_relations(self, changes: Changes) -> int:
        pairs = sorted(changes.relations)
        current = await self._current(self.stores.graph.get_edges, pairs)
        results = await self._drafts(
            pairs, current, changes.added_rel,
            lambda k, f: self.merger.relation_draft(k, f, summarise=self._summarise),
            lambda c: self._relations[c],
        )
        gone = [k for k, old, new in results if new is None and old is not None]
        changed = [(k, new) for k, old, new in results if new is not None and new != old]
        vanished = [k for k, _, new in results if new is None]  # vectors first, and all of them, as above
        await self.stores.relation_vectors.delete([ids.relation_id(*k) for k in vanished])
        await self.stores.graph.delete_edges(gone)
        for i in range(0, len(changed), KEYS_PAGE):
            page = changed[i : i + KEYS_PAGE]
            await write_relation_vectors(self.stores, self.embedder, page, self._pace)
            await self.stores.graph.upsert_edges([(a, b, p) for (a, b), p in page])
        written = len(gone) + len(changed)
        await release(results, changed, current, pace=self._pace)
        return written


async def write_entity_vectors(stores: Stores, embedder: Embedder, items: list[tuple[str, dict]],
                              pace: Pacer | None = None) -> None:
    """Embed "name + description" of each (node key, properties)."""
    vectors = await embed_all(embedder, [entity_text(p) for _, p in items], pace)
    await stores.entity_vectors.upsert(
        [ids.entity_id(k) for k, _ in items], vectors, [{"key": k, "name": p["name"]} for k, p in items]
    )


async def write_relation_vectors(stores: Stores, embedder: Embedder, items: list[tuple[Pair, dict]],
                                pace: Pacer | None = None) -> None:
    """Embed keywords, endpoints and description of each (edge key, properties)."""
    texts = [relation_text(p) for _, p in items]
    vectors = await embed_all(embedder, texts, pace)
    await stores.relation_vectors.upsert(
        [ids.relation_id(*k) for k, _ in items], vectors, [{"source": a, "target": b} for (a, b), _ in items]
    )


def _sources(props: Mapping | None, added: set[str], removed: set[str]) -> set[str]:
    stored = set(props.get("source_ids", [])) if props else set()
    return (stored | added) - removed


async def embed_all(embedder: Embedder, texts: list[str], pace: Pacer | None = None) -> np.ndarray:
    """Embed in batches of the embedder's maximum size; ``pace`` between two
    (an embedder that computes on the loop, such as a test double, would hold
    it for the whole list)."""
    if not texts:
        return np.zeros((0, embedder.dimension), dtype=np.float32)
    pace = pace or Pacer()
    step = max(1, embedder.max_batch_size)
    parts = []
    for i in range(0, len(texts), step):
        parts.append(await embedder.embed(texts[i : i + step]))
        await pace()
    return np.concatenate(parts).astype(np.float32, copy=False)


async def _bounded(coros: list, limit: int) -> list:
    semaphore = asyncio.Semaphore(limit)

    async def run(coro):
        async with semaphore:
            return await coro

    return await asyncio.gather(*(run(c) for c in coros))
