"""Retrieval metrics on MuSiQue questions: are the gold supporting passages in
the context a query built? Shared by the benchmarks and the integration tests,
so both report the same numbers."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ragkit.testing.replay import Question


def passage_text(title: str, text: str) -> str:
    """A passage as indexed: one document per passage, title then text."""
    return f"{title}\n{text}"


def gold_passages(question: Question) -> set[str]:
    return {passage_text(p["title"], p["paragraph_text"]) for p in question["paragraphs"] if p["is_supporting"]}


def score(ranked: Sequence[str], gold: set[str]) -> dict[str, float]:
    """Metrics of one question: ``ranked`` are the context's chunk texts, best first."""
    found = gold & set(ranked)
    return {
        "recall": len(found) / len(gold),
        "all_supporting": float(found == gold),
        "any_supporting": float(bool(found)),
        "recall@2": len(gold & set(ranked[:2])) / len(gold),
        "recall@5": len(gold & set(ranked[:5])) / len(gold),
    }


def summarise(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    """Means over questions, rounded for reports."""
    return {key: round(statistics.mean(r[key] for r in rows), 4) for key in rows[0]} if rows else {}
