"""The vector differential state machine: random vector operations against the
adapter and brute-force numpy (the shared rules, delete, scan, drop, reopen
and the count invariant, are ``base.machine``'s)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from ragkit.errors import DimensionMismatchError
from ragkit.protocols.base import Capability
from ragkit.protocols.vector import matches_filter
from ragkit.testing.contracts.base.contract import difference
from ragkit.testing.contracts.base.machine import keyed_rules, run_machine
from ragkit.testing.contracts.vector.query import direction_diff, check_hits, cosines


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


class VectorMachine(keyed_rules(_IDS, absent="never", delete_max=3, scan="ids")):
    """Random vector operations against the adapter and brute-force numpy."""

    def __init__(self) -> None:
        super().__init__()
        d = self.store.dimension
        rng = np.random.default_rng(0)
        # A few base directions, used at power-of-two scales so exact ties happen.
        self.bases = rng.integers(-3, 4, size=(4, d)).astype(np.float32)
        self.bases[(self.bases == 0).all(axis=1), 0] = 1.0

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

    @rule(ids=st.lists(_IDS | st.just("never"), max_size=5))
    def get(self, ids):
        got = self.run(self.store.get(ids))
        assert len(got) == len(ids)
        for i, rec in zip(ids, got):
            if i not in self.model:
                assert rec is None, f"get: {i!r} is not stored but got {rec!r}"
                continue
            assert rec is not None and rec.id == i, f"get: {i!r} stored but got {rec!r}"
            diff = direction_diff(self.model[i][0], rec.vector) or difference(self.model[i][1], rec.metadata)
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
