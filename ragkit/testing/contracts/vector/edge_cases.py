"""Vector tests of the rules backends break most: ids a collation would merge,
batches past SQL parameter limits, scans while ids are deleted, durability
after ``flush()``, the ``min_score`` boundary, ``top_k=0`` and filters
comparing ``"1"`` with ``1``. Each names the rules it checks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ragkit.errors import InvalidValueError
from ragkit.protocols.base import Capability
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import collect, needs
from ragkit.testing.contracts.base.inputs import (
    CONFUSABLE_KEYS,
    HUGE,
    LARGE,
    durable_view,
    many_keys,
    scan_result,
    scan_while_deleting,
)
from ragkit.testing.contracts.vector.query import check_hits, cosines, direction_diff


def _vectors(n: int, dim: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


PIPELINE_DIMENSIONS = (384, 1536, 3072)
"""The embedders' usual dimensions (small sentence-transformers, OpenAI's)."""


class VectorEdgeCaseTests:
    @pytest.mark.parametrize("dim", PIPELINE_DIMENSIONS)
    @checks("vector.search.recall", "vector.scores.cosine")
    async def test_vectors_of_the_pipelines_dimensions(self, adapter, dim):
        """A store configured for an embedder's real dimension keeps its
        vectors (read back in their direction) and ranks 300 of them as brute
        force does: dimension-dependent code (blocks, SIMD widths, pages of a
        row) is not reached at the fixture's 16.

        Troubleshoot: a row split over pages or buffers, a column type sized for
        small vectors, a server-side limit on the dimension.
        """
        config = adapter.config.model_copy(update={"dimension": dim, "namespace": f"{adapter.namespace}d{dim}"})
        store = type(adapter)(config)
        await store.open()
        try:
            m = _vectors(300, dim, seed=dim)
            ids = [f"w{i:03d}" for i in range(300)]
            await store.upsert(ids[:150], m[:150])
            await store.upsert(ids[150:], m[150:])
            for rec, expected in zip(await store.get(ids[::37]), m[::37]):
                assert rec is not None and direction_diff(expected, rec.vector) is None
            approximate = Capability.APPROXIMATE_SEARCH in type(adapter).capabilities
            for q in (m[5], _vectors(1, dim, seed=dim + 1)[0]):
                hits = await store.query(q, 10)
                truth = cosines(dict(zip(ids, m)), q)
                if not approximate:
                    problem = check_hits(hits, truth, 10)
                    assert problem is None, f"dimension {dim}: {problem}"
            assert (await store.query(m[5], 1))[0].id == "w005"
        finally:
            await store.drop()
            await store.close()

    @checks("store.keys.exact")
    async def test_ids_differing_in_case_or_normalisation_are_distinct(self, adapter):
        """Ids differing only in case, normalisation, case-folding or a trailing
        space are different records (get, count, delete, query hits).

        Troubleshoot: derive backend point ids from the exact UTF-8 bytes of the
        id, never from a lowered or normalised form.
        """
        ids = list(CONFUSABLE_KEYS)
        m = _vectors(len(ids), adapter.dimension, seed=91)
        await adapter.upsert(ids, m, [{"i": i} for i in range(len(ids))])
        assert await adapter.count() == len(ids), "ids differing only in case/normalisation were merged"
        got = await adapter.get(ids)
        assert [r.metadata["i"] if r else None for r in got] == list(range(len(ids)))
        for i in (0, 4, 8, 11):
            hits = await adapter.query(m[i], 1)
            assert [h.id for h in hits] == [ids[i]], f"query for {ids[i]!r} found {[h.id for h in hits]}"
        await adapter.delete(["apple", "STRASSE"])
        assert set(await collect(adapter.ids())) == set(ids) - {"apple", "STRASSE"}

    @checks("store.batch.large")
    async def test_get_and_delete_past_sql_parameter_limits(self, adapter):
        """``get`` and ``delete`` of 33000 ids (2500 stored) in one call.

        Troubleshoot: chunk ``IN (...)`` lists and request bodies in the hooks.
        """
        stored = many_keys(LARGE, "v")
        await adapter.upsert(stored, _vectors(LARGE, adapter.dimension, seed=92))
        asked = many_keys(HUGE - LARGE, "absent") + stored
        got = await adapter.get(asked)
        found = [r.id for r in got if r is not None]
        assert found == stored, f"get of {len(asked)} ids found {len(found)} of {len(stored)} stored"
        await adapter.delete(asked)
        assert await adapter.count() == 0, "a delete of 33000 ids left records behind"

    @checks("store.scan.complete-under-delete")
    async def test_id_scan_is_complete_while_ids_are_deleted(self, adapter):
        """An ``ids()`` scan whose consumer deletes as it goes still yields
        every id stored for the whole scan exactly once.

        Troubleshoot: page by id or snapshot the ids, not by offset.
        """
        ids = many_keys(1200, "s")
        await adapter.upsert(ids, _vectors(len(ids), adapter.dimension, seed=93))
        doomed = set(ids[500:540])
        seen = await scan_while_deleting(adapter.ids, str, adapter.delete, doomed)
        problem = scan_result(seen, set(ids) - doomed, doomed)
        assert problem is None, problem

    @checks("vector.query.min-score-inclusive")
    async def test_min_score_keeps_a_hit_scoring_exactly_min_score(self, adapter):
        """A hit whose score equals ``min_score`` is returned (the bound is
        inclusive), whatever the score: the query uses each hit's own reported
        score as ``min_score``.

        Troubleshoot: push ``min_score`` down as ``>=`` (Qdrant's
        ``score_threshold`` and SQL ``score >= ?``), never ``>``; convert
        distances to scores before comparing.
        """
        d = adapter.dimension
        m = _vectors(12, d, seed=94)
        ids = [f"m{i:02d}" for i in range(12)]
        await adapter.upsert(ids, m)
        q = _vectors(1, d, seed=95)[0]
        hits = await adapter.query(q, 12)
        assert len(hits) == 12
        for h in hits[::3]:
            kept = await adapter.query(q, 12, min_score=h.score)
            assert h.id in [k.id for k in kept], (
                f"{h.id!r} scores {h.score!r}; query(min_score={h.score!r}) dropped it: the bound is inclusive"
            )

    @checks("vector.query.top-k")
    async def test_top_k_zero_returns_nothing(self, adapter):
        """``top_k=0`` returns ``[]`` (not "no limit"); a negative or non-int
        ``top_k`` raises ``InvalidValueError``.

        Troubleshoot: the protocol's ``query`` does this before the hook; an
        override must keep it.
        """
        await adapter.upsert(["a", "b"], _vectors(2, adapter.dimension, seed=96))
        q = _vectors(1, adapter.dimension, seed=97)[0]
        assert await adapter.query(q, 0) == []
        assert await adapter.query(q, 0, min_score=-1.0) == []
        for bad in (-1, 1.5, True, "2"):
            with pytest.raises(InvalidValueError):
                await adapter.query(q, bad)

    @needs(Capability.METADATA_FILTER)
    @checks("vector.filter.types")
    async def test_filter_compares_values_with_their_types(self, adapter):
        """(METADATA_FILTER) ``"1"`` never matches ``1`` (nor the reverse);
        ``3`` matches ``3.0`` and ``3.0`` matches ``3``; in ``$in`` too.

        Troubleshoot: backends that store metadata as strings or JSON text
        compare ``"1"`` with ``1``; typed payloads may miss ``3`` vs ``3.0``:
        keep the type and compare numbers numerically.
        """
        d = adapter.dimension
        metas: list[dict[str, Any]] = [
            {"v": 1}, {"v": "1"}, {"v": 3}, {"v": 3.0}, {"v": 2.5}, {"v": True}, {"v": "3"},
        ]
        ids = [f"t{i}" for i in range(len(metas))]
        await adapter.upsert(ids, _vectors(len(ids), d, seed=98), metas)
        q = _vectors(1, d, seed=99)[0]

        async def found(flt: dict[str, Any]) -> list[str]:
            return sorted(h.id for h in await adapter.query(q, 50, filter=flt))

        cases: list[tuple[dict[str, Any], list[str]]] = [
            ({"v": 1}, ["t0"]),
            ({"v": "1"}, ["t1"]),
            ({"v": 3}, ["t2", "t3"]),
            ({"v": 3.0}, ["t2", "t3"]),
            ({"v": "3"}, ["t6"]),
            ({"v": 2.5}, ["t4"]),
            ({"v": {"$in": [1, 3.0]}}, ["t0", "t2", "t3"]),
            ({"v": {"$in": ["1", "3"]}}, ["t1", "t6"]),
        ]
        for flt, want in cases:
            got = await found(flt)
            assert got == want, f"filter {flt!r} matched {got}, expected {want} (metadata {dict(zip(ids, metas))})"

    @needs(Capability.PERSISTENT)
    @checks("store.flush.durable")
    async def test_flush_makes_writes_durable(self, adapter):
        """(PERSISTENT) After ``flush()``, with the store still open, a new
        instance over what is durable sees every write so far.

        Troubleshoot: ``_flush`` must save what ``_close`` would.
        """
        m = _vectors(3, adapter.dimension, seed=100)
        await adapter.upsert(["a", "b", "c"], m, [{"n": 1}, {"n": 2}, {"n": 3}])
        await adapter.delete(["b"])
        await adapter.upsert(["c"], m[:1], [{"n": 4}])
        await adapter.flush()
        async with durable_view(adapter) as durable:
            got = await durable.get(["a", "b", "c"])
            meta = [r.metadata if r else None for r in got]
            assert meta == [{"n": 1}, None, {"n": 4}], f"after flush() a new instance reads {meta}"
            assert [h.id for h in await durable.query(m[0], 1)] in (["a"], ["c"])
