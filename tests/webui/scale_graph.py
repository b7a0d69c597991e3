"""A 10,000-entity, 50,000-relation graph for the graph page's measurement,
written through the public custom-KG API (``RAG.ainsert_custom_kg``): a hub,
99 regions around it and 9,900 leaves, plus seeded random leaf-to-leaf
relations, so that depth 2 from the hub reaches every node."""

from __future__ import annotations

import random

NODES = 10_000
EDGES = 50_000
HUB = "Hub 0"
TYPES = ["person", "organization", "location", "event", "concept"]
SOURCES = 100


def name(i: int) -> str:
    return HUB if i == 0 else f"Node {i}"


def custom_kg(seed: int = 7) -> dict:
    rng = random.Random(seed)
    chunks = [{"id": f"c{k}", "content": f"Synthetic passage {k} about nodes {k} and {k + SOURCES}."} for k in range(SOURCES)]
    entities = [{"name": name(i), "type": TYPES[i % len(TYPES)], "description": f"synthetic entity {i}",
                 "source_ids": [f"c{i % SOURCES}"]} for i in range(NODES)]
    pairs: set[tuple[int, int]] = set()
    regions = range(1, 100)
    for r in regions:
        pairs.add((0, r))
    for leaf in range(100, NODES):
        pairs.add((leaf % 99 + 1, leaf))
    while len(pairs) < EDGES:
        a, b = rng.randrange(100, NODES), rng.randrange(100, NODES)
        if a != b:
            pairs.add((min(a, b), max(a, b)))
    relations = [{"source": name(a), "target": name(b), "description": "synthetic", "source_ids": [f"c{a % SOURCES}"]}
                 for a, b in sorted(pairs)]
    return {"doc_id": "synthetic-graph", "chunks": chunks, "entities": entities, "relations": relations}
