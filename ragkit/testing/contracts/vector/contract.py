"""``VectorStoreContract``: what every ``VectorStore`` adapter must do (see
``ragkit.protocols.vector.VectorStore`` for the normative text).

The adapter fixture's store must have ``StoreConfig.dimension >= 4`` (16 is a
good choice): the tests build their vectors in the store's own dimension.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import numpy as np
import pytest

from ragkit.errors import DimensionMismatchError, InvalidValueError
from ragkit.protocols.base import Capability
from ragkit.protocols.vector import VectorStore
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import (
    StoreContractBase,
    collect,
    contract,
    difference,
    needs,
    reopened,
    sibling,
)
from ragkit.testing.contracts.base.fencing import FencingTests
from ragkit.testing.contracts.base.lifecycle import ClosedStoreTests
from ragkit.testing.contracts.vector.edge_cases import VectorEdgeCaseTests
from ragkit.testing.contracts.vector.machine import VectorStateMachineTests
from ragkit.testing.contracts.vector.query import (
    SCORE_TOL,
    VectorFilterTests,
    VectorQueryTests,
    assert_records,
    check_hits,
    cosines,
    direction_diff,
    rand,
    unit,
)


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
        await assert_records(adapter, dict(zip("abc", zip(m, metas))), ["a", "b", "c"])

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
        await assert_records(adapter, expected, ["c", "x", "a", "c", "b"])
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
        await assert_records(
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
        await assert_records(
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
        await assert_records(adapter, {"list": (m[0], {}), "f64": (m[1], {})}, ["list", "f64"])

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

    @pytest.mark.parametrize("meta", [{"k": "a\udc00b"}, {"\ud800": 1}], ids=["value", "key"])
    @checks("vector.metadata.unicode")
    async def test_lone_surrogates_in_metadata_raise_and_write_nothing(self, adapter, meta):
        """A metadata key or str value holding a lone surrogate raises
        ``InvalidValueError`` naming it, and nothing of the batch is written.

        Troubleshoot: ``VectorStore.check_metadata`` refuses them before any write.
        """
        d = adapter.dimension
        with pytest.raises(InvalidValueError, match="lone surrogate"):
            await adapter.upsert(["a", "b"], rand(2, d, seed=6), [{"ok": "é"}, meta])
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
        await assert_records(adapter, {"kept": (good[0], {"v": 1})}, ["kept", "new"])

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
        raise ``DimensionMismatchError`` naming both dimensions and the
        configured embedder, and write nothing. ``stored_dimension`` is the
        stored dimension where it differs, ``None`` where it is the configured one.

        Troubleshoot: on open, set ``stored_dimension`` (and ``stored_embedder``
        from the store's metadata) instead of raising; the base class checks it
        before every read or write of vectors (``check_stored``).
        """
        d = adapter.dimension
        await adapter.upsert(["a", "b"], rand(2, d, seed=27))
        assert adapter.stored_dimension is None
        await adapter.close()
        other = type(adapter)(adapter.config.model_copy(update={"dimension": d + 1, "embedder": "other (x)"}))
        await other.open()
        try:
            assert await other.count() == 2 and other.stored_dimension == d
            for call in (other.upsert(["c"], rand(1, d + 1)), other.query(rand(1, d + 1)[0], 1), other.get(["a"])):
                with pytest.raises(DimensionMismatchError) as err:
                    await call
                assert f"dimension {d} made by" in str(err.value) and "other (x)" in str(err.value)
        finally:
            await other.close()
            await adapter.open()
        assert await adapter.count() == 2 and adapter.stored_dimension is None


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
        await assert_records(adapter, {i: (v, {}) for i, v in left.items()}, ids)
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
        await assert_records(adapter, {"a": (unit(d, 0, 1), {"v": 2})}, ["a"])
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
        boundaries of paged scans, starting with digits, capitals, small letters
        and non-ASCII letters) and agrees with ``count()``.

        Troubleshoot: paged scans must use a stable cursor (scroll offset / last
        id), starting below every id.
        """
        d = adapter.dimension
        ids = varied_ids("id", 1200)
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
        ids = varied_ids("r", 1200)
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
            assert direction_diff(m[n], seen[id_].vector) is None, id_
            assert difference(metas[n], seen[id_].metadata) is None, id_
        with pytest.raises(InvalidValueError):
            adapter.records(0)


def varied_ids(stem: str, n: int) -> list[str]:
    """``n`` ids whose first characters spread over the code points (a digit,
    capitals, small letters, accented and CJK letters), as real ids do: a
    paged scan whose cursor starts above some of them misses those."""
    starts = ["0", "A", "Z", "_", "a", "z", "é", "中"]
    return [f"{starts[i % len(starts)]}{stem}-{i:05d}" for i in range(n)]


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
        ids: get, query, count, ids, records, delete and drop never cross over.

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
            assert await collect(ws.ids()) == ["shared"]
            assert [(r.id, r.metadata) for page in await collect(ws.records(10)) for r in page] == [
                ("shared", {"who": "ws"})]
            await ws.delete(["shared", "mine"])
            await ns.drop()
            await assert_records(
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
        await assert_records(adapter, {i: (v, md) for i, v, md in zip(ids, m, metas)}, ids)
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
            await assert_records(again, expected, ["a", "b", "c", "中文"])
            assert await again.count() == 3
            assert (await again.query(unit(d, 1), 1))[0].id == "b"
        await assert_records(adapter, expected, ["a", "b", "c", "中文"])


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
        await assert_records(adapter, expected, sorted(expected))


@contract("vector", VectorStore)
class VectorStoreContract(
    # Collected bottom-up: upsert tests run first, the state machine last.
    VectorStateMachineTests,
    VectorEdgeCaseTests,
    FencingTests,
    ClosedStoreTests,
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
