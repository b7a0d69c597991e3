"""Search stage: keywords in, ranked entities, relations and chunks out.

- local: low-level keywords -> entity vectors -> nodes -> their edges;
- global: high-level keywords -> relation vectors -> edges -> their endpoints;
- naive: the question -> chunk vectors;
- ppr: each low-level keyword -> its nearest entities as seeds (relation
  endpoints for the high-level ones when there are none), plus the endpoints
  of the relations nearest the question -> personalized PageRank on the
  graph around them -> entities, relations, chunks by score.

Graph neighbourhoods are ranked by degree, then weight. Vector hits keep their
own index's similarity; graph-found items have no score. Graph reads go
through the query's ``CachedGraph`` (``query/graph_cache.py``): local and
global read the graph around their hits in one call.

Scoped (``doc_ids``, ``doc_filter``, a principal): every graph read goes
through the scope's ``ScopedGraph``, so items, descriptions, degrees and walks
count in-scope sources only, and entity and relation searches rank exactly as
an index of only the in-scope documents would (``query/scoped.py``). See
docs/architecture.md, "Document access control".
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragkit import ids
from ragkit.core.extraction import entity_text
from ragkit.core.scope import Restrictor, Scope, ScopedGraph
from ragkit.core.stores import Stores
from ragkit.core.alias_index import AliasIndex
from ragkit.protocols import Embedder
from ragkit.query import ppr
from ragkit.query.graph_cache import CachedGraph
from ragkit.query.items import ChunkItem, EntityItem, RelationItem
from ragkit.query.scoped import ScopedRanking, VectorIndex, entity_index, relation_index


async def chunk_items(stores: Stores, ranked: list[tuple[str, Any]], stage: str, field: str) -> list[ChunkItem]:
    """Ranked (chunk id, value) pairs as items, ``value`` set as ``field``; gone chunks skipped."""
    records = await stores.chunks.get_many([cid for cid, _ in ranked])
    return [ChunkItem.from_record(cid, rec, stage, **{field: value})
            for (cid, value), rec in zip(ranked, records) if rec is not None]


def keyword_text(keywords: list[str]) -> str:
    """The text embedded to search with a list of keywords."""
    return ", ".join(keywords)


@dataclass
class Searcher:
    stores: Stores
    embedder: Embedder
    scope: Scope | None = None
    restrictor: Restrictor | None = None
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    degree: dict[str, int] = field(default_factory=dict)
    """Node degrees read so far by this query (``degrees``)."""
    view: ScopedGraph | None = field(default=None, init=False)
    ranking: ScopedRanking | None = field(default=None, init=False)
    cache: CachedGraph = field(init=False)
    """The graph's raw reads, kept for the query (under ``view`` when scoped)."""

    def __post_init__(self) -> None:
        self.cache = CachedGraph(self.stores.graph)
        if self.scope is not None:
            self.view = ScopedGraph(self.cache, self.restrictor or Restrictor(self.stores, self.scope))
            self.ranking = ScopedRanking(self.view, self.embedder)

    @property
    def graph(self):
        """The graph as this query may see it: a mode reading the graph itself
        reads it here, never through ``stores.graph``, to stay scoped."""
        return self.view if self.view is not None else self.cache

    async def together(self, *searches: Coroutine[Any, Any, Any]) -> list[Any]:
        """The results of independent searches, in order. Unscoped, they run
        at once: on server stores each is a chain of round trips, and a
        mode's chains (local's, global's, the dense floor's) wait on the
        network side by side instead of one after the other. Scoped, one
        after the other: the scope's view caches what it reads, and chains
        run at once would read the same nodes twice."""
        if self.view is not None:
            try:
                return [await s for s in searches]
            finally:  # the searches a failure left unstarted (a no-op for the others)
                for s in searches:
                    s.close()
        tasks: list[asyncio.Task] = []
        try:
            async with asyncio.TaskGroup() as group:  # one failing cancels the others
                tasks = [group.create_task(s) for s in searches]
        except BaseExceptionGroup as failed:
            # The first failed search's own error, as the searches one after the
            # other would raise it: the CLI and the server map ragkit's error
            # types to messages and exit codes, and a group matches none.
            errors = [t.exception() for t in tasks if not t.cancelled()]
            raise next((e for e in errors if e is not None), failed.exceptions[0]) from None
        return [t.result() for t in tasks]

    async def embed_all(self, texts: Iterable[str]) -> None:
        """Embed every text the query will search with in one call: a model's
        fixed cost per call (a forward pass, an HTTP round trip) is then paid
        once per query, not once per index searched."""
        todo = list(dict.fromkeys(t for t in texts if t and t not in self.vectors))
        if todo:
            for text, vector in zip(todo, await self.embedder.embed(todo), strict=True):
                self.vectors[text] = np.asarray(vector, dtype=np.float32)

    async def embed(self, text: str) -> np.ndarray:
        await self.embed_all([text])
        return self.vectors[text]

    async def local(self, keywords: list[str], top_k: int) -> tuple[list[EntityItem], list[RelationItem]]:
        if not keywords:
            return [], []
        entities = await self._nearest_entities(await self.embed(keyword_text(keywords)), top_k, "entity_vectors",
                                                incident=True)
        keys = [e.key for e in entities]
        relations = await self._edges_of(keys)  # reads the entities' degrees with their neighbours'
        for entity, degree in zip(entities, await self.degrees(keys)):
            entity.degree = degree
        return entities, relations

    async def global_(self, keywords: list[str], top_k: int) -> tuple[list[EntityItem], list[RelationItem]]:
        if not keywords:
            return [], []
        relations = await self._nearest_relations(await self.embed(keyword_text(keywords)), top_k, "relation_vectors")
        for relation, degree in zip(relations, await self.edge_degrees([r.key for r in relations])):
            relation.degree = degree
        return await self._endpoints(relations), relations

    async def chunks(self, question: str, top_k: int) -> list[ChunkItem]:
        query = await self.embed(question)
        if self.ranking is not None:
            hits = await self.ranking.chunks(self.stores.chunk_vectors, query, top_k)
        else:
            hits = [(h.id, h.score) for h in await self.stores.chunk_vectors.query(query, top_k)]
        records = await self.stores.chunks.get_many([cid for cid, _ in hits])
        return [
            ChunkItem.from_record(cid, rec, "chunk_vectors", score=score)
            for (cid, score), rec in zip(hits, records)
            if rec is not None
        ]

    async def lexical_chunks(self, question: str, top_k: int) -> list[ChunkItem]:
        """The chunks whose words best match the question's, with their BM25
        score. Scoped, only in-scope chunks count, and they are weighed among
        themselves (``KVStore.search_text(within=...)``): the order is the one
        an index of the readable documents alone would give."""
        if self.scope is None:
            hits = await self.stores.chunks.search_text(question, top_k)
        else:
            hits = await self.stores.chunks.search_text(
                question, top_k, within=self.scope.holds, population=len(self.scope.chunk_ids))
        return await chunk_items(self.stores, hits, "chunk_text", "score")

    async def ppr(self, low: list[str], high: list[str], top_k: int, question: str = ""
                  ) -> tuple[list[EntityItem], list[RelationItem], list[tuple[str, float]]]:
        """Entities and relations by PageRank score (top_k each) and every chunk
        they support, by summed score."""
        hits: list[tuple[str, float]] = []
        # Each low-level keyword links to its own nearest entities (HippoRAG's
        # query-entity linking); the high-level ones only stand in for none.
        await self.embed_all([*low, keyword_text(high), question] if high else [*low, question])
        for seeds in await self.together(*(self._seeds(self.vectors[k]) for k in low)):
            hits += seeds
        if high and not hits:
            hits += await self._seed_ends(self.vectors[keyword_text(high)], top_k)
        if question and ppr.TRIPLE_SEEDS:  # query-to-triple linking: the relations the question states
            hits += await self._seed_ends(self.vectors[question], ppr.TRIPLE_SEEDS)
        seed_props = await self.graph.get_nodes([k for k, _ in hits])
        hits, seed_props = [h for h, p in zip(hits, seed_props) if p], [p for p in seed_props if p]
        relevance = await self._relevance(hits, seed_props, question)
        seeds = ppr.seed_weights([(k, s, len(p.get("source_ids", [])), r)
                                  for (k, s), p, r in zip(hits, seed_props, relevance)])
        if not seeds:
            return [], [], []
        synonyms: set[tuple[str, str]] = set()

        async def links(keys: Sequence[str]) -> dict[str, list[str]]:
            found = await self.aliases(keys)
            synonyms.update(tuple(sorted((k, o))) for k, others in found.items() for o in others)
            return found

        nodes, edges = await ppr.neighbourhood(self.graph, list(seeds), links=links)
        scores = ppr.personalized_pagerank(nodes, edges, seeds)
        ranked = sorted(scores, key=lambda k: (-ppr.tie(scores[k]), k))[: top_k * ppr.SCORED_PER_KEPT]
        props = dict(zip(ranked, await self.graph.get_nodes(ranked)))
        entities = [EntityItem(props[k], "ppr", scores[k], key=k) for k in ranked if props[k] is not None]
        chunks = ppr.chunk_scores(scores, {e.key: e.sources for e in entities})
        entities = entities[:top_k]
        degree = dict(zip([e.key for e in entities], await self.graph.degrees([e.key for e in entities])))
        for entity in entities:
            entity.degree = degree[entity.key]
        # An alias link is an edge of the walk, not a relation: it takes no relation's place.
        between = [p for p in edges if p[0] in degree and p[1] in degree]
        links_only = await self._links_only([p for p in between if p in synonyms])
        pairs = sorted((p for p in between if p not in links_only),
                       key=lambda p: (-ppr.tie(scores[p[0]] + scores[p[1]]), p))[:top_k]
        relations = [
            RelationItem(edge, "ppr", scores[p[0]] + scores[p[1]], degree[p[0]] + degree[p[1]], key=p)
            for p, edge in zip(pairs, await self.graph.get_edges(pairs))
            if edge is not None
        ]
        return entities, relations, chunks

    async def _links_only(self, pairs: list[tuple[str, str]]) -> set[tuple[str, str]]:
        """The alias links among ``pairs`` that are no relation too."""
        return {p for p, edge in zip(pairs, await self.graph.get_edges(pairs)) if edge is None}

    async def aliases(self, keys: Sequence[str]) -> dict[str, list[str]]:
        """The entities each of ``keys`` is linked to as an alias
        (``core/alias_index.py``), those this query may see only: a link is
        drawn from the two names alone, so it tells a user who may see both
        nothing a document they may not read says."""
        found = await AliasIndex(self.stores.aliases, self.stores.alias_splits).links_of(keys)
        partners = sorted({o for others in found.values() for o in others})
        if self.view is not None and partners:
            seen = {o for o, p in zip(partners, await self.graph.get_nodes(partners)) if p is not None}
            found = {k: {o: why for o, why in others.items() if o in seen} for k, others in found.items()}
        return {k: sorted(others) for k, others in found.items()}

    async def _relevance(self, hits: list[tuple[str, float]], props: list[dict], question: str) -> list[float]:
        """Each linked entity's cosine to the question, from its stored vector
        (1 for all without a question; a seed's own link score where its
        vector is missing). Scoped, an entity whose description the scope
        recomputed is embedded afresh: its stored vector embeds text from
        documents out of scope."""
        if not question or not hits:
            return [1.0] * len(hits)
        q = self.vectors[question]
        records = await self.stores.entity_vectors.get([ids.entity_id(key) for key, _ in hits])
        vectors = [rec.vector if rec is not None else None for rec in records]
        if self.ranking is not None:
            recomputed = self.ranking.view.recomputed
            fresh = {i: entity_text(p) for i, ((key, _), p) in enumerate(zip(hits, props)) if key in recomputed}
            vectors = [*vectors]
            for i, vector in zip(fresh, await self.ranking.fresh(list(fresh.values()))):
                vectors[i] = vector
        # To the protocol's score precision: backends store vectors at different precisions.
        return [round(_cosine(v, q), 6) if v is not None else score for (_, score), v in zip(hits, vectors)]

    async def _seeds(self, query: np.ndarray) -> list[tuple[str, float]]:
        if self.view is None:  # unscoped: the hits as they are (missing nodes are dropped with the seeds)
            found = await self.stores.entity_vectors.query(query, ppr.SEEDS_PER_KEYWORD)
            return [(str(h.metadata.get("key", "")), h.score) for h in found]
        return [(e.key, float(e.score or 0.0))
                for e in await self._nearest_entities(query, ppr.SEEDS_PER_KEYWORD, "ppr")]

    async def _seed_ends(self, query: np.ndarray, top_k: int) -> list[tuple[str, float]]:
        if self.view is None:
            found = await self.stores.relation_vectors.query(query, top_k)
            return [(str(h.metadata.get(end, "")), h.score) for h in found for end in ("source", "target")]
        return [(end, float(r.score or 0.0))
                for r in await self._nearest_relations(query, top_k, "ppr") for end in r.key]

    # -- graph neighbourhoods --------------------------------------------------

    async def degrees(self, keys: list[str]) -> list[int]:
        """Node degrees, each read from the graph once per query: a mode's
        stages ask again for nodes they have seen (an entity, then the
        endpoints of its relations), and on a graph server each read is a
        round trip."""
        todo = list(dict.fromkeys(k for k in keys if k not in self.degree))
        if todo:
            self.degree.update(zip(todo, await self.graph.degrees(todo)))
        return [self.degree[k] for k in keys]

    async def edge_degrees(self, pairs: list[tuple[str, str]]) -> list[int]:
        """deg(a) + deg(b) per edge (``GraphStore.edge_degrees``), through ``degrees``."""
        ends = list(dict.fromkeys(k for p in pairs for k in p))
        degree = dict(zip(ends, await self.degrees(ends)))
        return [degree[a] + degree[b] for a, b in pairs]

    async def _edges_of(self, keys: list[str]) -> list[RelationItem]:
        """Every edge of the found nodes, most connected first, then heaviest."""
        pairs = list(dict.fromkeys(p for edges in await self.graph.nodes_edges(keys) if edges for p in edges))
        edges = await self.graph.get_edges(pairs)
        await self.degrees([*keys, *(k for p in pairs for k in p)])  # one read for the nodes and all ends
        degrees = await self.edge_degrees(pairs)
        relations = [
            RelationItem(props, "entity_edges", None, degree, key=pair)
            for pair, props, degree in zip(pairs, edges, degrees)
            if props is not None
        ]
        relations.sort(key=lambda r: (-r.degree, -float(r.props.get("weight", 0.0)), r.key))
        return relations

    async def _endpoints(self, relations: list[RelationItem]) -> list[EntityItem]:
        """Endpoints in the order their relations were found."""
        keys = list(dict.fromkeys(k for r in relations for k in r.key))
        nodes = await self.graph.get_nodes(keys)
        degrees = await self.degrees(keys)
        return [
            EntityItem(props, "relation_endpoints", None, degree, key=key)
            for key, props, degree in zip(keys, nodes, degrees)
            if props is not None
        ]

    # -- vector searches -----------------------------------------------------------

    async def _nearest_entities(self, query: np.ndarray, top_k: int, stage: str,
                                incident: bool = False) -> list[EntityItem]:
        """With ``incident``, the entities' edges and their ends' degrees are
        read with them (local mode's next step)."""
        async def around(keys: list[str]) -> None:
            await self.cache.prefetch(keys, incident=incident)

        return await self._nearest(entity_index(self.stores), query, top_k, stage, around)

    async def _nearest_relations(self, query: np.ndarray, top_k: int, stage: str) -> list[RelationItem]:
        async def around(keys: list[tuple[str, str]]) -> None:
            await self.cache.prefetch(pairs=keys)  # with their endpoints and degrees

        return await self._nearest(relation_index(self.stores), query, top_k, stage, around)

    async def _nearest(self, index: VectorIndex, query: np.ndarray, top_k: int, stage: str,
                       around: Any = None) -> list:
        """The ``top_k`` items nearest ``query`` in ``index``; scoped, as an
        index of only the in-scope documents would rank them (``query/scoped.py``).
        ``around(keys)`` reads what the graph holds around the hits, once."""
        if self.ranking is not None:
            found = await self.ranking.nearest(index, query, top_k)
            if around is not None:
                await around([f.key for f in found])
            return [index.item(f.props, stage, f.score, key=f.key) for f in found]
        hits = await index.store.query(query, top_k)
        keys = [index.key_of(h) for h in hits]
        if around is not None:
            await around(keys)
        return [index.item(props, stage, h.score, key=key)
                for key, props, h in zip(keys, await index.read(self.graph, keys), hits) if props is not None]


def _cosine(a: object, b: object) -> float:
    """In float64 (stored vectors come back as float32 or lists); 0 for a zero vector."""
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norms = float(np.linalg.norm(a64) * np.linalg.norm(b64))
    return float(a64 @ b64) / norms if norms else 0.0
