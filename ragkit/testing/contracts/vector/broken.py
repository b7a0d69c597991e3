"""Deliberately broken vector stores, the vector contract's test subjects: each adds
exactly one defect, named by its ``defect``, to the reference adapter (how
the self-test runs ``DEFECTS`` and ``RULE_BREAKERS``: ``base.broken``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ragkit.protocols.base import bypass_template
from ragkit.protocols.vector import Filter
from ragkit.schema import VectorHit
from ragkit.storage.numpy_vectors import NumpyVectorStore
from ragkit.testing.contracts.base.broken import MissingIdError


# -- defects: the whole contract fails ----------------------------------------


class StrictDeleteVectorStore(NumpyVectorStore):
    """``delete`` raises ``MissingIdError`` (a ``KeyError``) for an id that is
    not stored, where the protocol says missing ids are ignored."""

    name: ClassVar[str] = "broken-strict-delete"
    defect: ClassVar[str] = "delete raises on an id that is not stored"

    async def _delete(self, ids: list[str]) -> None:
        absent = set(ids) - set(await super()._get(ids))
        if absent:
            raise MissingIdError(f"cannot delete missing id(s): {sorted(absent)}")
        await super()._delete(ids)


class IgnoresFilterVectorStore(NumpyVectorStore):
    """``query`` ignores ``filter=`` (and returns unfiltered neighbours) while
    still declaring ``Capability.METADATA_FILTER``."""

    name: ClassVar[str] = "broken-ignores-filter"
    defect: ClassVar[str] = "query ignores the metadata filter"

    async def _query(
        self, unit: np.ndarray, top_k: int, filter: Filter | None, min_score: float | None
    ) -> list[VectorHit]:
        return await super()._query(unit, top_k, None, min_score)


# -- rule breakers: a test naming the rule fails ------------------------------


class CloseOnlyDurableVectorStore(NumpyVectorStore):
    """``flush()`` does nothing: only ``close()`` writes the file."""

    violates: ClassVar[str] = "store.flush.durable"
    defect: ClassVar[str] = "flush() does not save; only close() does"

    async def _flush(self) -> None:
        return None


class ExclusiveMinScoreVectorStore(NumpyVectorStore):
    """Pushes ``min_score`` down as ``score > min_score`` (exclusive)."""

    violates: ClassVar[str] = "vector.query.min-score-inclusive"
    defect: ClassVar[str] = "a hit scoring exactly min_score is dropped"

    async def _query(self, unit: np.ndarray, top_k: int, filter: Filter | None, min_score: float | None) -> list[VectorHit]:
        hits = await super()._query(unit, top_k, filter, min_score)
        return [h for h in hits if min_score is None or h.score > min_score]


class ZeroTopKIsUnlimitedVectorStore(NumpyVectorStore):
    """Replaces ``query`` and treats ``top_k=0`` as "no limit"."""

    violates: ClassVar[str] = "vector.query.top-k"
    defect: ClassVar[str] = "top_k=0 returns every record"

    @bypass_template("the defect: top_k=0 means no limit here")
    async def query(self, vector, top_k, *, filter=None, min_score=None):  # type: ignore[override]
        self._check_open()
        q = self.check_query_args(vector, top_k).astype(np.float64)
        k = top_k or max(await self.count(), 1)
        hits = await self._query(q / np.linalg.norm(q), k, filter, min_score)
        hits = [h for h in hits if min_score is None or h.score >= min_score]
        hits.sort(key=lambda h: (-round(h.score, 6), h.id))
        return hits[:k]


class StringlyFilterVectorStore(NumpyVectorStore):
    """Compares filter values as text (metadata kept as strings): ``"1"``
    matches ``1`` and ``3`` does not match ``3.0``."""

    violates: ClassVar[str] = "vector.filter.types"
    defect: ClassVar[str] = "filters compare str(value)"

    async def _query(self, unit: np.ndarray, top_k: int, filter: Filter | None, min_score: float | None) -> list[VectorHit]:
        hits = await super()._query(unit, max(await self.count(), 1), None, min_score)
        if not filter:
            return hits

        def ok(meta: Mapping[str, Any]) -> bool:
            for field, cond in filter.items():
                options = cond["$in"] if isinstance(cond, Mapping) else [cond]
                if field not in meta or str(meta[field]) not in {str(c) for c in options}:
                    return False
            return True

        return [h for h in hits if ok(h.metadata)]


DEFECTS: tuple[type, ...] = (StrictDeleteVectorStore, IgnoresFilterVectorStore)

RULE_BREAKERS: dict[str, tuple[type, ...]] = {
    "VectorStoreContract": (CloseOnlyDurableVectorStore, ExclusiveMinScoreVectorStore, ZeroTopKIsUnlimitedVectorStore, StringlyFilterVectorStore),
}

REFERENCES: dict[str, type] = {"VectorStoreContract": NumpyVectorStore}
