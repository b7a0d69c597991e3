"""Vector queries and metadata filters: ``VectorQueryTests`` and
``VectorFilterTests``, and the brute-force reference every vector check
compares with (``cosines``, ``check_hits``), which the state machine and the
other vector tests share."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from ragkit.protocols.base import Capability
from ragkit.protocols.vector import VectorStore, matches_filter
from ragkit.schema import VectorHit
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import difference, needs

SCORE_TOL = 1e-4
"""Scores must be cosine similarity within this (the protocol's precision)."""
ORDER_SLACK = 1e-5
"""Hits whose true cosines differ by more than this must be in score order."""
EXACT_TIE = 1e-9
"""True cosines this close are ties: such hits must be ordered by id ascending."""
RECALL_N, RECALL_QUERIES, RECALL_K, RECALL_MIN = 1000, 25, 10, 0.9


def rand(n: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def unit(dim: int, *weights: float) -> np.ndarray:
    """A vector whose first components are ``weights`` and the rest 0."""
    v = np.zeros(dim, dtype=np.float32)
    v[: len(weights)] = weights
    return v


def cosines(vectors: Mapping[str, Any], query: Any) -> dict[str, float]:
    """True cosine similarity of each stored vector to ``query`` (float64)."""
    q = np.asarray(query, dtype=np.float32).astype(np.float64)
    qn = float(np.linalg.norm(q))
    out = {}
    for id_, v in vectors.items():
        v64 = np.asarray(v, dtype=np.float32).astype(np.float64)
        out[id_] = float(v64 @ q / (np.linalg.norm(v64) * qn))
    return out


def check_hits(
    hits: Sequence[VectorHit],
    scores: Mapping[str, float],
    top_k: int,
    *,
    min_score: float | None = None,
    metadata: Mapping[str, Mapping[str, Any]] | None = None,
) -> str | None:
    """Whether ``hits`` is a correct answer for a query whose eligible records
    (after the filter) have the true cosines ``scores``; a message if not.

    Tolerant where the protocol is: scores within ``SCORE_TOL``, hits exactly at
    the ``min_score`` or top-k boundary may go either way, near-ties any order.
    """
    ids = [h.id for h in hits]
    if len(ids) != len(set(ids)):
        return f"hits repeat an id: {ids}"
    if len(hits) > top_k:
        return f"{len(hits)} hits for top_k={top_k}"
    for h in hits:
        if h.id not in scores:
            return f"hit {h.id!r} is not stored or does not match the filter"
        if not isinstance(h.score, float) or not math.isfinite(h.score):
            return f"hit {h.id!r} has score {h.score!r}, not a finite float"
        if abs(h.score - scores[h.id]) > SCORE_TOL:
            return f"hit {h.id!r} has score {h.score:.6f} but its cosine is {scores[h.id]:.6f}"
        if min_score is not None and scores[h.id] < min_score - SCORE_TOL:
            return f"hit {h.id!r} (cosine {scores[h.id]:.6f}) is below min_score={min_score}"
        if metadata is not None:
            diff = difference(dict(metadata[h.id]), h.metadata)
            if diff:
                return f"hit {h.id!r} metadata: {diff}"
    eligible = {
        i: s for i, s in scores.items() if min_score is None or s >= min_score + SCORE_TOL
    }
    want = min(top_k, len(eligible))
    if len(hits) < want:
        return f"{len(hits)} hits, expected {want} (top_k={top_k}, {len(eligible)} eligible)"
    floor = min((scores[i] for i in ids), default=math.inf)
    if len(hits) == top_k:
        missed = [i for i, s in eligible.items() if i not in ids and s > floor + SCORE_TOL]
    else:
        missed = [i for i in eligible if i not in ids]
    if missed:
        missed.sort(key=lambda i: -scores[i])
        return (
            f"missed {missed[:5]} (cosines {[round(scores[i], 6) for i in missed[:5]]}) "
            f"which beat returned hits {ids}"
        )
    for x, y in zip(hits, hits[1:]):
        sx, sy = scores[x.id], scores[y.id]
        if sy > sx + ORDER_SLACK:
            return f"{y.id!r} (cosine {sy:.6f}) is ranked after {x.id!r} ({sx:.6f})"
        if abs(sx - sy) <= EXACT_TIE and x.id > y.id:
            return f"{x.id!r} and {y.id!r} tie (cosine {sx:.6f}) but are not ordered by id ascending"
    return None


def direction_diff(expected: Any, got: Sequence[float]) -> str | None:
    e = np.asarray(expected, dtype=np.float64)
    g = np.asarray(got, dtype=np.float64)
    if g.shape != e.shape:
        return f"vector has shape {g.shape}, expected {e.shape}"
    cos = float(e @ g / (np.linalg.norm(e) * np.linalg.norm(g)))
    if not cos > 1 - 1e-5:
        return f"vector read back points elsewhere (cosine {cos:.6f} to the one written)"
    return None


async def assert_records(store: VectorStore, expected: Mapping[str, tuple[Any, dict]], asked: list[str]):
    got = await store.get(asked)
    assert len(got) == len(asked), f"get() returned {len(got)} entries for {len(asked)} ids"
    for id_, rec in zip(asked, got):
        if id_ not in expected:
            assert rec is None, f"get([{id_!r}]) should be None (not stored), got {rec!r}"
            continue
        assert rec is not None, f"get([{id_!r}]) returned None for a stored id"
        assert rec.id == id_, f"get() returned record {rec.id!r} at the position of {id_!r}"
        vec, meta = expected[id_]
        diff = direction_diff(vec, rec.vector)
        assert diff is None, f"{id_!r}: {diff}"
        diff = difference(dict(meta), rec.metadata)
        assert diff is None, f"{id_!r} metadata: {diff}"


class VectorQueryTests:
    @checks("vector.query.ranking")
    async def test_query_orders_by_cosine_best_first(self, adapter):
        """Hits come best first by cosine similarity, whatever the vectors' lengths,
        with scores equal to the cosine (here 1, 0.894, 0.707, 0, -0.707, -1).

        Troubleshoot: use cosine (normalise vectors or use the backend's cosine
        metric), not dot product or L2 distance; convert distances to similarity.
        """
        d = adapter.dimension
        vectors = {
            "same": unit(d, 3),
            "close": unit(d, 2, 1),
            "diag": unit(d, 5, 5),
            "ortho": unit(d, 0, 7),
            "away": unit(d, -1, 1),
            "opposite": unit(d, -0.5),
        }
        await adapter.upsert(list(vectors), np.stack(list(vectors.values())))
        hits = await adapter.query(unit(d, 1), 10)
        assert [h.id for h in hits] == ["same", "close", "diag", "ortho", "away", "opposite"]
        expected = [1.0, 2 / math.sqrt(5), 1 / math.sqrt(2), 0.0, -1 / math.sqrt(2), -1.0]
        assert [h.score for h in hits] == pytest.approx(expected, abs=SCORE_TOL)

    @checks("vector.scores.cosine")
    async def test_scores_are_cosine_similarity(self, adapter):
        """Scores equal the cosine similarity in [-1, 1] within 1e-4 for random
        data, and do not change when the query is scaled by 1000 or 0.001.

        Troubleshoot: normalise both sides; convert a backend's distance (1 - cos,
        or L2 on unit vectors) back to cosine similarity.
        """
        d = adapter.dimension
        m = rand(50, d, seed=9)
        ids = [f"r{i:02d}" for i in range(50)]
        await adapter.upsert(ids, m)
        q = rand(1, d, seed=10)[0]
        truth = cosines(dict(zip(ids, m)), q)
        for scale in (1.0, 1000.0, 0.001):
            hits = await adapter.query(q * scale, 50)
            problem = check_hits(hits, truth, 50)
            assert problem is None, f"query scaled by {scale}: {problem}"
            assert all(-1 - 1e-6 <= h.score <= 1 + 1e-6 for h in hits)

    @checks("vector.query.ranking")
    async def test_equal_scores_are_ordered_by_id(self, adapter):
        """Hits with equal scores (same direction, different lengths) are ordered
        by id ascending (code-point order: "B" < "a"), including at the top-k cut.

        Troubleshoot: sort by (-score rounded to 1e-6, id); ``rank_hits`` in
        ragkit.protocols.vector does it. Fetch a few extra candidates from an ANN
        backend so ties at the cut are resolved by id.
        """
        d = adapter.dimension
        v = rand(1, d, seed=11)[0]
        w = rand(1, d, seed=12)[0]
        ids = ["m", "a", "z", "B", "k"]
        scales = [1.0, 2.0, 0.5, 4.0, 0.25]  # powers of two: exactly equal cosines
        await adapter.upsert(ids + ["other"], np.stack([v * s for s in scales] + [w]))
        hits = await adapter.query(v, 10)
        tied = [h.id for h in hits if h.id != "other"]
        assert tied == ["B", "a", "k", "m", "z"], f"tied hits not in id order: {tied}"
        top3 = await adapter.query(v, 3)
        assert [h.id for h in top3] == ["B", "a", "k"], "ties at the top-k cut must keep the smallest ids"

    @checks("vector.query.top-k")
    async def test_top_k_larger_than_the_store_returns_everything(self, adapter):
        """``top_k`` larger than the number of stored vectors returns all of them.

        Troubleshoot: clamp ``top_k`` to the count before asking the backend if
        it rejects large limits; do not return an empty list.
        """
        d = adapter.dimension
        m = rand(7, d, seed=13)
        ids = [f"v{i}" for i in range(7)]
        await adapter.upsert(ids, m)
        hits = await adapter.query(m[0], 1000)
        assert check_hits(hits, cosines(dict(zip(ids, m)), m[0]), 1000) is None
        assert len(hits) == 7

    @checks("vector.query.top-k")
    async def test_top_k_limits_the_hits(self, adapter):
        """At most ``top_k`` hits come back, and they are the best ones.

        Troubleshoot: pass ``top_k`` as the backend's limit and keep the best.
        """
        d = adapter.dimension
        m = rand(30, d, seed=14)
        ids = [f"v{i:02d}" for i in range(30)]
        await adapter.upsert(ids, m)
        for k in (1, 3, 10):
            hits = await adapter.query(m[5], k)
            problem = check_hits(hits, cosines(dict(zip(ids, m)), m[5]), k)
            assert problem is None, f"top_k={k}: {problem}"

    async def test_query_on_an_empty_store_returns_nothing(self, adapter):
        """A query on an empty store (and after deleting everything) returns ``[]``.

        Troubleshoot: do not raise on a missing collection/index when it is empty.
        """
        d = adapter.dimension
        assert await adapter.query(unit(d, 1), 5) == []
        await adapter.upsert(["a"], [unit(d, 1)])
        await adapter.delete(["a"])
        assert await adapter.query(unit(d, 1), 5) == []

    @checks("vector.query.min-score-inclusive")
    async def test_min_score_drops_lower_hits(self, adapter):
        """``min_score`` drops hits scoring below it and keeps the others, for
        positive, zero-crossing and negative thresholds.

        Troubleshoot: compare the cosine *similarity* with ``min_score`` (not a
        distance), and apply it before cutting to ``top_k``.
        """
        d = adapter.dimension
        vectors = {"s1": unit(d, 1), "s07": unit(d, 1, 1), "s0": unit(d, 0, 1), "sm1": unit(d, -1)}
        await adapter.upsert(list(vectors), np.stack(list(vectors.values())))
        q = unit(d, 1)
        for threshold, expected in [(0.9, ["s1"]), (0.5, ["s1", "s07"]), (-0.5, ["s1", "s07", "s0"]), (-1.5, ["s1", "s07", "s0", "sm1"])]:
            hits = await adapter.query(q, 10, min_score=threshold)
            assert [h.id for h in hits] == expected, f"min_score={threshold}"
        hits = await adapter.query(q, 1, min_score=0.5)
        assert [h.id for h in hits] == ["s1"]

    @checks("vector.search.recall")
    async def test_exact_search_matches_brute_force(self, adapter):
        """Top-10 hits of 25 queries over 1000 random vectors match numpy brute
        force: exactly (up to ties within 1e-4) for exact stores; with recall@10
        >= 0.9 on average for stores declaring APPROXIMATE_SEARCH.

        Troubleshoot: an exact store must scan every vector (no ANN index, no
        candidate cap). An approximate store must tune its index (ef/nprobe) for
        at least 0.9 recall, or declare nothing and be exact.
        """
        d = adapter.dimension
        m = rand(RECALL_N, d, seed=15)
        ids = [f"doc-{i:04d}" for i in range(RECALL_N)]
        for start in range(0, RECALL_N, 250):
            await adapter.upsert(ids[start : start + 250], m[start : start + 250])
        queries = rand(RECALL_QUERIES, d, seed=16)
        approximate = Capability.APPROXIMATE_SEARCH in type(adapter).capabilities
        recalls = []
        for q in queries:
            truth = cosines(dict(zip(ids, m)), q)
            hits = await adapter.query(q, RECALL_K)
            if not approximate:
                problem = check_hits(hits, truth, RECALL_K)
                assert problem is None, f"exact search differs from brute force: {problem}"
            best = sorted(truth, key=lambda i: (-truth[i], i))[:RECALL_K]
            recalls.append(len(set(best) & {h.id for h in hits}) / RECALL_K)
        if approximate:
            recall = sum(recalls) / len(recalls)
            assert recall >= RECALL_MIN, f"recall@10 = {recall:.3f} < {RECALL_MIN}"


class VectorFilterTests:
    async def _filter_data(self, adapter) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
        d = adapter.dimension
        m = rand(12, d, seed=17)
        ids = [f"f{i:02d}" for i in range(12)]
        metas = [
            {"color": ["red", "blue", "green"][i % 3], "n": i % 4, "flag": i % 2 == 0, "w": i / 4}
            for i in range(10)
        ] + [{"n": 1}, {"color": "red", "n": True}]  # f10 lacks color; f11 has n=True (a bool)
        await adapter.upsert(ids, m, metas)
        return dict(zip(ids, m)), dict(zip(ids, metas))

    async def _check_filter(self, adapter, vectors, metas, flt, top_k=20):
        q = rand(1, adapter.dimension, seed=18)[0]
        truth = cosines({i: v for i, v in vectors.items() if matches_filter(metas[i], flt)}, q)
        hits = await adapter.query(q, top_k, filter=flt)
        problem = check_hits(hits, truth, top_k, metadata=metas)
        assert problem is None, f"filter={flt!r}: {problem}"
        return {h.id for h in hits}

    @needs(Capability.METADATA_FILTER)
    @checks("vector.filter.semantics")
    async def test_filter_equality(self, adapter):
        """(METADATA_FILTER) ``{field: value}`` keeps exactly the records whose
        field equals the value (str, int, float and bool values).

        Troubleshoot: translate to the backend's equality filter on the payload
        field; ``matches_filter`` in ragkit.protocols.vector is the reference.
        """
        vectors, metas = await self._filter_data(adapter)
        assert await self._check_filter(adapter, vectors, metas, {"color": "red"}) == {"f00", "f03", "f06", "f09", "f11"}
        assert await self._check_filter(adapter, vectors, metas, {"n": 2}) == {"f02", "f06"}
        assert await self._check_filter(adapter, vectors, metas, {"w": 0.75}) == {"f03"}
        assert await self._check_filter(adapter, vectors, metas, {"color": "none"}) == set()

    @needs(Capability.METADATA_FILTER)
    @checks("vector.filter.semantics")
    async def test_filter_in(self, adapter):
        """(METADATA_FILTER) ``{field: {"$in": [...]}}`` keeps records whose field
        equals any listed value; an empty list matches nothing.

        Troubleshoot: translate ``$in`` to the backend's any-of/IN filter.
        """
        vectors, metas = await self._filter_data(adapter)
        got = await self._check_filter(adapter, vectors, metas, {"color": {"$in": ["blue", "green"]}})
        assert got == {"f01", "f02", "f04", "f05", "f07", "f08"}
        assert await self._check_filter(adapter, vectors, metas, {"n": {"$in": [3]}}) == {"f03", "f07"}
        assert await self._check_filter(adapter, vectors, metas, {"n": {"$in": []}}) == set()

    @needs(Capability.METADATA_FILTER)
    @checks("vector.filter.semantics")
    async def test_filter_requires_every_condition(self, adapter):
        """(METADATA_FILTER) Several entries must all hold (AND), mixing equality
        and ``$in``.

        Troubleshoot: combine conditions with AND (``must`` in Qdrant), not OR.
        """
        vectors, metas = await self._filter_data(adapter)
        flt = {"color": "red", "n": {"$in": [0, 1, 2]}, "flag": True}
        assert await self._check_filter(adapter, vectors, metas, flt) == {"f00", "f06"}

    @needs(Capability.METADATA_FILTER)
    @checks("vector.filter.semantics")
    async def test_filter_on_a_missing_field_never_matches(self, adapter):
        """(METADATA_FILTER) A record without the filtered field never matches
        (f10 has no color).

        Troubleshoot: a backend treating missing as null/default must exclude it.
        """
        vectors, metas = await self._filter_data(adapter)
        got = await self._check_filter(adapter, vectors, metas, {"color": {"$in": ["red", "blue", "green"]}})
        assert "f10" not in got and len(got) == 11
        assert await self._check_filter(adapter, vectors, metas, {"absent": 1}) == set()

    @needs(Capability.METADATA_FILTER)
    @checks("vector.filter.types")
    async def test_filter_tells_bool_from_int(self, adapter):
        """(METADATA_FILTER) ``True`` matches only the boolean True, never the
        integer 1, and ``1`` never matches ``True`` (f11 has n=True).

        Troubleshoot: backends that store booleans as 0/1 must keep the type (or
        a type tag) and compare it too.
        """
        vectors, metas = await self._filter_data(adapter)
        assert await self._check_filter(adapter, vectors, metas, {"n": True}) == {"f11"}
        assert await self._check_filter(adapter, vectors, metas, {"n": 1}) == {"f01", "f05", "f09", "f10"}
        assert await self._check_filter(adapter, vectors, metas, {"n": {"$in": [True]}}) == {"f11"}

    @needs(Capability.METADATA_FILTER)
    @checks("vector.filter.semantics")
    async def test_filter_applies_before_top_k(self, adapter):
        """(METADATA_FILTER) With a filter, ``top_k`` counts matching records: the
        3 matching records come back even when 60 closer ones do not match.

        Troubleshoot: filter inside the search (pre-filtering), not by cutting the
        unfiltered top_k afterwards.
        """
        d = adapter.dimension
        q = unit(d, 1)
        near = np.stack([unit(d, 1, 0.01 * i) for i in range(60)])
        far = np.stack([unit(d, -1, 1 + i) for i in range(3)])
        ids = [f"near{i:02d}" for i in range(60)] + ["0-far", "Far", "far"]  # first characters far apart
        metas = [{"kind": "near"}] * 60 + [{"kind": "far"}] * 3
        await adapter.upsert(ids, np.concatenate([near, far]), metas)
        hits = await adapter.query(q, 3, filter={"kind": "far"})
        assert sorted(h.id for h in hits) == ["0-far", "Far", "far"]
