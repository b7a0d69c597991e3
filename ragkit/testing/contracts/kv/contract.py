"""``KVStoreContract``: what every ``KVStore`` adapter must do (see
``ragkit.protocols.kv.KVStore`` for the normative text)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from ragkit.errors import InvalidValueError
from ragkit.protocols.base import Capability
from ragkit.protocols.kv import KVStore
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
from ragkit.testing.contracts.kv.edge_cases import KVEdgeCaseTests
from ragkit.testing.contracts.kv.machine import KVStateMachineTests
from ragkit.testing.contracts.kv.text import KVTextSearchTests

UNICODE_KEYS = ["中文键", "日本語のキー", "🔑🙂", "ключ", "مفتاح", "e\u0301", "q'\"`{}[]\\/ sp"]


def _doc(i: int) -> dict[str, Any]:
    return {"i": i, "text": f"record {i}", "tags": [i, str(i)], "nested": {"ok": i % 2 == 0}}


async def _check(store: KVStore, expected: dict[str, dict[str, Any]], asked: list[str]) -> None:
    got = await store.get_many(asked)
    want = [expected.get(k) for k in asked]
    diff = difference(want, got)
    assert diff is None, f"get_many({asked!r}) differs from what was written: {diff}"


class KVGetManyTests:
    @checks("kv.get-many.order")
    async def test_get_many_keeps_order_duplicates_and_none(self, adapter):
        """``get_many`` returns one entry per asked key, in the asked order,
        duplicates included, ``None`` where the key is missing.

        Troubleshoot: a backend batch read (``IN (...)``, ``mget``) returns rows in
        storage order and once per key; index the rows by key and rebuild the list
        from the asked keys.
        """
        await adapter.upsert({"a": _doc(1), "b": _doc(2), "c": _doc(3)})
        asked = ["c", "missing", "a", "c", "b", "a", "also-missing"]
        await _check(adapter, {"a": _doc(1), "b": _doc(2), "c": _doc(3)}, asked)

    async def test_get_many_of_nothing_is_empty(self, adapter):
        """``get_many([])`` returns ``[]`` (and does not fail) on empty and full stores.

        Troubleshoot: guard against an empty ``IN ()`` clause or an empty ``mget``.
        """
        assert await adapter.get_many([]) == []
        await adapter.upsert({"a": _doc(1)})
        assert await adapter.get_many([]) == []

    async def test_get_single_key(self, adapter):
        """``get(key)`` returns the record, or ``None`` for a missing key.

        Troubleshoot: ``get`` is defined on top of ``get_many``; if you override
        it, keep returning ``None`` (not raising ``KeyError``) for missing keys.
        """
        await adapter.upsert({"a": _doc(1)})
        assert difference(_doc(1), await adapter.get("a")) is None
        assert await adapter.get("nope") is None

    @checks("kv.copies")
    async def test_returned_records_are_copies(self, adapter):
        """Mutating a returned record (top level or nested) does not change the
        store, and a key asked twice gives two independent dicts.

        Troubleshoot: in-memory adapters must copy (or re-decode) stored values
        on every read instead of handing out the stored dict.
        """
        await adapter.upsert({"a": _doc(1)})
        first, second = await adapter.get_many(["a", "a"])
        assert first is not second, "a key asked twice returned the same dict object"
        first["new"] = "field"
        first["tags"].append("changed")
        first["nested"]["ok"] = "changed"
        assert difference(_doc(1), second) is None, "the two returned dicts share state"
        assert difference(_doc(1), await adapter.get("a")) is None, "mutating a read changed the store"

    @checks("kv.missing")
    async def test_missing_reports_absent_keys(self, adapter):
        """``missing(keys)`` is exactly the set of asked keys that are not stored.

        Troubleshoot: ``missing`` is derived from ``get_many``; check that
        ``get_many`` returns ``None`` only for absent keys (and a record for
        stored keys whose value is an empty dict).
        """
        await adapter.upsert({"a": _doc(1), "empty": {}})
        assert await adapter.missing(["a", "x", "empty", "y", "x"]) == {"x", "y"}
        assert await adapter.missing([]) == set()
        assert difference({}, await adapter.get("empty")) is None, "an empty dict must round-trip as {}"


class KVUpsertTests:
    async def test_upsert_inserts(self, adapter):
        """Records upserted in one batch are all readable afterwards.

        Troubleshoot: check that the batch write is committed before returning.
        """
        records = {f"k{i}": _doc(i) for i in range(10)}
        await adapter.upsert(records)
        await _check(adapter, records, list(records))
        assert await adapter.count() == 10

    @checks("kv.upsert.replaces")
    async def test_upsert_replaces_whole_record(self, adapter):
        """Upserting an existing key replaces the record whole: fields absent from
        the new record are gone (no merge).

        Troubleshoot: use a replacing write (``INSERT ... ON CONFLICT DO UPDATE SET
        value = excluded.value``, ``SET``), not a JSON merge/patch.
        """
        await adapter.upsert({"a": {"x": 1, "y": 2, "deep": {"keep": True}}})
        await adapter.upsert({"a": {"x": 3, "deep": {}}})
        assert difference({"x": 3, "deep": {}}, await adapter.get("a")) is None
        assert await adapter.count() == 1

    @checks("kv.upsert.replaces")
    async def test_upsert_is_idempotent(self, adapter):
        """Upserting the same mapping twice leaves the store as after once.

        Troubleshoot: an append-only write (a new row per upsert) breaks this;
        key the storage by the record key.
        """
        records = {"a": _doc(1), "b": _doc(2)}
        await adapter.upsert(records)
        await adapter.upsert(records)
        assert await adapter.count() == 2
        assert sorted(await collect(adapter.keys())) == ["a", "b"]
        await _check(adapter, records, ["a", "b"])

    @checks("kv.copies")
    async def test_upsert_does_not_mutate_or_keep_the_input(self, adapter):
        """``upsert`` leaves the caller's mapping unchanged, and later changes the
        caller makes to it do not reach the store.

        Troubleshoot: in-memory adapters must store a copy (or an encoding) of
        each value, never the caller's dict.
        """
        records = {"a": {"list": [1, 2], "d": {"k": "v"}}}
        before = copy.deepcopy(records)
        await adapter.upsert(records)
        assert difference(before, records) is None, "upsert mutated the caller's input"
        records["a"]["list"].append(3)
        records["a"]["d"]["k"] = "changed"
        records["a"]["new"] = 1
        assert difference(before["a"], await adapter.get("a")) is None, (
            "the store kept a reference to the caller's dict"
        )

    async def test_upsert_of_nothing_is_a_no_op(self, adapter):
        """``upsert({})`` writes nothing and does not fail.

        Troubleshoot: guard against an empty multi-row ``INSERT``.
        """
        await adapter.upsert({})
        assert await adapter.count() == 0

    @checks("kv.values.json")
    async def test_json_types_round_trip_exactly(self, adapter):
        """Every JSON type round-trips with its type: ``True`` stays a bool (not
        ``1``), ``1`` stays an int (not ``1.0``), ``1.5`` a float, ``None``,
        nested lists and dicts, empty containers, large ints and tiny floats.

        Troubleshoot: serialise with a real JSON encoder and decode the same way;
        backends with typed columns must not coerce booleans or numbers.
        """
        value = {
            "t": True, "f": False, "zero": 0, "int": 1, "neg": -7, "big": 2**53,
            "float": 1.5, "whole_float": 2.0, "tiny": 5e-324, "huge": 1.7976931348623157e308,
            "none": None, "s": "", "list": [1, "a", None, [True, 2.5], {}],
            "dict": {"a": {"b": {"c": []}}, "": "empty key"},
        }
        await adapter.upsert({"v": value})
        diff = difference(value, await adapter.get("v"))
        assert diff is None, f"a JSON value did not round-trip unchanged: {diff}"

    @pytest.mark.parametrize(
        "bad",
        [
            pytest.param({"": {"x": 1}}, id="empty-key"),
            pytest.param({"k": "not a dict"}, id="str-value"),
            pytest.param({"k": ["a", "list"]}, id="list-value"),
            pytest.param({"k": None}, id="none-value"),
            pytest.param({"k": {"set": {1, 2}}}, id="set-inside"),
            pytest.param({"k": {"obj": object()}}, id="object-inside"),
            pytest.param({"k": {"nan": float("nan")}}, id="nan"),
            pytest.param({"k": {"tuple": (1, 2)}}, id="tuple-changes-type"),
            pytest.param({"k": {1: "int key"}}, id="non-str-dict-key"),
            pytest.param({"k": {"s": "lone \ud800 surrogate"}}, id="lone-surrogate"),
        ],
    )
    @checks("kv.values.json")
    async def test_invalid_records_raise_and_write_nothing(self, adapter, bad):
        """A value that would not survive a JSON round trip (or an empty key)
        raises ``InvalidValueError`` and nothing of that batch is written, not
        even the valid records next to it.

        Troubleshoot: validate and serialise the whole batch before writing
        (``ragkit.protocols.kv.encode_record`` does exactly the protocol's checks).
        """
        await adapter.upsert({"kept": {"v": 1}})
        batch = {"good-before": {"v": 2}, **bad, "good-after": {"v": 3}}
        with pytest.raises(InvalidValueError):
            await adapter.upsert(batch)
        assert await adapter.get_many(["good-before", "good-after"]) == [None, None]
        assert await adapter.count() == 1
        assert difference({"v": 1}, await adapter.get("kept")) is None


class KVDeleteTests:
    async def test_delete_removes_keys(self, adapter):
        """Deleted keys read as ``None``; the others are untouched.

        Troubleshoot: check the delete is scoped by workspace and namespace and
        committed before returning.
        """
        await adapter.upsert({"a": _doc(1), "b": _doc(2), "c": _doc(3)})
        await adapter.delete(["a", "c"])
        await _check(adapter, {"b": _doc(2)}, ["a", "b", "c"])
        assert await adapter.count() == 1

    @checks("store.delete.missing-ok")
    async def test_delete_missing_keys_is_not_an_error(self, adapter):
        """Deleting keys that do not exist (alone, mixed with existing ones, on an
        empty store, or an empty list) does not raise.

        Troubleshoot: do not raise on "0 rows affected" or ``KeyError``; ignore
        absent keys.
        """
        await adapter.delete(["never-there"])
        await adapter.delete([])
        await adapter.upsert({"a": _doc(1), "b": _doc(2)})
        await adapter.delete(["a", "never-there", "a"])
        await _check(adapter, {"b": _doc(2)}, ["a", "b", "never-there"])

    async def test_delete_then_reinsert(self, adapter):
        """A deleted key can be written again and reads back the new record.

        Troubleshoot: tombstones must not shadow a later insert.
        """
        await adapter.upsert({"a": {"v": 1}})
        await adapter.delete(["a"])
        await adapter.upsert({"a": {"v": 2}})
        assert difference({"v": 2}, await adapter.get("a")) is None
        assert await adapter.count() == 1


class KVCountAndKeysTests:
    async def test_count_after_every_mutation(self, adapter):
        """``count()`` is right after each insert, replace, delete (existing and
        missing keys) and drop.

        Troubleshoot: a cached counter drifts when replaces count as inserts or
        deletes of missing keys are subtracted; count the stored rows.
        """
        assert await adapter.count() == 0
        await adapter.upsert({"a": {}, "b": {}})
        assert await adapter.count() == 2
        await adapter.upsert({"b": {"v": 1}, "c": {}})
        assert await adapter.count() == 3
        await adapter.delete(["a", "zzz"])
        assert await adapter.count() == 2
        await adapter.delete(["a"])
        assert await adapter.count() == 2
        await adapter.drop()
        assert await adapter.count() == 0

    @checks("kv.keys.once")
    async def test_keys_yields_every_key_once(self, adapter):
        """``keys()`` yields each stored key exactly once (over 1000 keys, so
        paged scans are exercised), and matches ``count()``.

        Troubleshoot: paged scans must continue from the last key of the previous
        page (keyset pagination), not skip or repeat a page boundary.
        """
        records = {f"key-{i:05d}": {"i": i} for i in range(1234)}
        await adapter.upsert(records)
        keys = await collect(adapter.keys())
        assert len(keys) == len(set(keys)), "keys() yielded duplicates"
        assert set(keys) == set(records)
        assert await adapter.count() == len(records)


class KVDropTests:
    @checks("store.drop.scoped")
    async def test_drop_empties_and_keeps_the_store_open(self, adapter):
        """``drop()`` deletes every record and leaves the store open and usable.

        Troubleshoot: drop must not close the connection or delete the schema the
        store needs for the next write.
        """
        await adapter.upsert({f"k{i}": {"i": i} for i in range(20)})
        await adapter.drop()
        assert await adapter.count() == 0
        assert await collect(adapter.keys()) == []
        assert await adapter.get("k1") is None
        await adapter.upsert({"after": {"ok": True}})
        assert difference({"ok": True}, await adapter.get("after")) is None

    @checks("store.drop.scoped")
    async def test_drop_touches_only_this_workspace_and_namespace(self, adapter):
        """``drop()`` leaves other workspaces and other namespaces alone.

        Troubleshoot: scope the delete by both workspace and namespace (not a
        ``DROP TABLE`` / ``FLUSHDB`` shared by every namespace).
        """
        async with sibling(adapter, workspace=True) as other_ws, sibling(
            adapter, namespace=True
        ) as other_ns:
            await other_ws.upsert({"a": {"where": "other workspace"}})
            await other_ns.upsert({"a": {"where": "other namespace"}})
            await adapter.upsert({"a": {"where": "here"}})
            await adapter.drop()
            assert difference({"where": "other workspace"}, await other_ws.get("a")) is None
            assert difference({"where": "other namespace"}, await other_ns.get("a")) is None


class KVIsolationTests:
    @checks("store.drop.scoped")
    async def test_workspaces_are_isolated(self, adapter):
        """Two workspaces hold independent records under the same key: reads,
        counts, key scans and deletes of one never see the other.

        Troubleshoot: include the workspace in every key, table name or filter
        (reads, count, keys, delete and drop).
        """
        async with sibling(adapter, workspace=True) as other:
            await adapter.upsert({"shared": {"who": "me"}, "mine": {}})
            await other.upsert({"shared": {"who": "other"}})
            assert difference({"who": "me"}, await adapter.get("shared")) is None
            assert difference({"who": "other"}, await other.get("shared")) is None
            assert await other.get("mine") is None
            assert (await adapter.count(), await other.count()) == (2, 1)
            assert sorted(await collect(other.keys())) == ["shared"]
            await other.delete(["shared", "mine"])
            assert difference({"who": "me"}, await adapter.get("shared")) is None
            assert await adapter.count() == 2

    async def test_namespaces_are_isolated(self, adapter):
        """Two namespaces of one workspace hold independent records.

        Troubleshoot: include the namespace in every key, table name or filter.
        """
        async with sibling(adapter, namespace=True) as other:
            await adapter.upsert({"k": {"ns": 1}})
            await other.upsert({"k": {"ns": 2}, "only-there": {}})
            assert difference({"ns": 1}, await adapter.get("k")) is None
            assert await adapter.get("only-there") is None
            assert (await adapter.count(), await other.count()) == (1, 2)


class KVUnicodeAndSizeTests:
    @checks("kv.unicode-and-size")
    async def test_unicode_keys_and_values_round_trip(self, adapter):
        """Keys and values with CJK, emoji, RTL text, combining marks, quotes and
        backslashes round-trip unchanged, and keys() returns them as given.

        Troubleshoot: use UTF-8 (utf8mb4 in MySQL) end to end, bind keys as
        parameters instead of building queries by string formatting, and do not
        normalise Unicode.
        """
        records = {k: {"text": f"{k} 文字 😀 עברית", "list": [k, "🙂"]} for k in UNICODE_KEYS}
        await adapter.upsert(records)
        await _check(adapter, records, UNICODE_KEYS)
        assert set(await collect(adapter.keys())) == set(UNICODE_KEYS)

    @checks("kv.unicode-and-size")
    async def test_large_values_round_trip(self, adapter):
        """A value of several MB (a 3 MB ASCII string plus 1 MB of CJK text and a
        100k-item list) round-trips unchanged.

        Troubleshoot: the column/field must hold several MB (TEXT/JSONB, not
        VARCHAR(n)); raise client size limits if the backend has them.
        """
        value = {
            "ascii": "x" * (3 * 1024 * 1024),
            "cjk": "汉字" * (512 * 1024 // 3),
            "list": list(range(100_000)),
        }
        await adapter.upsert({"big": value, "small": {"ok": True}})
        diff = difference(value, await adapter.get("big"))
        assert diff is None, f"a large value changed: {diff}"
        assert difference({"ok": True}, await adapter.get("small")) is None


class KVLifecycleTests:
    @needs(Capability.PERSISTENT)
    @checks("store.close.durable")
    async def test_data_survives_close_and_reopen(self, adapter):
        """(PERSISTENT) Records written before ``close()`` are read back by a new
        instance over the same config, and by the first one reopened.

        Troubleshoot: ``close()`` must flush everything; ``open()`` must load
        existing data rather than start empty or recreate tables.
        """
        records = {"a": _doc(1), "中文": {"v": "🙂"}}
        await adapter.upsert(records)
        await adapter.upsert({"a": {"replaced": True}})
        await adapter.delete(["gone"])
        expected = {"a": {"replaced": True}, "中文": {"v": "🙂"}}
        async with reopened(adapter) as again:
            await _check(again, expected, ["a", "中文", "gone"])
            assert await again.count() == 2
        await _check(adapter, expected, ["a", "中文"])


class KVConcurrencyTests:
    @needs(Capability.CONCURRENT_WRITES)
    async def test_concurrent_writers_lose_no_updates(self, adapter):
        """(CONCURRENT_WRITES) 40 asyncio tasks upserting and deleting at once,
        interleaved at every ``await``, lose no update: every surviving key holds
        its last written value and the count is exact.

        Troubleshoot: a read-modify-write of shared state (a cached dict written
        back whole, a counter) across an ``await`` loses updates; make each write
        atomic in the backend or hold a lock across it.
        """

        async def writer(t: int) -> None:
            for i in range(10):
                await adapter.upsert({f"t{t}-{i}": {"t": t, "i": i, "v": 0}})
                await asyncio.sleep(0)
                await adapter.upsert({f"t{t}-{i}": {"t": t, "i": i, "v": 1}})
                if i % 3 == 0:
                    await adapter.delete([f"t{t}-{i}"])

        await asyncio.gather(*(writer(t) for t in range(40)))
        expected = {
            f"t{t}-{i}": {"t": t, "i": i, "v": 1} for t in range(40) for i in range(10) if i % 3
        }
        assert await adapter.count() == len(expected)
        assert set(await collect(adapter.keys())) == set(expected)
        await _check(adapter, expected, sorted(expected))


@contract("kv", KVStore)
class KVStoreContract(
    # pytest collects base classes bottom-up: these run from KVGetManyTests up to
    # the state machine, between the canaries test_aaa_* (first) and test_zzz_* (last).
    KVStateMachineTests,
    KVTextSearchTests,
    KVEdgeCaseTests,
    FencingTests,
    ClosedStoreTests,
    KVConcurrencyTests,
    KVLifecycleTests,
    KVUnicodeAndSizeTests,
    KVIsolationTests,
    KVDropTests,
    KVCountAndKeysTests,
    KVDeleteTests,
    KVUpsertTests,
    KVGetManyTests,
    StoreContractBase,
):
    """The KV contract. Subclass it and override one fixture::

        class TestMyKV(KVStoreContract):
            @pytest.fixture
            async def adapter(self, tmp_path):
                store = MyKV(StoreConfig(namespace="contract", working_dir=tmp_path))
                await store.open()
                yield store          # fresh, empty, open
                await store.drop()
                await store.close()
    """

    async def describe_contents(self, store: KVStore) -> str:
        n = await store.count()
        keys = await collect(store.keys())
        if n == 0 and not keys:
            return ""
        return f"count()={n}, keys()={sorted(keys)[:5]!r}{'...' if len(keys) > 5 else ''}"

    async def test_zzz_store_is_still_empty(self, adapter):
        """Canary, runs last: after every other test, the store handed out is
        still empty, also as seen by a second instance over the same config.

        Troubleshoot: some test's data outlived its fixture: the fixture must
        drop the store in its teardown (a shared server namespace keeps data).
        """
        await self.assert_still_empty(adapter)
