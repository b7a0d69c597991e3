"""Search stage: keywords in, ranked entities, relations and chunks out.

- local: low-level keywords -> entity vectors -> nodes -> their edges;
- global: high-level keywords -> relation vectors -> edges -> their endpoints;
- naive: the question -> chunk vectors;
- ppr: each low-level keyword -> its nearest entities as seeds (relation
  endpoints for the high-level ones when there are none) -> personalized
  PageRank on the graph around them -> entities, relations, chunks by score.

Graph neighbourhoods are ranked by degree, then weight. Vector hits keep their
own index's similarity; graph-found items have no score.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ragkit.core.stores import Stores
from ragkit.protocols import Embedder
from ragkit.query import ppr
from ragkit.query.items import ChunkItem, EntityItem, Pair, RelationItem
from ragkit.query.scope import Restrictor, Scope

OVERSAMPLE = 4
"""A scoped search asks each index for this many times ``top_k``: hits outside
the scope are dropped afterwards (entity and relation vectors carry no doc ids)."""


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
        hits = await self.stores.entity_vectors.query(await self.embed(keyword_text(keywords)), self._k(top_k))
        keys = [str(h.metadata.get("key", "")) for h in hits]
        nodes = await self.stores.graph.get_nodes(keys)
        degrees = await self.stores.graph.degrees(keys)
        entities = [
            EntityItem(props, "entity_vectors", h.score, degree, key=key)
            for key, props, h, degree in zip(keys, nodes, hits, degrees)
            if props is not None
        ]
        entities = (await self._restrict_entities(entities))[:top_k]
        return entities, await self._edges_of([e.key for e in entities])

    async def global_(self, keywords: list[str], top_k: int) -> tuple[list[EntityItem], list[RelationItem]]:
        if not keywords:
            return [], []
        hits = await self.stores.relation_vectors.query(await self.embed(keyword_text(keywords)), self._k(top_k))
        pairs: list[Pair] = [(str(h.metadata.get("source", "")), str(h.metadata.get("target", ""))) for h in hits]
        edges = await self.stores.graph.get_edges(pairs)
        degrees = await self.stores.graph.edge_degrees(pairs)
        relations = [
            RelationItem(props, "relation_vectors", h.score, degree, key=pair)
            for pair, props, h, degree in zip(pairs, edges, hits, degrees)
            if props is not None
        ]
        relations = (await self._restrict_relations(relations))[:top_k]
        return await self._endpoints(relations), relations

    async def chunks(self, question: str, top_k: int) -> list[ChunkItem]:
        flt = self.scope.vector_filter if self.scope else None
        hits = await self.stores.chunk_vectors.query(await self.embed(question), top_k, filter=flt)
        records = await self.stores.chunks.get_many([h.id for h in hits])
        return [
            ChunkItem.from_record(h.id, rec, "chunk_vectors", score=h.score)
            for h, rec in zip(hits, records)
            if rec is not None
        ]

    async def ppr(self, low: list[str], high: list[str], top_k: int
                  ) -> tuple[list[EntityItem], list[RelationItem], list[tuple[str, float]]]:
        """Entities and relations by PageRank score (top_k each) and every chunk
        they support, by summed score."""
        hits: list[tuple[str, float]] = []
        # Each low-level keyword links to its own nearest entities (HippoRAG's
        # query-entity linking); the high-level ones only stand in for none.
        await self.embed_all([*low, keyword_text(high)] if high else low)
        for keyword in low:
            found = await self.stores.entity_vectors.query(self.vectors[keyword], self._k(ppr.SEEDS_PER_KEYWORD))
            hits += [(str(h.metadata.get("key", "")), h.score) for h in found]
        if high and not hits:
            found = await self.stores.relation_vectors.query(self.vectors[keyword_text(high)], self._k(top_k))
            hits += [(str(h.metadata.get(end, "")), h.score) for h in found for end in ("source", "target")]
        seed_props = await self.stores.graph.get_nodes([k for k, _ in hits])
        seeds = ppr.seed_weights([(k, s, len(p.get("source_ids", []))) for (k, s), p in zip(hits, seed_props) if p])
        if not seeds:
            return [], [], []
        nodes, edges = await ppr.neighbourhood(self.stores.graph, list(seeds))
        scores = ppr.personalized_pagerank(nodes, edges, seeds)
        ranked = sorted(scores, key=lambda k: (-ppr.tie(scores[k]), k))[: top_k * ppr.SCORED_PER_KEPT]
        props = dict(zip(ranked, await self.stores.graph.get_nodes(ranked)))
        entities = [EntityItem(props[k], "ppr", scores[k], key=k) for k in ranked if props[k] is not None]
        entities = await self._restrict_entities(entities)
        chunks = ppr.chunk_scores(scores, {e.key: e.sources for e in entities})
        entities = entities[:top_k]
        degree = dict(zip([e.key for e in entities], await self.stores.graph.degrees([e.key for e in entities])))
        for entity in entities:
            entity.degree = degree[entity.key]
        pairs = sorted((p for p in edges if p[0] in degree and p[1] in degree),
                       key=lambda p: (-ppr.tie(scores[p[0]] + scores[p[1]]), p))[:top_k]
        relations = [
            RelationItem(edge, "ppr", scores[p[0]] + scores[p[1]], degree[p[0]] + degree[p[1]], key=p)
            for p, edge in zip(pairs, await self.stores.graph.get_edges(pairs))
            if edge is not None
        ]
        return entities, await self._restrict_relations(relations), chunks

    # -- graph neighbourhoods --------------------------------------------------

    async def _edges_of(self, keys: list[str]) -> list[RelationItem]:
        """Every edge of the found nodes, most connected first, then heaviest."""
        pairs = list(dict.fromkeys(p for edges in await self.stores.graph.nodes_edges(keys) if edges for p in edges))
        edges = await self.stores.graph.get_edges(pairs)
        degrees = await self.stores.graph.edge_degrees(pairs)
        relations = [
            RelationItem(props, "entity_edges", None, degree, key=pair)
            for pair, props, degree in zip(pairs, edges, degrees)
            if props is not None
        ]
        relations.sort(key=lambda r: (-r.degree, -float(r.props.get("weight", 0.0)), r.key))
        return await self._restrict_relations(relations)

    async def _endpoints(self, relations: list[RelationItem]) -> list[EntityItem]:
        """Endpoints in the order their relations were found."""
        keys = list(dict.fromkeys(k for r in relations for k in r.key))
        nodes = await self.stores.graph.get_nodes(keys)
        degrees = await self.stores.graph.degrees(keys)
        entities = [
            EntityItem(props, "relation_endpoints", None, degree, key=key)
            for key, props, degree in zip(keys, nodes, degrees)
            if props is not None
        ]
        return await self._restrict_entities(entities)

    def _k(self, top_k: int) -> int:
        return top_k * OVERSAMPLE if self.scope else top_k

    async def _restrict_entities(self, items: list[EntityItem]) -> list[EntityItem]:
        return await self.restrictor.entities(items) if self.restrictor else items

    async def _restrict_relations(self, items: list[RelationItem]) -> list[RelationItem]:
        return await self.restrictor.relations(items) if self.restrictor else items
