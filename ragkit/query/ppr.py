"""The ``ppr`` mode's ranking: personalized PageRank from the query's entities
(after HippoRAG, Gutiérrez et al. 2024).

Why: a multi-hop question names the first hop ("the publisher of Climate
Dynamics"); the passage with the answer names the second. Dense search and
LightRAG's one-hop neighbourhoods find the first passage; a random walk that
keeps restarting at the question's entities also reaches the passages that
link them to what they lead to.

How:
1. Seeds: each low-level keyword's ``SEEDS_PER_KEYWORD`` nearest entities
   (HippoRAG links each query entity on its own); only without any, the
   endpoints of the relations found for the high-level keywords. Then the
   endpoints of the ``TRIPLE_SEEDS`` relations nearest the whole question
   (HippoRAG 2's query-to-triple linking: a question says how its entities
   relate, and the relation index holds exactly such statements). Each seed
   weighs its similarity times its specificity (1 / the chunks it comes
   from), so that hubs found by chance do not dominate the walk, times its
   relevance (its cosine to the whole question, ``RELEVANCE_EXPONENT``), so
   that entities a generic keyword happens to be near do not either.
2. The graph around them, read hop by hop through ``nodes_edges`` (any graph
   backend), up to ``MAX_NODES`` nodes.
3. PageRank on it, restarting at the seeds with probability ``1 - DAMPING``.
4. An entity's score is shared among the chunks it comes from, and a chunk's
   score is the sum of its shares; the context gets the best entities, the
   relations between them, and these chunks interleaved with the question's
   nearest chunks (the walk alone ranked the first chunks worse than dense
   search on MuSiQue: recall@2 0.44 vs 0.51; interleaved, 0.54).

The power iteration is written out, not ``networkx.pagerank``: on the mode's
own graphs (MuSiQue, ~230 nodes) networkx takes 4.3 ms a call against 1.3 ms
and needs scipy, which ragkit does not; a scipy sparse product (1.1 ms) saves
too little for that dependency (``benchmarks/seams.py ppr``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

import numpy as np

from ragkit.protocols import GraphStore

Pair = tuple[str, str]
Links = Callable[[Sequence[str]], Awaitable[Mapping[str, Sequence[str]]]]
"""Entity keys -> the keys each is linked to as an alias (entity resolution)."""

DAMPING = 0.7
"""Probability of following an edge rather than restarting at a seed.
HippoRAG uses 0.5; 0.7 walks a little further from the seeds, which suits
questions of 2-4 hops (chosen on half A of the dev questions:
``benchmarks/findings.md``, "ranking at equal cost")."""
HOPS = 2
MAX_NODES = 2000
"""The walk's graph is cut here: beyond two hops of a few seeds, scores are negligible."""
SEEDS_PER_KEYWORD = 3
"""Entities linked to each low-level keyword."""
TRIPLE_SEEDS = 3
"""Relations nearest the question whose endpoints join the seeds (0: none)."""
RELEVANCE_EXPONENT = 8
"""A seed's weight is multiplied by its entity's cosine to the whole question
raised to this power. Why: a generic keyword links to entities near the word
but far from the question ("performers" -> a wrestling "character" at 0.80,
"country" -> "country united states"), and with specificity such a rare
entity outweighed the question's named ones, so the walk's first chunks were
about it. At 8, a seed at cosine 0.3 to the question weighs 1/256 of one at
0.6. Chosen on half A of the dev questions among 1-16
(``benchmarks/findings.md``, "seeds weighed by the question")."""
SCORED_PER_KEPT = 5
"""Chunks are scored from this many times top_k best entities, not only the kept ones."""
ITERATIONS = 100
TOLERANCE = 1e-9


async def neighbourhood(graph: GraphStore, seeds: Sequence[str], hops: int = HOPS,
                        max_nodes: int = MAX_NODES, links: Links | None = None) -> tuple[list[str], list[Pair]]:
    """Nodes within ``hops`` of the seeds (seeds first, then by hop) and the
    edges among them; with ``links``, an alias link is an edge too (HippoRAG
    2's synonym edges: the walk crosses from one name of an entity to another)."""
    nodes = list(dict.fromkeys(seeds))
    known = set(nodes)
    edges: set[Pair] = set()
    frontier = nodes
    for hop in range(hops + 1):  # the last round only collects edges between known nodes
        if not frontier:
            break
        found: list[str] = []
        aliases = await links(frontier) if links is not None else {}
        for key, node_edges in zip(frontier, await graph.nodes_edges(frontier)):
            synonyms = [(key, other) if key <= other else (other, key) for other in aliases.get(key, ())]
            for pair in [*(node_edges or []), *synonyms]:
                other = pair[1] if pair[0] == key else pair[0]
                if other not in known and len(known) < max_nodes and hop < hops:
                    known.add(other)
                    found.append(other)
                if other in known:
                    edges.add(pair)
        nodes += found
        frontier = found
    return nodes, sorted(edges)


def personalized_pagerank(nodes: Sequence[str], edges: Sequence[Pair], seeds: Mapping[str, float],
                          damping: float = DAMPING) -> dict[str, float]:
    """Stationary scores of a walk on the undirected graph that follows an edge
    with probability ``damping`` and else restarts at a seed (chosen by weight).
    A node without edges sends its walk back to the seeds. Scores sum to 1."""
    index = {n: i for i, n in enumerate(nodes)}
    restart = np.zeros(len(nodes))
    for key, weight in seeds.items():
        if key in index and weight > 0:
            restart[index[key]] += weight
    if not len(nodes) or restart.sum() <= 0:
        return {}
    restart /= restart.sum()
    pairs = [(index[a], index[b]) for a, b in edges if a in index and b in index and a != b]
    src = np.array([a for a, _ in pairs], dtype=np.int64)
    dst = np.array([b for _, b in pairs], dtype=np.int64)
    degree = np.bincount(np.concatenate([src, dst]), minlength=len(nodes)).astype(float)
    score = restart.copy()
    for _ in range(ITERATIONS):
        share = np.divide(score, degree, out=np.zeros_like(score), where=degree > 0)
        walked = np.zeros_like(score)
        np.add.at(walked, dst, share[src])
        np.add.at(walked, src, share[dst])
        dangling = score[degree == 0].sum()
        new = damping * (walked + dangling * restart) + (1 - damping) * restart
        if np.abs(new - score).sum() < TOLERANCE:
            score = new
            break
        score = new
    return {n: float(score[i]) for n, i in index.items()}


def seed_weights(hits: Sequence[tuple[str, float, int, float]]) -> dict[str, float]:
    """(entity, similarity, chunks it comes from, cosine to the question) ->
    restart weights: similarity x relevance ** RELEVANCE_EXPONENT x specificity."""
    weights: dict[str, float] = {}
    for key, similarity, chunks, relevance in hits:
        # To the protocol's score precision (rank_hits): backends differ below it.
        weight = (max(round(similarity, 6), 0.0) * max(round(relevance, 6), 0.0) ** RELEVANCE_EXPONENT
                  / max(chunks, 1))
        weights[key] = max(weights.get(key, 0.0), weight)
    return weights


def chunk_scores(node_scores: Mapping[str, float], sources: Mapping[str, Sequence[str]]) -> list[tuple[str, float]]:
    """Chunks by the summed scores of the entities they support, best first (ties by id)."""
    totals: dict[str, float] = {}
    for key, chunk_ids in sources.items():
        unique = list(dict.fromkeys(chunk_ids))
        for cid in unique:  # an entity's score is shared among the chunks it comes from
            totals[cid] = totals.get(cid, 0.0) + node_scores.get(key, 0.0) / len(unique)
    return sorted(totals.items(), key=lambda kv: (-tie(kv[1]), kv[0]))


def tie(score: float) -> float:
    """Scores equal but for float rounding (sums taken in another order) tie, and
    ties go by id: the same graph ranks the same on every backend."""
    return round(score, 12)
