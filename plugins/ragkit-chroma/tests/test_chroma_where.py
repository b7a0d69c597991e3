"""The filter -> Chroma ``where`` mapping: the table in ``ragkit_chroma._where``,
then the same filters run by Chroma itself (both modes) against
``matches_filter``, the protocol's reference semantics.

Troubleshoot: a table failure is a translation change; a backend failure
means Chroma compares typed values differently from ``matches_filter``
(booleans vs ints, ints vs floats): print the ``where`` clause and the ids.
"""

from __future__ import annotations

import numpy as np
import pytest

from ragkit.errors import InvalidValueError
from ragkit.protocols.vector import matches_filter
from ragkit_chroma._where import NO_MATCH, check_metadata, to_where  # the module under test

# Chroma 1.5 warns whenever it reads a collection made with no embedding function,
# which is exactly what ragkit wants (it always passes embeddings).
pytestmark = pytest.mark.filterwarnings("ignore:legacy embedding function config:DeprecationWarning")

TABLE = [
    ({"color": "red"}, {"color": {"$eq": "red"}}),
    ({"n": 2}, {"n": {"$eq": 2}}),
    ({"w": 0.75}, {"$and": [{"w": {"$eq": 0.75}}, {"w": {"$nin": [0, 1]}}]}),
    ({"w": -2.5}, {"$and": [{"w": {"$eq": -2.5}}, {"w": {"$nin": [-3, -2]}}]}),
    ({"w": 2.0}, {"w": {"$eq": 2.0}}),
    ({"flag": True}, {"flag": {"$eq": True}}),
    ({"n": {"$in": [1, 2]}}, {"n": {"$in": [1, 2]}}),
    ({"n": {"$in": [True]}}, {"n": {"$in": [True]}}),
    ({"n": {"$in": (3,)}}, {"n": {"$in": [3]}}),
    (
        {"n": {"$in": [1, True, "x", 2.5]}},
        {
            "$or": [
                {"n": {"$in": [True]}},
                {"$and": [{"n": {"$in": [2.5]}}, {"n": {"$nin": [2, 3]}}]},
                {"n": {"$in": [1]}},
                {"n": {"$in": ["x"]}},
            ]
        },
    ),
    (
        {"n": {"$in": [0.5, 1.0, 1.5]}},
        {"$or": [{"n": {"$in": [1.0]}}, {"$and": [{"n": {"$in": [0.5, 1.5]}}, {"n": {"$nin": [0, 1, 2]}}]}]},
    ),
    (
        {"color": "red", "n": {"$in": [0, 1]}, "flag": False},
        {"$and": [{"color": {"$eq": "red"}}, {"n": {"$in": [0, 1]}}, {"flag": {"$eq": False}}]},
    ),
    ({}, None),
    (None, None),
    ({"n": {"$in": []}}, NO_MATCH),
    ({"n": None}, NO_MATCH),
    ({"n": [1, 2]}, NO_MATCH),
    ({"n": {"$in": [None, [1]]}}, NO_MATCH),
    ({"n": float("nan")}, NO_MATCH),
    ({"n": 2**64}, NO_MATCH),
    ({"#document": "x"}, NO_MATCH),
    ({"$and": 1}, NO_MATCH),
    ({1: "x"}, NO_MATCH),  # metadata keys are strings: a number key names no field
    ({"color": "red", "n": {"$in": []}}, NO_MATCH),
    ({"n": {"$in": [1, None]}}, {"n": {"$in": [1]}}),
]


@pytest.mark.parametrize(("flt", "where"), TABLE, ids=[repr(f) for f, _ in TABLE])
def test_filter_maps_to_where(flt, where):
    """Each protocol filter becomes this ``where`` clause (or NO_MATCH / None)."""
    assert to_where(flt) == where


@pytest.mark.parametrize(
    "flt",
    [
        {"n": {"$gt": 1}},
        {"n": {"$in": 1}},
        {"n": {"$in": "abc"}},
        {"n": {}},
        {"n": {"$in": []}, "m": {"$nin": [1]}},  # malformed after a no-match still raises
        ["n", 1],
    ],
)
def test_malformed_filters_raise(flt):
    """Unknown operators, non-list ``$in`` and non-mapping filters are errors,
    as in ``matches_filter``, never silently ignored."""
    with pytest.raises(InvalidValueError):
        to_where(flt)


def test_errors_name_the_problem_and_the_fix():
    """The messages say what was wrong (the field, the key, the type) and what
    is allowed, so a caller can mend the filter or the metadata."""
    with pytest.raises(InvalidValueError, match=r"^filter must be a mapping, got list$"):
        to_where(["n", 1])
    with pytest.raises(InvalidValueError, match=r"^filter 'n': '\$in' needs a list of values$"):
        to_where({"n": {"$in": 1}})
    with pytest.raises(
        InvalidValueError,
        match=r"^metadata key '#k' cannot be stored in Chroma: keys must be non-empty "
        r"and must not start with '#', '\$' or 'chroma:'$",
    ):
        check_metadata([{"ok": 1}, {"#k": 1}])
    with pytest.raises(
        InvalidValueError,
        match=r"^metadata 'big'=18446744073709551616 cannot be stored in Chroma: integers must fit in 64 bits$",
    ):
        check_metadata([{"big": 2**64}])
    check_metadata([{"ok": 1, "s": "x", "f": 0.5, "b": True}])  # what Chroma keeps passes


def test_no_match_reads_as_its_name():
    """Failure messages print the translated clause; NO_MATCH must say what it is."""
    assert repr(NO_MATCH) == "NO_MATCH"


RECORDS = {
    "int1": {"n": 1, "tag": "a"},
    "true": {"n": True, "tag": "b"},
    "float1": {"n": 1.0},
    "int0": {"n": 0, "tag": "a"},
    "false": {"n": False},
    "str1": {"n": "1", "tag": "c"},
    "half": {"n": 0.5},
    "minus-half": {"n": -0.5},
    "minus-one": {"n": -1},
    "none": {"tag": "a"},
    "empty": {},
}
FILTERS = [
    {"n": 1},
    {"n": True},
    {"n": 1.0},
    {"n": 0},
    {"n": False},
    {"n": "1"},
    {"n": {"$in": [True]}},
    {"n": {"$in": [1]}},
    {"n": {"$in": [1, True]}},
    {"n": {"$in": [0, False, "1"]}},
    {"n": {"$in": [0.5, 1]}},
    {"n": 0.5},
    {"n": -0.5},
    {"n": {"$in": [0.5, 1.0]}},
    {"n": 1.0},
    {"tag": "a", "n": {"$in": [0, 1]}},
    {"tag": {"$in": ["a", "c"]}},
    {"missing": 1},
    {"n": {"$in": []}},
]


@pytest.mark.parametrize("flt", FILTERS, ids=[repr(f) for f in FILTERS])
async def test_chroma_agrees_with_matches_filter(make_store, mode, flt):
    """Chroma's answer to each filter equals ``matches_filter``'s: ``True`` and
    ``1`` stay apart, ``1`` and ``1.0`` match each other, a missing field never
    matches, and a fraction never matches an integer (Chroma truncates it:
    ``0.5`` would match ``0`` without the guard). Run in both modes."""
    store = await make_store(mode)
    ids = list(RECORDS)
    vectors = np.random.default_rng(0).normal(size=(len(ids), store.dimension))
    await store.upsert(ids, vectors, [RECORDS[i] for i in ids])
    hits = await store.query(vectors[0], 100, filter=flt)
    expected = {i for i, meta in RECORDS.items() if matches_filter(meta, flt)}
    assert {h.id for h in hits} == expected, f"where={to_where(flt)!r}"
