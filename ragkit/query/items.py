"""What the retrieval stages find: entities, relations and chunks, each with the
stage that found it and its score *in that stage's own index* (scores from
different indexes are never added together or compared)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragkit.core.keys import Pair
from ragkit.schema import Location


@dataclass
class _GraphItem:
    props: dict[str, Any]
    stage: str
    score: float | None = None
    degree: int = 0

    @property
    def sources(self) -> list[str]:
        return list(self.props.get("source_ids", []))


@dataclass
class EntityItem(_GraphItem):
    """``stage``: ``entity_vectors`` (local search) or ``relation_endpoints`` (global)."""

    key: str = ""


@dataclass
class RelationItem(_GraphItem):
    """``stage``: ``relation_vectors`` (global search) or ``entity_edges`` (local);
    ``degree`` is the sum of the endpoints' degrees: how central the relation is."""

    key: Pair = ("", "")


@dataclass
class ChunkItem:
    id: str
    content: str
    doc_id: str
    file_path: str | None
    stage: str
    """``chunk_vectors`` (the dense floor), ``chunk_text`` (the lexical channel), ``graph_sources``
    (cited by found items) or ``ppr`` (reached by the walk)."""
    score: float | None = None
    support: int = 0
    """How many kept entities and relations cite this chunk."""
    tokens: int = 0
    reference: int = 0
    supports: list[str] = field(default_factory=list)
    location: Location | None = None
    """Character span, pages and section in its document (``None``: indexed before locations)."""

    @classmethod
    def from_record(cls, cid: str, rec: dict[str, Any], stage: str, **kw: Any) -> ChunkItem:
        location = rec.get("location")
        return cls(cid, rec["content"], rec["doc_id"], rec.get("file_path"), stage,
                   tokens=int(rec.get("tokens", 0)),
                   location=Location.model_validate(location) if location else None, **kw)


def round_robin(*lists: list) -> list:
    """Interleave ranked lists, first come first kept (by ``key`` or ``id``)."""
    out, seen = [], set()
    for i in range(max((len(x) for x in lists), default=0)):
        for items in lists:
            if i < len(items):
                key = getattr(items[i], "key", None) or items[i].id
                if key not in seen:
                    seen.add(key)
                    out.append(items[i])
    return out


RRF_K = 10
"""Reciprocal rank fusion's constant (Cormack et al. 2009): an item's fused
score is the sum over lists of 1 / (RRF_K + its rank there). The paper's 60
flattens the top ranks; 10 keeps more of each list's own order at the top,
which is where a 20-chunk context is decided (chosen on half A of the dev
questions: recall@5 of ppr 0.727 -> 0.753, mix 0.687 -> 0.700;
``benchmarks/findings.md``, "ranking at equal cost")."""


def fuse(*lists: list) -> list:
    """Ranked lists fused by rank (reciprocal rank fusion), best first.

    Why by rank: the lists' scores are of different kinds (a cosine, a
    PageRank share, a count of citing items) and adding them would let one
    kind's scale decide. An item found by several lists rises; ties keep the
    round-robin order, so one list alone comes out in its own order."""
    fused: dict = {}
    order: dict = {}
    items: dict = {}
    for position, item in enumerate(round_robin(*lists)):
        key = getattr(item, "key", None) or item.id
        order[key], items[key], fused[key] = position, item, 0.0
    for ranked in lists:
        seen = set()
        for rank, item in enumerate(ranked, start=1):
            key = getattr(item, "key", None) or item.id
            if key not in seen:  # a list's first mention counts
                seen.add(key)
                fused[key] += 1.0 / (RRF_K + rank)
    return [items[k] for k in sorted(fused, key=lambda k: (-round(fused[k], 12), order[k]))]
