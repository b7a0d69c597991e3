"""Deliberately broken rerankers, the reranker contract's test subjects: each adds
exactly one defect, named by its ``defect``, to the reference adapter (how
the self-test runs ``DEFECTS`` and ``RULE_BREAKERS``: ``base.broken``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ragkit.testing.doubles import OverlapReranker


# -- the reference: correct, with an output-changing option ------------------


class ScaleOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scale: float = Field(default=1.0, gt=0)
    """Multiplies every score: changes outputs."""


class ScaledOverlapReranker(OverlapReranker):
    """Reference for the broken rerankers (passes the whole reranker contract):
    word overlap times ``scale``."""

    Options = ScaleOptions
    violates: ClassVar[str] = ""

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.model_id = f"overlap-x{self.options.scale}"

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        return [s * self.options.scale for s in await super().scores(query, documents)]


# -- rule breakers ------------------------------------------------------------


class ScaleBlindIdReranker(ScaledOverlapReranker):
    """``model_id`` leaves out ``scale``."""

    violates: ClassVar[str] = "reranker.model-id.identifies-outputs"
    defect: ClassVar[str] = "model_id ignores an option that changes scores"

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.model_id = "overlap"


class ShiftingDedupReranker(ScaledOverlapReranker):
    """Scores unique documents and maps the scores back by position."""

    violates: ClassVar[str] = "reranker.scores.duplicates"
    defect: ClassVar[str] = "repeated documents shift the scores after them"

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        unique = list(dict.fromkeys(documents))
        got = await super().scores(query, unique)
        return [got[min(i, len(unique) - 1)] for i in range(len(documents))] if documents else []


class BlankDroppingReranker(ScaledOverlapReranker):
    """Drops blank documents before scoring (as APIs refusing them make
    clients do) and pads the end: the scores after a blank shift."""

    violates: ClassVar[str] = "reranker.scores.blank"
    defect: ClassVar[str] = "blank documents are dropped and the rest shift"

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        kept = [d for d in documents if d.strip()]
        got = await super().scores(query, kept)
        return got + [0.0] * (len(documents) - len(got))


class SharedStateReranker(ScaledOverlapReranker):
    """Keeps the query on the adapter: calls in flight together score against
    the last query."""

    violates: ClassVar[str] = "reranker.scores.concurrent"
    defect: ClassVar[str] = "concurrent calls score against another call's query"

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        self._query = query
        await asyncio.sleep(0.01)
        return await super().scores(self._query, documents)


class PositionBiasedReranker(ScaledOverlapReranker):
    """Adds a small bonus to earlier documents (a position-biased model): the
    ranking depends on the order the documents came in."""

    violates: ClassVar[str] = "cross.reranker.order"
    defect: ClassVar[str] = "earlier documents score higher"

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        got = await super().scores(query, documents)
        return [s + 0.01 * (len(got) - i) for i, s in enumerate(got)]


DEFECTS: tuple[type, ...] = ()

RULE_BREAKERS: dict[str, tuple[type, ...]] = {
    "RerankerContract": (ScaleBlindIdReranker, ShiftingDedupReranker, BlankDroppingReranker, SharedStateReranker, PositionBiasedReranker),
}

REFERENCES: dict[str, type] = {"RerankerContract": ScaledOverlapReranker}
