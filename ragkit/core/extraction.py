"""What chunks say about entities and relations, and the pure merge of it.

An entity's or relation's stored state is a function of the extraction
fragments of its source chunks. :func:`entity_properties` and
:func:`relation_properties` compute it without any LLM: descriptions from
different sources are kept as separate lines. The index side
(``ragkit.pipeline.merge``) replaces a description by an LLM summary once it
grows past its thresholds; the query side uses these functions as they are to
recompute a description from the in-scope fragments only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from ragkit.core.keys import Pair, entity_key
from ragkit.schema import Entity, Relation

SEPARATOR = "\n"
"""Between the distinct description lines of an entity or relation."""


class ChunkExtraction(BaseModel):
    """What one chunk says; stored per chunk and the basis of every merge."""

    chunk_id: str
    entities: list[Entity] = Field(default_factory=list)
    relations: list[Relation] = Field(default_factory=list)
    dropped: int = 0
    warnings: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class Fragment:
    """One chunk's statement about an entity or relation."""

    chunk_id: str
    item: Entity | Relation


def entity_properties(key: str, fragments: Sequence[Fragment]) -> dict:
    """Node properties of the entity ``key`` from its fragments; the description
    is the fragments' distinct lines joined by :data:`SEPARATOR`."""
    name = majority(f.item.name.strip() for f in fragments) or key
    return {
        "name": name,
        "type": majority(f.item.type.strip().lower() for f in fragments) or "entity",
        "description": SEPARATOR.join(distinct_lines(fragments)),
        "source_ids": sorted({f.chunk_id for f in fragments}),
    }


def relation_properties(key: Pair, fragments: Sequence[Fragment]) -> dict:
    """Edge properties of the relation ``key`` from its fragments; the
    description as in :func:`entity_properties`."""
    rels = [f.item for f in fragments]
    assert all(isinstance(r, Relation) for r in rels)
    keywords: dict[str, None] = {}
    for frag in sorted(fragments, key=lambda f: f.chunk_id):
        for kw in frag.item.keywords.split(","):  # type: ignore[union-attr]
            if kw.strip():
                keywords.setdefault(kw.strip(), None)
    # Edges are undirected: an endpoint's display name is the majority of the
    # names written for it, on whichever side a fragment put it.
    ends = [n for r in rels for n in (r.source, r.target)]  # type: ignore[union-attr]
    return {
        "source": majority(n.strip() for n in ends if entity_key(n) == key[0]) or key[0],
        "target": majority(n.strip() for n in ends if entity_key(n) == key[1]) or key[1],
        "keywords": ", ".join(keywords),
        "description": SEPARATOR.join(distinct_lines(fragments)),
        "weight": float(sum(r.strength for r in rels)),  # type: ignore[union-attr]
        "source_ids": sorted({f.chunk_id for f in fragments}),
    }


def entity_text(props: Mapping) -> str:
    """What an entity's vector embeds: its name and description."""
    return f"{props['name']}\n{props['description']}"


def relation_text(props: Mapping) -> str:
    """What a relation's vector embeds: keywords, endpoints and description."""
    return f"{props['keywords']}\t{props['source']}\n{props['target']}\n{props['description']}"


def majority(values: Iterable[str]) -> str:
    """The most frequent non-empty value; ties go to the smallest."""
    counts = Counter(v for v in values if v)
    if not counts:
        return ""
    best = max(counts.values())
    return min(v for v, c in counts.items() if c == best)


def distinct_lines(fragments: Sequence[Fragment]) -> list[str]:
    """Every description line of the fragments once, whitespace collapsed, in
    the order of their chunk ids."""
    seen: dict[str, None] = {}
    for frag in sorted(fragments, key=lambda f: f.chunk_id):
        for line in frag.item.description.splitlines():
            text = " ".join(line.split())
            if text:
                seen.setdefault(text, None)
    return list(seen)
