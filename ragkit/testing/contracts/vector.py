"""``VectorStoreContract``: what every ``VectorStore`` adapter must do (see
``ragkit.protocols.vector.VectorStore`` for the normative text).

The adapter fixture's store must have ``StoreConfig.dimension >= 4`` (16 is a
good choice): the tests build their vectors in the store's own dimension.
"""

from __future__ import annotations

import asyncio
import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from ragkit.errors import DimensionMismatchError, InvalidValueError, StoreClosedError
from ragkit.protocols.base import Capability
from ragkit.protocols.vector import VectorStore, matches_filter
from ragkit.schema import VectorHit
from ragkit.testing.contracts._base import (
    AsyncStoreMachine,
    StoreContractBase,
    collect,
    contract,
    difference,
    needs,
    reopened,
    run_machine,
    sibling,
)
from ragkit.testing.contracts.edge_cases import VectorEdgeCaseTests
from ragkit.testing.contracts.fencing import FencingTests
from ragkit.testing.contracts.rules import checks

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


def _direction_diff(expected: Any, got: Sequence[float]) -> str | None:
    e = np.asarray(expected, dtype=np.float64)
    g = np.asarray(got, dtype=np.float64)
    if g.shape != e.shape:
        return f"vector has shape {g.shape}, expected {e.shape}"
    cos = float(e @ g / (np.linalg.norm(e) * np.linalg.norm(g)))
    if not cos > 1 - 1e-5:
        return f"vector read back points elsewhere (cosine {cos:.6f} to the one written)"
    return None


async def _assert_records(store: VectorStore, expected: Mapping[str, tuple[Any, dict]], asked: list[str]):
    got = await store.get(asked)
    assert len(got) == len(asked), f"get() returned {len(got)} entries for {len(asked)} ids"
    for id_, rec in zip(asked, got):
        if id_ not in expected:
            assert rec is None, f"get([{id_!r}]) should be None (not stored), got {rec!r}"
            continue
        assert rec is not None, f"get([{id_!r}]) returned None for a stored id"
        assert rec.id == id_, f"get() returned record {rec.id!r} at the position of {id_!r}"
        vec, meta = expected[id_]
        diff = _direction_diff(vec, rec.vector)
        assert diff is None, f"{id_!r}: {diff}"
        diff = difference(dict(meta), rec.metadata)
        assert diff is None, f"{id_!r} metadata: {diff}"


class VectorUpsertTests:
    @checks("vector.metadata.scalars")
    async def test_upsert_then_get_round_trips(self, adapter):
        """``get`` returns each stored vector (same direction; cosine search does
        not depend on length) and its metadata with exact types: bool stays
        bool, int stays int, float stays float.

        Troubleshoot: store metadata in typed fields (JSON), not as strings;
        keep bool and int distinct.
        """
        d = adapter.dimension
        m = rand(3, d)
        metas = [{"s": "x", "i": 1, "f": 0.25, "b": True}, {"b": False, "i": 0}, {}]
        await adapter.upsert(["a", "b", "c"], m, metas)
        await _assert_records(adapter, dict(zip("abc", zip(m, metas))), ["a", "b", "c"])

    @checks("vector.get.order")
    async def test_get_keeps_order_and_none_for_missing(self, adapter):
        """``get(ids)`` returns one entry per id, in the asked order (duplicates
        included), ``None`` where missing; ``get([])`` is ``[]``.

        Troubleshoot: index backend results by id and rebuild the list from the
        asked ids.
        """
        d = adapter.dimension
        m = rand(3, d, seed=1)
        await adapter.upsert(["a", "b", "c"], m, [{"n": i} for i in range(3)])
        expected = {k: (m[i], {"n": i}) for i, k in enumerate("abc")}
        await _assert_records(adapter, expected, ["c", "x", "a", "c", "b"])
        assert await adapter.get([]) == []

    @checks("vector.upsert.replaces")
    async def test_upsert_replaces_vector_and_metadata(self, adapter):
        """Upserting an existing id replaces its vector *and* its whole metadata
        (absent fields are gone), and queries see the new vector.

        Troubleshoot: delete-then-insert or overwrite the whole point; do not
        merge metadata payloads.
        """
        d = adapter.dimension
        await adapter.upsert(["a", "b"], [unit(d, 1), unit(d, 0, 1)], [{"x": 1, "y": 2}, {"x": 9}])
        await adapter.upsert(["a"], [unit(d, 0, 0, 1)], [{"x": 3}])
        await _assert_records(
            adapter, {"a": (unit(d, 0, 0, 1), {"x": 3}), "b": (unit(d, 0, 1), {"x": 9})}, ["a", "b"]
        )
        assert await adapter.count() == 2
        hits = await adapter.query(unit(d, 0, 0, 1), 1)
        assert [h.id for h in hits] == ["a"] and hits[0].score == pytest.approx(1, abs=SCORE_TOL)

    async def test_upsert_is_idempotent(self, adapter):
        """Upserting the same ids, vectors and metadata twice leaves the store as
        after once (same count, ids and query results).

        Troubleshoot: key points by id; an append-only insert duplicates them.
        """
        d = adapter.dimension
        m = rand(5, d, seed=2)
        ids = [f"v{i}" for i in range(5)]
        await adapter.upsert(ids, m, [{"i": i} for i in range(5)])
        await adapter.upsert(ids, m, [{"i": i} for i in range(5)])
        assert await adapter.count() == 5
        assert sorted(await collect(adapter.ids())) == ids
        hits = await adapter.query(m[0], 10)
        assert check_hits(hits, cosines(dict(zip(ids, m)), m[0]), 10) is None

    async def test_upsert_does_not_mutate_or_keep_the_input(self, adapter):
        """``upsert`` leaves the caller's array and metadata unchanged, later
        changes to them do not reach the store, and metadata returned by ``get``
        and ``query`` are copies.

        Troubleshoot: copy the array (``np.array(vectors, dtype=np.float32)``) and
        the metadata dicts; never normalise the caller's array in place.
        """
        d = adapter.dimension
        m = rand(2, d, seed=3)
        m_before = m.copy()
        metas = [{"tag": "a"}, {"tag": "b"}]
        metas_before = copy.deepcopy(metas)
        await adapter.upsert(["a", "b"], m, metas)
        assert np.array_equal(m, m_before), "upsert changed the caller's array"
        assert metas == metas_before, "upsert changed the caller's metadata"
        m[:] = 1.0
        metas[0]["tag"] = "changed"
        metas[1]["new"] = True
        (rec,) = await adapter.get(["a"])
        rec.metadata["tag"] = "mutated-read"
        hit = (await adapter.query(m_before[0], 1))[0]
        hit.metadata["tag"] = "mutated-hit"
        await _assert_records(
            adapter, {"a": (m_before[0], {"tag": "a"}), "b": (m_before[1], {"tag": "b"})}, ["a", "b"]
        )

    async def test_upsert_accepts_lists_and_float64(self, adapter):
        """Vectors may be given as lists of floats or float64 arrays, as well as
        float32 arrays.

        Troubleshoot: convert with ``np.asarray(vectors, dtype=np.float32)``
        (``VectorStore.check_matrix`` does) before handing them to the backend.
        """
        d = adapter.dimension
        m = rand(2, d, seed=4)
        await adapter.upsert(["list"], [m[0].tolist()])
        await adapter.upsert(["f64"], m[1:].astype(np.float64))
        await _assert_records(adapter, {"list": (m[0], {}), "f64": (m[1], {})}, ["list", "f64"])

    async def test_upsert_of_nothing_is_a_no_op(self, adapter):
        """``upsert([], empty (0, d) array)`` writes nothing and does not fail.

        Troubleshoot: return early on an empty batch instead of sending an empty
        request to the backend.
        """
        await adapter.upsert([], np.zeros((0, adapter.dimension), dtype=np.float32))
        assert await adapter.count() == 0

    @pytest.mark.parametrize("bad", ["nan", "inf", "zero"])
    @checks("vector.vectors.valid")
    async def test_invalid_vectors_raise_and_write_nothing(self, adapter, bad):
        """A vector with NaN, infinity, or all zeros raises ``InvalidValueError``
        and nothing of the batch is written.

        Troubleshoot: validate the whole batch first (``check_matrix``).
        """
        d = adapter.dimension
        m = rand(3, d, seed=5)
        m[1] = {"nan": np.nan, "inf": np.inf, "zero": 0.0}[bad]
        with pytest.raises(InvalidValueError):
            await adapter.upsert(["a", "b", "c"], m)
        assert await adapter.count() == 0
        assert await adapter.get(["a", "c"]) == [None, None]

    @pytest.mark.parametrize(
        "bad",
        [
            pytest.param(None, id="none"),
            pytest.param({"nested": 1}, id="dict"),
            pytest.param([1, 2], id="list"),
            pytest.param(float("nan"), id="nan"),
        ],
    )
    @checks("vector.metadata.scalars")
    async def test_invalid_metadata_raises_and_writes_nothing(self, adapter, bad):
        """Metadata values other than str, int, float and bool (or non-finite
        floats) raise ``InvalidValueError`` and nothing of the batch is written.

        Troubleshoot: validate with ``VectorStore.check_metadata`` before writing.
        """
        d = adapter.dimension
        with pytest.raises(InvalidValueError):
            await adapter.upsert(["a", "b"], rand(2, d, seed=6), [{"ok": 1}, {"bad": bad}])
        assert await adapter.count() == 0


class VectorDimensionTests:
    @pytest.mark.parametrize("delta", [1, -1])
    @checks("vector.dimension.fixed")
    async def test_upsert_of_wrong_dimension_raises_and_writes_nothing(self, adapter, delta):
        """Upserting vectors one longer or shorter than ``StoreConfig.dimension``
        raises ``DimensionMismatchError`` and writes nothing: new ids are not
        added and existing ids keep their vector.

        Troubleshoot: check ``matrix.shape[1] == self.dimension`` before any write
        (``check_matrix``); a backend that silently pads/truncates breaks this.
        """
        d = adapter.dimension
        good = rand(1, d, seed=7)
        await adapter.upsert(["kept"], good, [{"v": 1}])
        with pytest.raises(DimensionMismatchError):
            await adapter.upsert(["kept", "new"], rand(2, d + delta, seed=8), [{"v": 2}, {"v": 3}])
        assert await adapter.count() == 1
        await _assert_records(adapter, {"kept": (good[0], {"v": 1})}, ["kept", "new"])

    @pytest.mark.parametrize("delta", [1, -1])
    @checks("vector.dimension.fixed")
    async def test_query_of_wrong_dimension_raises(self, adapter, delta):
        """Querying with a vector of another length raises ``DimensionMismatchError``
        (also on an empty store), never returns silently wrong hits.

        Troubleshoot: validate with ``check_query`` before the empty-store shortcut.
        """
        d = adapter.dimension
        with pytest.raises(DimensionMismatchError):
            await adapter.query(rand(1, d + delta)[0], 5)
        await adapter.upsert(["a"], rand(1, d))
        with pytest.raises(DimensionMismatchError):
            await adapter.query(rand(1, d + delta)[0], 5)


    @needs(Capability.PERSISTENT)
    @checks("vector.dimension.lazy")
    async def test_a_store_of_another_dimension_opens_and_refuses_its_vectors(self, adapter):
        """(PERSISTENT) A new instance configured for another dimension over the
        same data opens and counts its ids; ``upsert``, ``query`` and ``get``
        raise ``DimensionMismatchError`` naming both dimensions, and write nothing.

        Troubleshoot: on open, set ``stored_dimension`` (and ``stored_embedder``
        from the store's metadata) instead of raising; the base class checks it
        before every read or write of vectors (``check_stored``).
        """
        d = adapter.dimension
        await adapter.upsert(["a", "b"], rand(2, d, seed=27))
        await adapter.close()
        other = type(adapter)(adapter.config.model_copy(update={"dimension": d + 1, "embedder": "other (x)"}))
        await other.open()
        try:
            assert await other.count() == 2
            for call in (other.upsert(["c"], rand(1, d + 1)), other.query(rand(1, d + 1)[0], 1), other.get(["a"])):
                with pytest.raises(DimensionMismatchError) as err:
                    await call
                assert f"dimension {d} made by" in str(err.value) and "other (x)" in str(err.value)
        finally:
            await other.close()
            await adapter.open()
        assert await adapter.count() == 2


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
        ids = [f"near{i:02d}" for i in range(60)] + ["far0", "far1", "far2"]
        metas = [{"kind": "near"}] * 60 + [{"kind": "far"}] * 3
        await adapter.upsert(ids, np.concatenate([near, far]), metas)
        hits = await adapter.query(q, 3, filter={"kind": "far"})
        assert sorted(h.id for h in hits) == ["far0", "far1", "far2"]


class VectorDeleteTests:
    async def test_delete_removes_from_get_query_and_count(self, adapter):
        """Deleted ids are gone from ``get``, ``query``, ``ids()`` and ``count()``;
        the others are untouched.

        Troubleshoot: delete from the index too, not only from the payload store.
        """
        d = adapter.dimension
        m = rand(5, d, seed=19)
        ids = [f"v{i}" for i in range(5)]
        await adapter.upsert(ids, m)
        await adapter.delete(["v1", "v3"])
        left = {i: v for i, v in zip(ids, m) if i not in ("v1", "v3")}
        assert await adapter.count() == 3
        assert sorted(await collect(adapter.ids())) == sorted(left)
        await _assert_records(adapter, {i: (v, {}) for i, v in left.items()}, ids)
        hits = await adapter.query(m[1], 10)
        assert check_hits(hits, cosines(left, m[1]), 10) is None

    @checks("store.delete.missing-ok")
    async def test_delete_missing_ids_is_not_an_error(self, adapter):
        """Deleting ids that are not stored (alone, mixed, repeated, on an empty
        store, or an empty list) does not raise.

        Troubleshoot: ignore "not found" from the backend.
        """
        d = adapter.dimension
        await adapter.delete(["never"])
        await adapter.delete([])
        await adapter.upsert(["a", "b"], rand(2, d, seed=20))
        await adapter.delete(["a", "never", "a"])
        assert sorted(await collect(adapter.ids())) == ["b"]

    async def test_delete_then_reinsert(self, adapter):
        """A deleted id can be upserted again with a new vector and metadata.

        Troubleshoot: tombstones must not shadow a later insert.
        """
        d = adapter.dimension
        await adapter.upsert(["a"], [unit(d, 1)], [{"v": 1}])
        await adapter.delete(["a"])
        await adapter.upsert(["a"], [unit(d, 0, 1)], [{"v": 2}])
        await _assert_records(adapter, {"a": (unit(d, 0, 1), {"v": 2})}, ["a"])
        assert [h.id for h in await adapter.query(unit(d, 0, 1), 5)] == ["a"]


class VectorCountAndIdsTests:
    async def test_count_after_every_mutation(self, adapter):
        """``count()`` is right after inserts, replaces, deletes of present and
        missing ids, and drop.

        Troubleshoot: count live points; do not count replaces as inserts.
        """
        d = adapter.dimension
        m = rand(4, d, seed=21)
        assert await adapter.count() == 0
        await adapter.upsert(["a", "b"], m[:2])
        assert await adapter.count() == 2
        await adapter.upsert(["b", "c"], m[2:])
        assert await adapter.count() == 3
        await adapter.delete(["a", "zz"])
        assert await adapter.count() == 2
        await adapter.delete(["a"])
        assert await adapter.count() == 2
        await adapter.drop()
        assert await adapter.count() == 0

    @checks("vector.ids.once")
    async def test_ids_yields_every_id_once(self, adapter):
        """``ids()`` yields each stored id exactly once (1200 ids, to cross page
        boundaries of paged scans) and agrees with ``count()``.

        Troubleshoot: paged scans must use a stable cursor (scroll offset / last id).
        """
        d = adapter.dimension
        ids = [f"id-{i:05d}" for i in range(1200)]
        await adapter.upsert(ids, rand(1200, d, seed=22))
        got = await collect(adapter.ids())
        assert len(got) == len(set(got)), "ids() yielded duplicates"
        assert set(got) == set(ids)
        assert await adapter.count() == 1200


    @checks("vector.records.pages")
    async def test_records_yield_every_vector_once_in_pages(self, adapter):
        """``records(batch)`` yields each stored id once (1200 ids, past page
        sizes), with the vector (its direction) and metadata ``get`` gives, in
        non-empty pages of at most ``batch``; a batch below 1 is refused.

        Troubleshoot: override ``_records`` with the ids scan's own cursor
        (scroll offset / last id), asking the backend for vectors and metadata.
        """
        d = adapter.dimension
        ids = [f"r-{i:05d}" for i in range(1200)]
        m = rand(1200, d, seed=23)
        metas = [{"i": i, "odd": bool(i % 2)} for i in range(1200)]
        await adapter.upsert(ids, m, metas)
        seen: dict[str, Any] = {}
        async for page in adapter.records(100):
            assert 0 < len(page) <= 100, f"records(100) yielded a page of {len(page)}"
            for rec in page:
                assert rec.id not in seen, f"records() yielded {rec.id!r} twice"
                seen[rec.id] = rec
        assert set(seen) == set(ids)
        for n, id_ in enumerate(ids):
            assert _direction_diff(m[n], seen[id_].vector) is None, id_
            assert difference(metas[n], seen[id_].metadata) is None, id_
        with pytest.raises(InvalidValueError):
            adapter.records(0)


class VectorDropAndIsolationTests:
    @checks("store.drop.scoped")
    async def test_drop_empties_and_keeps_the_store_open(self, adapter):
        """``drop()`` removes every vector and leaves the store open and usable
        with the same dimension.

        Troubleshoot: recreate the collection/index after deleting it in drop().
        """
        d = adapter.dimension
        await adapter.upsert(["a", "b"], rand(2, d, seed=23))
        await adapter.drop()
        assert await adapter.count() == 0
        assert await adapter.query(unit(d, 1), 5) == []
        await adapter.upsert(["c"], [unit(d, 1)])
        assert [h.id for h in await adapter.query(unit(d, 1), 5)] == ["c"]

    @checks("store.drop.scoped")
    async def test_workspaces_and_namespaces_are_isolated(self, adapter):
        """Other workspaces and namespaces hold independent vectors under the same
        ids: get, query, count, ids, delete and drop never cross over.

        Troubleshoot: one collection per (workspace, namespace), or a workspace
        and namespace filter on every operation (queries included).
        """
        d = adapter.dimension
        async with sibling(adapter, workspace=True) as ws, sibling(adapter, namespace=True) as ns:
            await adapter.upsert(["shared", "mine"], [unit(d, 1), unit(d, 0, 1)], [{"who": "me"}, {}])
            await ws.upsert(["shared"], [unit(d, 0, 0, 1)], [{"who": "ws"}])
            await ns.upsert(["shared", "x"], [unit(d, -1), unit(d, 1)], [{"who": "ns"}, {}])
            assert (await adapter.count(), await ws.count(), await ns.count()) == (2, 1, 2)
            assert [h.id for h in await ws.query(unit(d, 1), 10)] == ["shared"]
            assert sorted(await collect(ns.ids())) == ["shared", "x"]
            await ws.delete(["shared", "mine"])
            await ns.drop()
            await _assert_records(
                adapter, {"shared": (unit(d, 1), {"who": "me"}), "mine": (unit(d, 0, 1), {})}, ["shared", "mine"]
            )

    @checks("vector.metadata.scalars")
    async def test_unicode_ids_and_metadata(self, adapter):
        """Ids and metadata strings with CJK, emoji, quotes and spaces round-trip
        through get, query, ids and delete.

        Troubleshoot: backends with UUID/integer point ids must map ids (e.g. a
        UUID5 of the id) and store the original id in the payload.
        """
        d = adapter.dimension
        ids = ["中文", "🙂emoji", "q'\"`{}", "with space", "ключ"]
        metas = [{"text": f"{i} 汉字 🚀"} for i in ids]
        m = rand(len(ids), d, seed=24)
        await adapter.upsert(ids, m, metas)
        await _assert_records(adapter, {i: (v, md) for i, v, md in zip(ids, m, metas)}, ids)
        assert set(await collect(adapter.ids())) == set(ids)
        hits = await adapter.query(m[1], 2)
        assert hits[0].id == "🙂emoji" and hits[0].metadata == metas[1]
        await adapter.delete(["中文"])
        assert await adapter.get(["中文"]) == [None]

    @checks("store.batch.large")
    async def test_large_batches(self, adapter):
        """A single upsert of 5000 vectors with metadata works, and every one is
        then counted and searchable.

        Troubleshoot: split large batches below the backend's request limit inside
        ``upsert``; callers do not batch for you.
        """
        d = adapter.dimension
        n = 5000
        m = rand(n, d, seed=25)
        ids = [f"big-{i:05d}" for i in range(n)]
        await adapter.upsert(ids, m, [{"i": i} for i in range(n)])
        assert await adapter.count() == n
        for i in (0, 2500, 4999):
            hits = await adapter.query(m[i], 1)
            assert [h.id for h in hits] == [ids[i]] and hits[0].metadata == {"i": i}


class VectorLifecycleTests:
    @checks("store.closed.raises")
    async def test_closed_store_raises_store_closed_error(self, adapter):
        """Using a store before ``open()`` or after ``close()`` raises
        ``StoreClosedError``; ``async with`` opens and closes it; a closed store
        opens again (and two instances are never open at once here).

        Troubleshoot: the protocol's public methods check this; a store that
        fails here replaces one (``@bypass_template``) without ``self._check_open()``
        first, or its ``_open``/``_close`` hooks leave a connection half made.
        """
        d = adapter.dimension
        never_opened = type(adapter)(adapter.config)
        with pytest.raises(StoreClosedError):
            await never_opened.query(unit(d, 1), 1)
        with pytest.raises(StoreClosedError):
            await never_opened.upsert(["a"], [unit(d, 1)])
        await adapter.close()
        assert not adapter.is_open
        with pytest.raises(StoreClosedError):
            await adapter.get(["a"])
        with pytest.raises(StoreClosedError):
            await collect(adapter.ids())
        async with type(adapter)(adapter.config) as opened:
            assert opened.is_open
            await opened.upsert(["a"], [unit(d, 1)])
            await opened.drop()
        assert not opened.is_open
        with pytest.raises(StoreClosedError):
            await opened.count()
        await adapter.open()
        assert adapter.is_open and await adapter.count() == 0

    @needs(Capability.PERSISTENT)
    @checks("store.close.durable")
    async def test_data_survives_close_and_reopen(self, adapter):
        """(PERSISTENT) Vectors, metadata, replacements and deletes made before
        ``close()`` are seen by a new instance over the same config (get, query,
        count), and by the first instance reopened.

        Troubleshoot: ``close()`` must flush (write snapshots, commit); ``open()``
        must load what exists instead of recreating an empty collection.
        """
        d = adapter.dimension
        m = rand(4, d, seed=26)
        await adapter.upsert(["a", "b", "c", "中文"], m, [{"v": 1}, {"v": 2}, {"v": 3}, {"t": "🙂"}])
        await adapter.upsert(["b"], [unit(d, 1)], [{"v": 20}])
        await adapter.delete(["c"])
        expected = {"a": (m[0], {"v": 1}), "b": (unit(d, 1), {"v": 20}), "中文": (m[3], {"t": "🙂"})}
        async with reopened(adapter) as again:
            await _assert_records(again, expected, ["a", "b", "c", "中文"])
            assert await again.count() == 3
            assert (await again.query(unit(d, 1), 1))[0].id == "b"
        await _assert_records(adapter, expected, ["a", "b", "c", "中文"])


class VectorConcurrencyTests:
    @needs(Capability.CONCURRENT_WRITES)
    async def test_concurrent_writers_lose_no_updates(self, adapter):
        """(CONCURRENT_WRITES) 40 asyncio tasks upserting, replacing and deleting
        at once lose no update: the count, ids and the final vector of every id
        are exact.

        Troubleshoot: a read-modify-write of shared state across an ``await``
        (a snapshot copied, changed, and assigned back) loses updates; hold a
        lock or make each write atomic in the backend.
        """
        d = adapter.dimension

        async def writer(t: int) -> None:
            for i in range(8):
                key = f"t{t:02d}-{i}"
                await adapter.upsert([key], [unit(d, 1, t + 1)], [{"v": 0}])
                await asyncio.sleep(0)
                await adapter.upsert([key], [unit(d, 0, 1, i + 1)], [{"v": 1}])
                if i % 3 == 0:
                    await adapter.delete([key])

        await asyncio.gather(*(writer(t) for t in range(40)))
        expected = {
            f"t{t:02d}-{i}": (unit(d, 0, 1, i + 1), {"v": 1})
            for t in range(40) for i in range(8) if i % 3
        }
        assert await adapter.count() == len(expected)
        assert set(await collect(adapter.ids())) == set(expected)
        await _assert_records(adapter, expected, sorted(expected))


# -- differential state machine ------------------------------------------------------

# Confusables too ([store.keys.exact]): case, NFC/NFD, final sigma.
_ID_POOL = ["a", "b", "B", "c", "中文", "🙂", "q'\"", "\u00e9", "e\u0301", "\u03c3", "\u03c2"]
_IDS = st.sampled_from(_ID_POOL)
_META = st.fixed_dictionaries(
    {},
    optional={
        "color": st.sampled_from(["red", "blue", "绿"]),
        "n": st.integers(0, 2) | st.sampled_from(["1", "2"]),  # [vector.filter.types]
        "flag": st.booleans(),
        "x": st.sampled_from([0.5, -1.25, 3.0, 3]),
    },
)
_FILTER_VALUES = {
    "color": ["red", "blue", "绿", "none"],
    "n": [0, 1, 2, True, "1", 1.0],
    "flag": [True, False],
    "x": [0.5, 3.0, 3, "3"],
}


@st.composite
def _filters(draw):
    fields = draw(st.lists(st.sampled_from(sorted(_FILTER_VALUES)), min_size=1, max_size=2, unique=True))
    out: dict[str, Any] = {}
    for f in fields:
        values = _FILTER_VALUES[f]
        if draw(st.booleans()):
            out[f] = draw(st.sampled_from(values))
        else:
            out[f] = {"$in": draw(st.lists(st.sampled_from(values), max_size=3, unique=True))}
    return out


@st.composite
def _vectors(draw, bases: np.ndarray, d: int) -> np.ndarray:
    if draw(st.booleans()):
        base = bases[draw(st.integers(0, len(bases) - 1))]
        return base * np.float32(draw(st.sampled_from([0.25, 1.0, 2.0, 8.0])))
    v = np.array(draw(st.lists(st.integers(-3, 3), min_size=d, max_size=d)), dtype=np.float32)
    if not v.any():
        v[0] = 1.0
    return v


class VectorMachine(AsyncStoreMachine):
    """Random vector operations against the adapter and brute-force numpy."""

    def __init__(self) -> None:
        super().__init__()
        d = self.store.dimension
        rng = np.random.default_rng(0)
        # A few base directions, used at power-of-two scales so exact ties happen.
        self.bases = rng.integers(-3, 4, size=(4, d)).astype(np.float32)
        self.bases[(self.bases == 0).all(axis=1), 0] = 1.0
        self.model: dict[str, tuple[np.ndarray, dict[str, Any]]] = {}

    def _draw_vector(self, data) -> np.ndarray:
        return data.draw(_vectors(self.bases, self.store.dimension))

    @initialize(data=st.data(), ids=st.lists(_IDS, min_size=2, max_size=5, unique=True))
    def seed(self, data, ids):
        self.upsert(data, ids)  # start every example with data

    @rule(data=st.data(), ids=st.lists(_IDS, min_size=1, max_size=3, unique=True))
    def upsert(self, data, ids):
        vectors = np.stack([self._draw_vector(data) for _ in ids])
        metas = [data.draw(_META) for _ in ids]
        self.run(self.store.upsert(ids, vectors, metas))
        for i, v, m in zip(ids, vectors, metas):
            self.model[i] = (v.copy(), dict(m))

    @rule(ids=st.lists(_IDS, min_size=1, max_size=2, unique=True), delta=st.sampled_from([-1, 1]))
    def upsert_wrong_dimension(self, ids, delta):
        d = self.store.dimension + delta
        with pytest.raises(DimensionMismatchError):
            self.run(self.store.upsert(ids, np.ones((len(ids), d), dtype=np.float32)))

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def delete_existing(self, data):
        self.delete([data.draw(st.sampled_from(sorted(self.model)), label="existing id"), "never"])

    @rule(ids=st.lists(_IDS | st.just("never"), max_size=3))
    def delete(self, ids):
        self.run(self.store.delete(ids))
        for i in ids:
            self.model.pop(i, None)

    @rule(ids=st.lists(_IDS | st.just("never"), max_size=5))
    def get(self, ids):
        got = self.run(self.store.get(ids))
        assert len(got) == len(ids)
        for i, rec in zip(ids, got):
            if i not in self.model:
                assert rec is None, f"get: {i!r} is not stored but got {rec!r}"
                continue
            assert rec is not None and rec.id == i, f"get: {i!r} stored but got {rec!r}"
            diff = _direction_diff(self.model[i][0], rec.vector) or difference(self.model[i][1], rec.metadata)
            assert diff is None, f"get {i!r}: {diff}"

    @rule(
        data=st.data(),
        top_k=st.integers(1, 10),
        min_score=st.sampled_from([None, None, -0.5, 0.0, 0.5, 0.9]),
    )
    def query(self, data, top_k, min_score):
        q = self._draw_vector(data)
        flt = None
        if Capability.METADATA_FILTER in self.caps and data.draw(st.booleans()):
            flt = data.draw(_filters())
        eligible = {i: v for i, (v, m) in self.model.items() if matches_filter(m, flt)}
        hits = self.run(self.store.query(q, top_k, filter=flt, min_score=min_score))
        problem = check_hits(
            hits, cosines(eligible, q), top_k, min_score=min_score,
            metadata={i: m for i, (_, m) in self.model.items()},
        )
        assert problem is None, f"query(top_k={top_k}, filter={flt!r}, min_score={min_score}): {problem}"

    @rule()
    def scan_ids(self):
        ids = self.run(collect(self.store.ids()))
        assert len(ids) == len(set(ids)), f"ids() repeated an id: {ids}"
        assert set(ids) == set(self.model)

    @precondition(lambda self: len(self.model) > 2)
    @rule()
    def drop(self):
        self.run(self.store.drop())
        self.model.clear()

    @precondition(lambda self: self.may_reopen(bool(self.model)))
    @rule()
    def reopen(self):
        self.reopen_store()

    @invariant()
    def count_matches(self):
        assert self.run(self.store.count()) == len(self.model)


class VectorStateMachineTests:
    def test_differential_state_machine(self, adapter):
        """Random sequences of upsert (including wrong-dimension batches), delete,
        get, query (top_k, min_score, and filters if METADATA_FILTER), ids, drop
        and (if PERSISTENT) close/reopen agree with numpy brute force; count is
        compared after every step. Vectors include power-of-two multiples of a
        few directions, so exact ties (id order) come up often.

        Troubleshoot: hypothesis prints the shortest failing step sequence;
        replay it against the adapter. Ranking messages name the two ids and
        their true cosines.
        """
        run_machine(VectorMachine, adapter)


@contract("vector", VectorStore)
class VectorStoreContract(
    # Collected bottom-up: upsert tests run first, the state machine last.
    VectorStateMachineTests,
    VectorEdgeCaseTests,
    FencingTests,
    VectorConcurrencyTests,
    VectorLifecycleTests,
    VectorDropAndIsolationTests,
    VectorCountAndIdsTests,
    VectorDeleteTests,
    VectorFilterTests,
    VectorQueryTests,
    VectorDimensionTests,
    VectorUpsertTests,
    StoreContractBase,
):
    """The vector-store contract. Subclass it and override one fixture that
    yields a fresh, empty, opened store with ``dimension`` >= 4 (16 is good)::

        class TestMyVectors(VectorStoreContract):
            @pytest.fixture
            async def adapter(self, tmp_path):
                config = StoreConfig(namespace="contract", working_dir=tmp_path, dimension=16)
                async with MyVectorStore(config) as store:
                    yield store
                    await store.drop()
    """

    async def describe_contents(self, store: VectorStore) -> str:
        if store.config.dimension is None or store.dimension < 4:
            pytest.fail(
                f"the adapter fixture's store has dimension {store.config.dimension}; the "
                "vector contract needs StoreConfig(dimension=...) >= 4 (use 16)"
            )
        n = await store.count()
        ids = await collect(store.ids())
        if n == 0 and not ids:
            return ""
        return f"count()={n}, ids()={sorted(ids)[:5]!r}{'...' if len(ids) > 5 else ''}"

    async def test_zzz_store_is_still_empty(self, adapter):
        """Canary, runs last: after every other test, the store handed out is
        still empty, also as seen by a second instance over the same config.

        Troubleshoot: some test's vectors outlived its fixture: drop the store
        in the fixture's teardown (a shared server collection keeps data).
        """
        await self.assert_still_empty(adapter)
