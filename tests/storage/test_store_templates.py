"""The store base classes enforce their own rules (template methods).

Each public method of a store protocol checks the store is open and validates
its arguments once, then calls the adapter's hook (``upsert`` -> ``_upsert``).
These tests show that the rules hold without the adapter's help: a class that
overrides a public method fails at creation naming the hook to implement; a
minimal adapter that only stores what it is handed never sees a closed-store
call nor an invalid argument; and no first-party adapter checks openness
itself or replaces a public method.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragkit.errors import InvalidValueError, StoreClosedError
from ragkit.plugins import get_registry
from ragkit.plugins.registry import STORE_KINDS
from ragkit.protocols import (
    BaseStore,
    DocStatusStore,
    GraphStore,
    KVStore,
    StoreConfig,
    VectorStore,
    bypass_template,
)
from ragkit.protocols.vector import search_past_ties
from ragkit.schema import VectorHit
from ragkit.storage import NetworkXGraphStore, NumpyVectorStore, SQLiteKVStore
from ragkit.testing.store_files import journaled_file

PROTOCOLS = {"kv": KVStore, "vector": VectorStore, "graph": GraphStore, "doc_status": DocStatusStore}


def public_methods(protocol: type) -> list[str]:
    """The protocol's final public methods (those marked as templates)."""
    return sorted(
        name
        for klass in protocol.__mro__
        for name, value in vars(klass).items()
        if getattr(value, "__ragkit_hook__", None)
    )


# -- overriding a public method fails at class creation --------------------------------------


def test_overriding_a_public_method_names_the_hook_to_implement():
    with pytest.raises(TypeError, match=r"BadKV overrides upsert\(\).*implement _upsert instead"):

        class BadKV(SQLiteKVStore):
            async def upsert(self, records):
                await super().upsert(records)


def test_overriding_a_derived_method_names_the_hook_it_rests_on():
    with pytest.raises(TypeError, match=r"overrides get\(\).*implement _get_many instead"):

        class BadKV(SQLiteKVStore):
            async def get(self, key):
                return None


def test_overriding_the_lifecycle_names_its_hook():
    with pytest.raises(TypeError, match=r"overrides open\(\).*implement _open instead"):

        class BadGraph(NetworkXGraphStore):
            async def open(self):
                pass


def test_a_mixin_placed_before_the_protocol_is_caught_too():
    class Faster:
        async def query(self, vector, top_k, **kwargs):
            return []

    with pytest.raises(TypeError, match=r"Faster overrides query\(\).*implement _query instead"):

        class BadVectors(Faster, NumpyVectorStore):
            pass


def test_bypass_template_is_the_documented_escape_hatch(tmp_path):
    class CountingKV(SQLiteKVStore):
        calls = 0

        @bypass_template("counts every call, for this test")
        async def count(self) -> int:
            CountingKV.calls += 1
            self._check_open()
            return await self._count()

    async def run() -> int:
        async with CountingKV(StoreConfig(namespace="ns", working_dir=tmp_path)) as kv:
            await kv.upsert({"a": {}})
            return await kv.count()

    assert asyncio.run(run()) == 1 and CountingKV.calls == 1
    with pytest.raises(ValueError, match="needs a reason"):
        bypass_template(" ")


def test_a_missing_hook_is_an_abstract_method():
    class NoDropKV(KVStore):
        async def _get_many(self, keys):
            return {}

        async def _upsert(self, records):
            pass

        async def _delete(self, keys):
            pass

        async def _count(self):
            return 0

        async def _keys(self):
            yield ""

    with pytest.raises(TypeError, match="_drop"):
        NoDropKV(StoreConfig(namespace="ns"))


# -- the base class checks; the hooks only move data -----------------------------------------


class RecordingKV(KVStore):
    """A KV adapter with no checks of its own: it records what reaches its hooks."""

    def __init__(self, config: StoreConfig) -> None:
        super().__init__(config)
        self.data: dict[str, str] = {}
        self.seen: list[tuple[str, object]] = []

    async def _get_many(self, keys):
        self.seen.append(("_get_many", keys))
        return {k: self.data[k] for k in keys if k in self.data}

    async def _upsert(self, records):
        self.seen.append(("_upsert", records))
        self.data.update(records)

    async def _delete(self, keys):
        self.seen.append(("_delete", keys))
        for k in keys:
            self.data.pop(k, None)

    async def _count(self):
        self.seen.append(("_count", None))
        return len(self.data)

    async def _keys(self) -> AsyncIterator[str]:
        for k in list(self.data):
            yield k

    async def _drop(self):
        self.seen.append(("_drop", None))
        self.data.clear()


async def test_hooks_never_run_on_a_closed_store():
    kv = RecordingKV(StoreConfig(namespace="ns"))
    calls = [
        kv.get_many(["a"]), kv.upsert({"a": {}}), kv.delete(["a"]), kv.count(), kv.drop(),
        kv.flush(), kv.get("a"), kv.missing(["a"]),
    ]
    for call in calls:
        with pytest.raises(StoreClosedError, match="is not open"):
            await call
    with pytest.raises(StoreClosedError):
        kv.keys()
    assert kv.seen == []


async def test_arguments_reach_the_hooks_validated_and_normalised():
    async with RecordingKV(StoreConfig(namespace="ns")) as kv:
        with pytest.raises(InvalidValueError):
            await kv.upsert({"ok": {"v": 1}, "bad": {"v": float("nan")}})
        await kv.upsert({})
        await kv.delete([])
        await kv.delete([None, "", "lone \ud800"])  # keys that cannot exist: nothing to do
        assert kv.seen == []  # nothing invalid or empty reached a hook

        await kv.upsert({"a": {"v": [1]}})
        assert kv.seen[-1] == ("_upsert", {"a": '{"v": [1]}'})  # JSON text, encoded once
        got = await kv.get_many(["a", "a", 7, "zz"])
        assert kv.seen[-1] == ("_get_many", ["a", "zz"])  # distinct storable keys
        assert got == [{"v": [1]}, {"v": [1]}, None, None] and got[0] is not got[1]
        await kv.delete("a")  # one key, not its letters
        assert kv.seen[-1] == ("_delete", ["a"])


async def test_a_scan_outliving_close_raises_store_closed(tmp_path):
    kv = SQLiteKVStore(StoreConfig(namespace="ns", working_dir=tmp_path))
    await kv.open()
    await kv.upsert({"a": {}, "b": {}})
    keys = kv.keys()
    assert await anext(keys) == "a"
    await kv.close()
    with pytest.raises(StoreClosedError):
        await anext(keys)


# -- first-party adapters implement hooks only ------------------------------------------------


def store_adapters() -> list[type]:
    registry = get_registry()
    return [info.cls for kind in STORE_KINDS for info in registry.adapters(kind)]


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_registered_store_adapters_keep_the_protocols_public_methods(kind):
    """Every registered store adapter resolves each public method to the
    protocol's own definition: none is replaced, with or without the escape hatch."""
    protocol = PROTOCOLS[kind]
    for info in get_registry().adapters(kind):
        for name in public_methods(protocol):
            owner = next(k for k in info.cls.__mro__ if name in vars(k))
            assert owner in protocol.__mro__, f"{info.cls.__name__}.{name} is defined by {owner}"


def test_no_first_party_store_adapter_checks_openness_itself():
    for cls in store_adapters():
        for klass in cls.__mro__:
            if klass.__module__.startswith("ragkit.protocols") or klass in (object,):
                continue
            source = inspect.getsource(inspect.getmodule(klass))
            assert "_check_open" not in source, f"{klass.__module__} calls _check_open by hand"


# -- the shared search of approximate stores ---------------------------------------------------


def best_n(scores: list[float], asked: list[int]):
    """A backend search returning the best ``n`` of ``scores`` in its own
    order (ids by position), recording each ``n`` it is asked for."""

    async def search(n: int) -> list[VectorHit]:
        asked.append(n)
        return [VectorHit(id=f"x{i:03d}", score=s) for i, s in enumerate(scores[:n])]

    return search


async def test_search_past_ties_fetches_until_no_candidate_can_tie():
    """A backend returning the best n by its own order: ties at the cut make
    it ask again for twice as many, so ``rank_hits`` can break them by id."""
    asked: list[int] = []
    search = best_n([0.9, 0.5] + [0.5] * 30 + [0.1] * 10, asked)
    hits = await search_past_ties(search, top_k=2, min_score=None)
    assert asked == [12, 24, 48] and len(hits) == 42
    asked.clear()
    assert len(await search_past_ties(search, top_k=2, min_score=0.6)) == 1 and asked == [12]


@pytest.mark.parametrize("top_k", [10, 40])
async def test_search_past_ties_asks_once_when_the_tie_at_the_cut_is_as_deep_as_top_k(top_k: int):
    """The margin grows with ``top_k``, as tie groups do: a group of ``top_k``
    equal scores around the k-th hit costs one request at any ``top_k``
    (issue 28: round trips per query constant in ``top_k``)."""
    half = top_k // 2
    asked: list[int] = []
    search = best_n([1.0 - i / 1000 for i in range(top_k - half)] + [0.25] * top_k + [0.1] * (3 * top_k), asked)
    hits = await search_past_ties(search, top_k=top_k, min_score=None)
    assert asked == [2 * top_k + 8] and hits[top_k - 1].score == 0.25


# -- loop-bound state is made at open() -----------------------------------------------------


def test_journal_lock_is_made_by_open_on_each_sessions_loop(tmp_path: Path):
    """The embedded stores' save lock belongs to the event loop that opened
    them: two sessions on two loops each open, write, flush and close."""
    store = NumpyVectorStore(StoreConfig(namespace="v", working_dir=tmp_path, dimension=4))
    assert journaled_file(store).lock is None  # nothing loop-bound before open()

    async def session(n: int) -> int:
        await store.open()
        await store.upsert([f"id{n}"], [[1.0, 0.0, float(n), 1.0]])
        await store.flush()
        count = await store.count()
        await store.close()
        return count

    assert asyncio.run(session(1)) == 1
    assert asyncio.run(session(2)) == 2
