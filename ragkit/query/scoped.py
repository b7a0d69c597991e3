"""Scoped entity, relation and chunk search: ranked exactly as an index of only the
in-scope documents would rank, item by item and in order.

Why: entity and relation vectors embed descriptions merged from *all* their
sources. Ranked by them, a reader's results would depend on documents it may
not read, in two ways: an item whose stored vector embeds hidden text ranks
where that text puts it (it may never come back among the hits at all, while
its readable description would rank first), and ties (hashed or short texts
tie often) would fall by the index's internal order.

How, per query and index (``ScopedRanking.nearest``): the visible items are
split in two, each side ranked truthfully, then merged by the vector
protocol's order ([vector.query.ranking]: the score rounded to 6 decimals,
then the vector id, which comes from the key and so is the same in any index).

- Recomputed items, some of whose sources are out of scope: *all* of them,
  scored against their recomputed description embedded fresh (the text their
  vector would hold in the readable-only index; ``query/fresh.py`` keeps the
  vectors across queries). They are found from the extractions of the smaller
  side of the scope (``Restrictor.mentioned``): the in-scope chunks mention
  every visible item, the others every item with a source out of scope.
- Whole items, every source in scope: their stored vectors embed exactly what
  the readable-only index would hold, so the index ranks them truthfully and
  their ``top_k`` are its first ``top_k`` whole hits (``_walk``: deeper while
  unreadable or recomputed hits crowd the top). When the in-scope side was
  read, they are known; if few (see ``_direct``), they are scored from their
  stored vectors instead of walking past every unreadable item.

Chunks carry no merged text, so only the candidate set needs care: the
in-scope chunks by id (``ScopedRanking.chunks``), ranked by the same rules.

Self-computed scores use the built-in store's arithmetic (``store_scores``):
computed otherwise, a score can round across a 6-decimal boundary and split a
tie that the readable-only index keeps.

Cost: the extractions of the smaller side are read once per query (a cost of
the index's size, not of the number of documents: a principal's scope itself is
kept across queries, ``core/scope.py``), and the recomputed items' descriptions
rebuilt; each distinct description is embedded
once per process. Unscoped queries never come here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ragkit import ids
from ragkit.core.extraction import entity_text, relation_text
from ragkit.core.keys import Pair
from ragkit.core.scope import Mentioned, ScopedGraph
from ragkit.core.stores import Stores
from ragkit.protocols import Embedder, VectorStore
from ragkit.query.fresh import FreshVectors
from ragkit.query.items import EntityItem, RelationItem
from ragkit.schema import VectorHit

OVERSAMPLE = 4
"""A walk asks the index for this many times ``top_k`` hits, then this many
times as many again while it has found too few whole items."""

Key = str | Pair


@dataclass(frozen=True)
class VectorIndex:
    """An entity or relation vector index, as a search reads it."""

    name: str
    store: VectorStore
    key_of: Callable[[VectorHit], Any]
    vector_id: Callable[[Any], str]
    text_of: Callable[[dict], str]
    """The text its vectors embed."""
    item: type[EntityItem] | type[RelationItem]
    read: Callable[[Any, list], Awaitable[list[dict | None]]]
    """(graph, keys) -> their properties."""


def entity_index(stores: Stores) -> VectorIndex:
    return VectorIndex("entities", stores.entity_vectors, lambda h: str(h.metadata.get("key", "")),
                       ids.entity_id, entity_text, EntityItem, lambda graph, keys: graph.get_nodes(keys))


def relation_index(stores: Stores) -> VectorIndex:
    return VectorIndex("relations", stores.relation_vectors,
                       lambda h: (str(h.metadata.get("source", "")), str(h.metadata.get("target", ""))),
                       lambda pair: ids.relation_id(*pair), relation_text, RelationItem,
                       lambda graph, pairs: graph.get_edges(pairs))


class Scored(NamedTuple):
    key: Key
    props: dict
    score: float
    vector_id: str

    def rank(self) -> tuple[float, str]:
        """The vector protocol's order (``rank_hits``)."""
        return -round(self.score, 6), self.vector_id


class ScopedRanking:
    """The ranked searches of one scoped query (it keeps what it read for the query's life)."""

    def __init__(self, view: ScopedGraph, embedder: Embedder) -> None:
        self.view = view
        self.embedder = embedder
        self._mentioned: Mentioned | None = None
        self._pools: dict[str, _Pool] = {}

    async def nearest(self, index: VectorIndex, query: np.ndarray, top_k: int) -> list[Scored]:
        """The ``top_k`` visible items nearest ``query``, as the readable-only index ranks them."""
        pool = await self._pool(index)
        found = pool.scored(query)
        if pool.whole is not None and await self._direct(index, pool, top_k):
            if pool.stored is None:  # read once per query: ppr searches once per keyword
                pool.stored = await self._stored(index, pool.whole)
            found += pool.stored.scored(query)
        else:
            found += await self._walk(index, query, top_k, pool)
        found.sort(key=Scored.rank)
        return found[:top_k]

    async def chunks(self, store: VectorStore, query: np.ndarray, top_k: int) -> list[tuple[str, float]]:
        """The ``top_k`` in-scope chunks nearest ``query`` as (id, score), as
        the readable-only index ranks them: scored from their vectors when
        few, else the index's first ``top_k`` in-scope hits. Why not a
        ``doc_id`` filter: the built-in store compares each row with each
        readable document id, which cost more than the rest of a scoped query."""
        inside = self.view.chunk_ids
        if few(len(inside), top_k, await store.count()):
            ids_ = sorted(inside)
            kept = [(i, rec.vector) for i, rec in zip(ids_, await store.get(ids_)) if rec is not None]
            if not kept:
                return []
            scores = store_scores(np.stack([np.asarray(v, dtype=np.float32) for _, v in kept]), query)
            return sorted(zip([i for i, _ in kept], scores), key=lambda hit: (-round(hit[1], 6), hit[0]))[:top_k]
        asked = top_k * OVERSAMPLE
        while True:
            hits = await store.query(query, asked)
            found = [(h.id, h.score) for h in hits if h.id in inside]
            if len(found) >= top_k or len(hits) < asked:
                return found[:top_k]
            asked *= OVERSAMPLE

    async def fresh(self, texts: list[str]) -> list[np.ndarray]:
        """Each text embedded (kept across queries)."""
        return await FreshVectors.of(self.embedder).vectors(texts)

    @staticmethod
    async def _direct(index: VectorIndex, pool: _Pool, top_k: int) -> bool:
        """Score the known whole items from their vectors rather than walk?"""
        assert pool.whole is not None
        return pool.stored is not None or few(len(pool.whole), top_k, await index.store.count())

    async def _walk(self, index: VectorIndex, query: np.ndarray, top_k: int, pool: _Pool) -> list[Scored]:
        """The first ``top_k`` whole visible items among the index's hits, in
        its order and with its scores: asked for ``OVERSAMPLE`` times
        ``top_k``, then as many times more, until that many are found (or as
        many as the pool knows exist) or the index has no more. A hit the view
        recomputes that the pool does not hold (its sources changed since the
        pool was made) is scored fresh, never by its stored vector."""
        asked, wanted = top_k * OVERSAMPLE, min(top_k, len(pool.whole) if pool.whole is not None else top_k)
        while True:
            hits = await index.store.query(query, asked)
            read = [(index.key_of(h), h) for h in hits]
            read = [(k, h) for k, h in read if pool.unsettled(k)]
            props = await index.read(self.view, [k for k, _ in read])
            visible = [(k, p, h) for (k, h), p in zip(read, props) if p is not None]
            whole = [Scored(k, p, h.score, h.id) for k, p, h in visible if k not in self.view.recomputed]
            if len(whole) >= wanted or len(hits) < asked:
                late = [(k, p) for k, p, _ in visible if k in self.view.recomputed]
                return whole[:top_k] + (await self._fresh_pool(index, late)).scored(query)
            asked *= OVERSAMPLE

    async def _pool(self, index: VectorIndex) -> _Pool:
        if index.name not in self._pools:
            self._pools[index.name] = await self._make_pool(index)
        return self._pools[index.name]

    async def _make_pool(self, index: VectorIndex) -> _Pool:
        """The items of ``index`` that one side of the scope mentions, read
        through the view: the recomputed ones with their text embedded fresh,
        and, when that side is the scope's own, the whole ones."""
        if self._mentioned is None:
            self._mentioned = await self.view.restrictor.mentioned()
        mentioned = self._mentioned
        keys = sorted(mentioned.entities if index.name == "entities" else mentioned.relations)
        read = [(k, p) for k, p in zip(keys, await index.read(self.view, keys)) if p is not None]
        pool = await self._fresh_pool(index, [(k, p) for k, p in read if k in self.view.recomputed])
        # Invisible ones are settled too, but not the whole ones: on the other
        # side, the walk must still find them (mentioned by an out-of-scope
        # chunk whose document is not in the graph yet).
        pool.settled = set(keys) - {k for k, _ in read if k not in self.view.recomputed}
        if mentioned.inside:
            pool.whole = [(k, p) for k, p in read if k not in self.view.recomputed]
        return pool

    async def _fresh_pool(self, index: VectorIndex, items: list[tuple[Key, dict]]) -> _Pool:
        """Recomputed items with their recomputed text embedded fresh."""
        vectors = await self.fresh([index.text_of(p) for _, p in items])
        return _Pool([(k, p, index.vector_id(k)) for k, p in items], vectors)

    @staticmethod
    async def _stored(index: VectorIndex, items: list[tuple[Key, dict]]) -> _Pool:
        """Items with their stored vectors (those without one left out: no search finds them)."""
        ids_ = [index.vector_id(k) for k, _ in items]
        records = await index.store.get(ids_)
        kept = [(k, p, i, rec.vector) for (k, p), i, rec in zip(items, ids_, records) if rec is not None]
        return _Pool([(k, p, i) for k, p, i, _ in kept], [v for *_, v in kept])


class _Pool:
    """Items a scoped search scores itself, with their vectors."""

    def __init__(self, items: list[tuple[Key, dict, str]], vectors: list) -> None:
        self.items = items
        self._matrix = np.stack([np.asarray(v, dtype=np.float32) for v in vectors]) if vectors else None
        self.settled: set[Key] = {k for k, _, _ in items}
        """Keys a walk skips: the pool's own, and those it found invisible."""
        self.whole: list[tuple[Key, dict]] | None = None
        """Every visible item not recomputed, when the scope's own side was read; None: not known."""
        self.stored: _Pool | None = None
        """The whole items with their stored vectors, once read."""
        self._whole_keys: set[Key] | None = None

    def unsettled(self, key: Key) -> bool:
        """Whether a walk must read a hit with this key: a known whole item,
        or, when those are not known, any the pool did not settle."""
        if self.whole is None:
            return key not in self.settled
        if self._whole_keys is None:
            self._whole_keys = {k for k, _ in self.whole}
        return key in self._whole_keys

    def scored(self, query: np.ndarray) -> list[Scored]:
        if self._matrix is None:
            return []
        scores = store_scores(self._matrix, query)
        return [Scored(k, p, s, i) for (k, p, i), s in zip(self.items, scores)]


def few(items: int, top_k: int, total: int) -> bool:
    """Score these of ``total`` indexed items from their vectors rather than
    walk the index past the others? Their vectors are read once per query; a
    walk reads about ``top_k`` times ``total / items`` hits per search, and
    ``OVERSAMPLE`` squared times that when the query leans to the others."""
    return items**2 <= OVERSAMPLE**2 * top_k * total


def store_scores(rows: np.ndarray, query: np.ndarray) -> list[float]:
    """Cosines of float32 ``rows`` to ``query`` in the built-in store's
    arithmetic (``storage/numpy_vectors.py``): the float32 product with the
    query's unit vector, times each row's float32 inverse norm, clipped."""
    q64 = np.asarray(query, dtype=np.float64)
    unit = (q64 / np.linalg.norm(q64)).astype(np.float32)
    r64 = rows.astype(np.float64)
    inverse = (1.0 / np.sqrt(np.einsum("ij,ij->i", r64, r64))).astype(np.float32)
    return np.clip((rows @ unit) * inverse, -1.0, 1.0).tolist()
