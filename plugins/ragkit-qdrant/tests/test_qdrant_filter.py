"""The filter -> Qdrant ``Filter`` mapping: the table in ``ragkit_qdrant._filter``,
then the same filters run by Qdrant's local mode against ``matches_filter``,
the protocol's reference semantics.

Troubleshoot: a table failure is a translation change; a backend failure
means Qdrant compares typed values differently from ``matches_filter``
(booleans vs ints, ints vs floats, quoted keys): print ``to_filter(flt, ws)``.
"""

from __future__ import annotations

import numpy as np
import pytest
from qdrant_client import models

from ragkit.errors import InvalidValueError
from ragkit.protocols import StoreConfig
from ragkit.protocols.vector import matches_filter
from ragkit_qdrant._filter import NO_MATCH, WORKSPACE_KEY, json_key, to_filter  # the module under test
from ragkit_qdrant.store import QdrantVectorStore


def field(key, *, value=None, any=None, eq=None):
    if any is not None:
        return models.FieldCondition(key=key, match=models.MatchAny(any=any))
    if eq is not None:
        return models.FieldCondition(key=key, range=models.Range(gte=eq, lte=eq))
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


WS = field(WORKSPACE_KEY, value="w")
TABLE = [
    (None, []),
    ({}, []),
    ({"color": "red"}, [field("color", value="red")]),
    ({"color": {"$in": ["a", "b"]}}, [field("color", any=["a", "b"])]),
    ({"flag": True}, [field("flag", value=True)]),
    ({"n": 2}, [field("n", eq=2)]),
    ({"w": 0.75}, [field("w", eq=0.75)]),
    ({"n": 2**60}, [field("n", value=2**60)]),
    ({"n": {"$in": [1, True]}}, [models.Filter(should=[field("n", eq=1), field("n", value=True)])]),
    (
        {"n": {"$in": ["x", 0.5, False, "y"]}},
        [models.Filter(should=[field("n", any=["x", "y"]), field("n", eq=0.5), field("n", value=False)])],
    ),
    ({"n": {"$in": [3, None]}}, [field("n", eq=3)]),
    ({"a.b": 1}, [field('"a.b"', eq=1)]),
    ({"with space": "x"}, [field('"with space"', value="x")]),
    ({"color": "red", "n": {"$in": [0, 1]}}, [
        field("color", value="red"),
        models.Filter(should=[field("n", eq=0), field("n", eq=1)]),
    ]),
]


@pytest.mark.parametrize(("flt", "conditions"), TABLE, ids=[repr(f) for f, _ in TABLE])
def test_filter_maps_to_qdrant_conditions(flt, conditions):
    """Each protocol filter becomes the workspace condition plus these (AND)."""
    assert to_filter(flt, "w") == models.Filter(must=[WS, *conditions])


@pytest.mark.parametrize(
    "flt",
    [{"n": {"$in": []}}, {"n": None}, {"n": [1]}, {"n": float("inf")}, {"n": 2**64},
     {'a"b': 1}, {"_ragkit_id": "x"}, {"": 1}, {"color": "red", "n": {"$in": []}}],
)
def test_filters_nothing_can_match_are_not_sent(flt):
    assert to_filter(flt, "w") is NO_MATCH


@pytest.mark.parametrize(
    "flt",
    [{"n": {"$gt": 1}}, {"n": {"$in": 1}}, {"n": {"$in": "ab"}}, {"n": {}},
     {"n": {"$in": []}, "m": {"$nin": [1]}}, ["n", 1]],
)
def test_malformed_filters_raise(flt):
    """Unknown operators, non-list ``$in`` and non-mapping filters are errors."""
    with pytest.raises(InvalidValueError):
        to_filter(flt, "w")


def test_no_match_names_itself():
    """The sentinel reads as ``NO_MATCH`` in an assertion's message and in a debugger."""
    assert repr(NO_MATCH) == "NO_MATCH"


def test_json_keys_are_quoted_when_needed():
    assert json_key("color") == "color" and json_key("a-b_c9") == "a-b_c9"
    assert json_key("a.b") == '"a.b"' and json_key("中文") == '"中文"' and json_key("x[0]") == '"x[0]"'


RECORDS = {
    "int1": {"n": 1, "tag": "a"},
    "true": {"n": True, "tag": "b"},
    "float1": {"n": 1.0},
    "int0": {"n": 0, "tag": "a"},
    "false": {"n": False},
    "str1": {"n": "1", "tag": "c"},
    "half": {"n": 0.5},
    "minus-half": {"n": -0.5},
    "big": {"n": 2**60},
    "none": {"tag": "a"},
    "dotted": {"a.b": 1, "中文": "是"},
    "nested-looking": {"a": 1},
    "empty": {},
}
FILTERS = [
    {"n": 1}, {"n": True}, {"n": 1.0}, {"n": 0}, {"n": False}, {"n": "1"}, {"n": 0.5},
    {"n": {"$in": [True]}}, {"n": {"$in": [1]}}, {"n": {"$in": [1, True]}},
    {"n": {"$in": [0, False, "1"]}}, {"n": {"$in": [0.5, 1]}}, {"n": 2**60}, {"n": 2**60 + 1},
    {"tag": "a", "n": {"$in": [0, 1]}}, {"tag": {"$in": ["a", "c"]}}, {"missing": 1},
    {"a.b": 1}, {"中文": "是"}, {"a": 1},
]


def _ascii_id(flt: object) -> str:
    """``repr`` with its non-ASCII characters as ``U+XXXX``: pytest escapes
    such ids, and an escaped id no longer selects its test in a later session
    of the same process (as mutmut's slice runs them; tests/mutation)."""
    return "".join(c if c.isascii() else f"U+{ord(c):04X}" for c in repr(flt))


@pytest.mark.parametrize("flt", FILTERS, ids=[_ascii_id(f) for f in FILTERS])
async def test_qdrant_agrees_with_matches_filter(tmp_path, flt):
    """Qdrant's answer to each filter equals ``matches_filter``'s: ``True`` and
    ``1`` stay apart, ``1`` and ``1.0`` match each other, a key with a dot is
    a key (not a nested path), a missing field never matches."""
    config = StoreConfig(namespace="chunks", workspace="w", working_dir=tmp_path,
                         options={"location": ":memory:", "collection_prefix": "filters"}, dimension=4)
    async with QdrantVectorStore(config) as store:
        ids = list(RECORDS)
        vectors = np.random.default_rng(0).normal(size=(len(ids), 4))
        await store.upsert(ids, vectors, [RECORDS[i] for i in ids])
        try:
            hits = await store.query(vectors[0], 100, filter=flt)
        finally:
            await store.drop()
    expected = {i for i, meta in RECORDS.items() if matches_filter(meta, flt)}
    assert {h.id for h in hits} == expected, f"filter={to_filter(flt, 'w')!r}"
