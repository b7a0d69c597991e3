"""``DocStatusStoreContract``: what every ``DocStatusStore`` adapter must do
(see ``ragkit.protocols.doc_status.DocStatusStore`` for the normative text)."""

from __future__ import annotations

import asyncio
import itertools
from datetime import datetime, timedelta, timezone

import pytest

from ragkit.access import AccessList
from ragkit.errors import InvalidTransitionError
from ragkit.protocols.base import Capability
from ragkit.protocols.doc_status import DocStatusStore
from ragkit.schema import ALLOWED_TRANSITIONS, DocStatus, DocStatusRecord
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import StoreContractBase, contract, needs, reopened, sibling
from ragkit.testing.contracts.base.fencing import FencingTests
from ragkit.testing.contracts.base.lifecycle import ClosedStoreTests
from ragkit.testing.contracts.doc_status.changes import DocStatusChangesTests, DocStatusGenerationTests
from ragkit.testing.contracts.doc_status.edge_cases import DocStatusEdgeCaseTests
from ragkit.testing.contracts.doc_status.machine import DocStatusStateMachineTests
from ragkit.testing.contracts.doc_status.records import assert_get, status_counts, record_diff, walk_pages, record


class DocStatusReadWriteTests:
    @checks("doc_status.get.order")
    async def test_get_keeps_order_and_none_for_missing(self, adapter):
        """``get`` returns one entry per id, in order (duplicates included),
        ``None`` where missing; ``get([])`` is ``[]``.

        Troubleshoot: rebuild the list from the asked ids.
        """
        recs = {i: record(i, content_hash=f"h-{i}") for i in ("a", "b", "c")}
        await adapter.upsert(recs.values())
        await assert_get(adapter, recs, ["c", "x", "a", "c", "b"])
        assert await adapter.get([]) == []

    @checks("doc_status.upsert.whole")
    async def test_records_round_trip_whole(self, adapter):
        """Every field round-trips: status, error, chunk_ids (order kept),
        content hash, file path, length, metadata with exact types and the
        access list (who may read the document; a missing one stays missing).

        Troubleshoot: store the whole record (e.g. its JSON) rather than a subset
        of columns; keep bool/int/float metadata types.
        """
        rec = record(
            "doc-1", DocStatus.FAILED, error="boom: 💥", chunk_ids=["c3", "c1", "c2"],
            content_hash="abc", file_path="dir/文件.txt", content_length=12345,
            metadata={"s": "x", "i": 1, "f": 1.5, "b": True},
            access=AccessList(users=["alice", "ünïcode 用户"], groups=["team-a"]),
        )
        open_doc = record("doc-2", access=AccessList())
        await adapter.upsert([rec, open_doc, record("doc-3")])
        await assert_get(adapter, {"doc-1": rec, "doc-2": open_doc}, ["doc-1", "doc-2"])
        (no_list,) = await adapter.get(["doc-3"])
        assert no_list is not None and no_list.access is None

    @checks("doc_status.timestamps.utc")
    async def test_timestamps_are_utc_with_microseconds(self, adapter):
        """``created_at``/``updated_at`` come back timezone-aware in UTC, the
        same instants with microsecond precision (a +05:30 input is converted).

        Troubleshoot: store ISO-8601 with offset and microseconds (or
        ``timestamptz``); convert back with ``tzinfo=timezone.utc``.
        """
        ist = timezone(timedelta(hours=5, minutes=30))
        rec = DocStatusRecord(
            id="t", created_at=datetime(2023, 1, 2, 3, 4, 5, 678901, tzinfo=ist),
            updated_at=datetime(2030, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
        )
        await adapter.upsert([rec])
        (got,) = await adapter.get(["t"])
        assert got.created_at == rec.created_at and got.updated_at == rec.updated_at
        assert got.created_at.utcoffset() == timedelta(0) and got.created_at.microsecond == 678901
        assert got.updated_at.microsecond == 999999

    @checks("doc_status.upsert.whole")
    async def test_upsert_replaces_whole_record(self, adapter):
        """Upserting an existing id replaces the record whole: a cleared error,
        shorter chunk list and removed metadata fields stay cleared.

        Troubleshoot: overwrite the stored record; do not merge fields.
        """
        await adapter.upsert([record("a", DocStatus.FAILED, error="e", chunk_ids=["1", "2"], metadata={"x": 1})])
        new = record("a", DocStatus.PENDING, chunk_ids=["3"])
        await adapter.upsert([new])
        await assert_get(adapter, {"a": new}, ["a"])
        assert await adapter.count() == 1

    async def test_upsert_is_idempotent_and_keeps_the_input(self, adapter):
        """Upserting the same records twice leaves the store as after once;
        ``upsert`` does not mutate the caller's records, later changes to them do
        not reach the store, and returned records are copies.

        Troubleshoot: in-memory adapters must store copies (``model_copy(deep=True)``).
        """
        recs = [record("a", chunk_ids=["c1"]), record("b", metadata={"k": "v"})]
        before = [r.model_copy(deep=True) for r in recs]
        await adapter.upsert(recs)
        await adapter.upsert(recs)
        assert recs == before, "upsert changed the caller's records"
        recs[0].chunk_ids.append("changed")
        recs[1].metadata["k"] = "changed"
        (got,) = await adapter.get(["a"])
        got.chunk_ids.append("mutated")
        await assert_get(adapter, {r.id: r for r in before}, ["a", "b"])
        assert await adapter.count() == 2

    async def test_upsert_of_nothing_is_a_no_op(self, adapter):
        """``upsert([])`` writes nothing and does not fail.

        Troubleshoot: return early on an empty batch.
        """
        await adapter.upsert([])
        assert await adapter.count() == 0

    @checks("store.delete.missing-ok")
    async def test_delete(self, adapter):
        """``delete`` removes the given ids and ignores missing ones (also on an
        empty store and for an empty list).

        Troubleshoot: ignore "not found" instead of raising.
        """
        await adapter.delete(["never"])
        await adapter.delete([])
        recs = {i: record(i) for i in ("a", "b", "c")}
        await adapter.upsert(recs.values())
        await adapter.delete(["a", "never", "a"])
        await assert_get(adapter, {"b": recs["b"], "c": recs["c"]}, ["a", "b", "c"])
        assert await adapter.count() == 2

    async def test_unicode_and_large_records(self, adapter):
        """Ids, paths, errors and metadata with CJK and emoji round-trip, as does
        a record with 20,000 chunk ids and a 1 MB error text.

        Troubleshoot: UTF-8 end to end, unbounded text columns.
        """
        recs = {
            "文档-1": record("文档-1", file_path="资料/报告.pdf", metadata={"标题": "🙂"}),
            "🙂doc": record("🙂doc", DocStatus.FAILED, error="失败 💥"),
            "big": record("big", chunk_ids=[f"chunk-{i}" for i in range(20_000)], error="e" * (1024 * 1024)),
        }
        await adapter.upsert(recs.values())
        await assert_get(adapter, recs, list(recs))
        assert await walk_pages(adapter, None, 2) == sorted(recs)


class DocStatusCountTests:
    @checks("doc_status.counts.every-status")
    async def test_counts_has_every_status(self, adapter):
        """``counts()`` has an entry for every ``DocStatus`` (0 included), on an
        empty store and after writes; keys are ``DocStatus`` members.

        Troubleshoot: start from ``{s: 0 for s in DocStatus}`` and add the
        backend's GROUP BY result.
        """
        assert await adapter.counts() == {s: 0 for s in DocStatus}
        await adapter.upsert([record("a", DocStatus.PROCESSED)])
        counts = await adapter.counts()
        assert set(counts) == set(DocStatus) and all(isinstance(k, DocStatus) for k in counts)
        assert counts == {**{s: 0 for s in DocStatus}, DocStatus.PROCESSED: 1}

    @checks("doc_status.counts.every-status")
    async def test_counts_after_every_mutation(self, adapter):
        """``counts()`` and ``count()`` are right after inserts, status-changing
        replaces, transitions, deletes (present and missing) and drop.

        Troubleshoot: count stored records by their current status.
        """
        expected: dict[str, DocStatusRecord] = {}

        async def check():
            assert await adapter.counts() == status_counts(expected)
            assert await adapter.count() == len(expected)

        await check()
        for i, s in enumerate(itertools.islice(itertools.cycle(DocStatus), 8)):
            expected[f"d{i}"] = record(f"d{i}", s)
        await adapter.upsert(expected.values())
        await check()
        expected["d0"] = record("d0", DocStatus.PROCESSED)
        await adapter.upsert([expected["d0"]])
        await check()
        expected["d1"] = await adapter.transition("d1", DocStatus.FAILED, error="x")
        await check()
        await adapter.delete(["d2", "missing"])
        del expected["d2"]
        await check()
        await adapter.drop()
        expected.clear()
        await check()


class DocStatusPagingTests:
    @checks("doc_status.list-page.order")
    async def test_list_page_orders_by_id(self, adapter):
        """``list_page`` returns documents ordered by id ascending in code-point
        order ("B" < "a" < "é" < "中"), all statuses or one status.

        Troubleshoot: ``ORDER BY id`` with a binary collation (``COLLATE "C"`` in
        PostgreSQL), not a locale-aware one.
        """
        ids = ["b", "a", "B", "中", "é", "a1", "_", "A"]
        await adapter.upsert([record(i, DocStatus.PROCESSED if i in "aB" else DocStatus.PENDING) for i in ids])
        page = await adapter.list_page(limit=100)
        assert [r.id for r in page.items] == sorted(ids) and page.next_cursor is None
        page = await adapter.list_page(DocStatus.PROCESSED)
        assert [r.id for r in page.items] == ["B", "a"]

    @pytest.mark.parametrize("limit", [1, 3, 5, 7, 100])
    @checks("doc_status.list-page.order", "doc_status.list-page.last-page")
    async def test_paging_has_no_gaps_or_repeats(self, adapter, limit):
        """Following ``next_cursor`` visits every document exactly once, for page
        sizes that divide the total, do not, and exceed it; ``next_cursor`` is
        ``None`` on the last page; status filters page the same way.

        Troubleshoot: keyset pagination: ``WHERE id > :cursor ORDER BY id LIMIT
        :limit``, with the cursor being the last id returned (not an offset).
        """
        statuses = list(DocStatus)
        recs = {f"doc-{i:02d}": record(f"doc-{i:02d}", statuses[i % len(statuses)]) for i in range(15)}
        await adapter.upsert(recs.values())
        assert await walk_pages(adapter, None, limit) == sorted(recs)
        for s in DocStatus:
            assert await walk_pages(adapter, s, limit) == sorted(i for i, r in recs.items() if r.status == s)

    @checks("doc_status.list-page.last-page")
    async def test_empty_listing(self, adapter):
        """Listing an empty store (or a status with no documents) gives one empty
        page with ``next_cursor=None``.

        Troubleshoot: return ``DocStatusPage(items=[])`` rather than raising.
        """
        page = await adapter.list_page()
        assert page.items == [] and page.next_cursor is None
        await adapter.upsert([record("a")])
        page = await adapter.list_page(DocStatus.FAILED)
        assert page.items == [] and page.next_cursor is None

    @checks("doc_status.list-page.order")
    async def test_paging_under_concurrent_inserts(self, adapter):
        """While one task pages through (limit 3) and other tasks insert and
        delete documents between its pages, every document present for the whole
        listing appears exactly once, and no id appears twice.

        Troubleshoot: offset pagination skips or repeats rows when others insert;
        use the last id as the cursor (keyset pagination).
        """
        stable = {f"s{i:03d}": record(f"s{i:03d}") for i in range(0, 60, 2)}
        await adapter.upsert(stable.values())
        seen: list[str] = []

        async def reader():
            cursor = None
            while True:
                page = await adapter.list_page(limit=3, cursor=cursor)
                seen.extend(r.id for r in page.items)
                if page.next_cursor is None:
                    return
                cursor = page.next_cursor
                await asyncio.sleep(0)

        async def inserter(offset: int):
            for i in range(offset, 60, 4):
                await adapter.upsert([record(f"s{i:03d}"), record(f"a-{offset}-{i}"), record(f"z-{offset}-{i}")])
                await asyncio.sleep(0)
                await adapter.delete([f"a-{offset}-{i}"])

        await asyncio.gather(reader(), inserter(1), inserter(3))
        assert len(seen) == len(set(seen)), f"ids listed twice: {sorted({i for i in seen if seen.count(i) > 1})}"
        missed = sorted(set(stable) - set(seen))
        assert not missed, f"documents present all along were skipped: {missed}"


class DocStatusTransitionTests:
    @pytest.mark.parametrize(
        "source,target",
        [(s, t) for s in DocStatus for t in DocStatus],
        ids=lambda s: s.value,
    )
    @checks("doc_status.transition.lifecycle")
    async def test_transitions_follow_the_lifecycle(self, adapter, source, target):
        """``transition`` allows exactly ``ALLOWED_TRANSITIONS``: an allowed change
        updates status and ``updated_at`` and keeps ``error`` only for failed,
        leaving other fields alone; a refused one raises ``InvalidTransitionError``
        and leaves the record unchanged.

        Troubleshoot: do not override ``transition`` unless you must (e.g. to make
        it atomic); if you do, keep the base class's checks and field updates.
        """
        rec = record("d", source, error="old" if source is DocStatus.FAILED else None,
                     chunk_ids=["c1"], content_hash="h", metadata={"k": 1}, access=AccessList(groups=["g"]))
        await adapter.upsert([rec])
        if target in ALLOWED_TRANSITIONS[source]:
            out = await adapter.transition("d", target, error="why")
            expected = rec.model_copy(update={
                "status": target, "updated_at": out.updated_at,
                "error": "why" if target is DocStatus.FAILED else None,
            })
            assert record_diff(expected, out) is None, record_diff(expected, out)
            assert out.updated_at >= rec.updated_at
            await assert_get(adapter, {"d": expected}, ["d"])
        else:
            with pytest.raises(InvalidTransitionError, match=f"document 'd' cannot go from {source.value} to "):
                await adapter.transition("d", target)
            await assert_get(adapter, {"d": rec}, ["d"])

    @checks("doc_status.transition.lifecycle")
    async def test_transition_of_a_missing_document_is_refused(self, adapter):
        """``transition`` of an id with no record raises ``InvalidTransitionError``
        naming it, and creates nothing.

        Troubleshoot: check the record exists before changing it.
        """
        with pytest.raises(InvalidTransitionError, match="document 'missing' has no status record"):
            await adapter.transition("missing", DocStatus.PROCESSING)
        assert await adapter.count() == 0

    @checks("doc_status.transition.lifecycle")
    async def test_full_lifecycle(self, adapter):
        """pending -> processing -> failed -> pending -> processing -> processed
        -> pending -> deleting works, and counts follow each step; nothing
        leaves deleting.

        Troubleshoot: see ``ALLOWED_TRANSITIONS`` in ragkit.schema.
        """
        await adapter.upsert([record("d")])
        path = [DocStatus.PROCESSING, DocStatus.FAILED, DocStatus.PENDING, DocStatus.PROCESSING,
                DocStatus.PROCESSED, DocStatus.PENDING, DocStatus.DELETING]
        for step in path:
            out = await adapter.transition("d", step, error="e")
            assert out.status is step
            assert (await adapter.counts())[step] == 1
            assert (await adapter.get(["d"]))[0].status is step
        with pytest.raises(InvalidTransitionError):
            await adapter.transition("d", DocStatus.PENDING)


class DocStatusLifecycleTests:
    @checks("store.drop.scoped")
    async def test_drop_and_isolation(self, adapter):
        """``drop()`` empties this store only and leaves it usable; other
        workspaces and namespaces keep independent records under the same ids.

        Troubleshoot: scope every query and the drop by workspace and namespace.
        """
        async with sibling(adapter, workspace=True) as ws, sibling(adapter, namespace=True) as ns:
            await adapter.upsert([record("a", DocStatus.PROCESSED), record("b")])
            await ws.upsert([record("a", DocStatus.FAILED, error="ws")])
            await ns.upsert([record("a"), record("c")])
            assert (await ws.get(["a"]))[0].error == "ws"
            assert (await ws.counts())[DocStatus.FAILED] == 1 and await ws.count() == 1
            assert [r.id for r in (await ns.list_page()).items] == ["a", "c"]
            await ws.delete(["a", "b"])
            await ns.drop()
            assert await adapter.count() == 2
            assert (await adapter.get(["a"]))[0].status is DocStatus.PROCESSED
            await adapter.drop()
            assert await adapter.count() == 0
            await adapter.upsert([record("after")])
            assert await adapter.count() == 1

    @needs(Capability.PERSISTENT)
    @checks("store.close.durable")
    async def test_data_survives_close_and_reopen(self, adapter):
        """(PERSISTENT) Records, transitions and deletes made before ``close()``
        are seen by a new instance over the same config, and by the first one
        reopened.

        Troubleshoot: ``close()`` must flush; ``open()`` must load existing data.
        """
        await adapter.upsert([record("a", chunk_ids=["x"]), record("b"), record("文档")])
        a = await adapter.transition("a", DocStatus.PROCESSING)
        await adapter.delete(["b"])
        expected = {"a": a, "文档": record("文档")}
        async with reopened(adapter) as again:
            await assert_get(again, expected, ["a", "b", "文档"])
            assert await again.counts() == status_counts(expected)
        await assert_get(adapter, expected, ["a", "b", "文档"])


class DocStatusConcurrencyTests:
    @needs(Capability.CONCURRENT_WRITES)
    async def test_concurrent_writers_lose_no_updates(self, adapter):
        """(CONCURRENT_WRITES) 40 asyncio tasks each inserting, transitioning and
        deleting their own documents at once lose no update: final statuses,
        counts and listings are exact.

        Troubleshoot: shared state read and written back across an ``await``
        loses updates; make each write atomic in the backend.
        """

        async def writer(t: int) -> None:
            ids = [f"t{t:02d}-{i}" for i in range(5)]
            await adapter.upsert([record(i) for i in ids])
            await asyncio.sleep(0)
            for i in ids:
                await adapter.transition(i, DocStatus.PROCESSING)
            await adapter.transition(ids[0], DocStatus.FAILED, error=f"t{t}")
            await adapter.delete([ids[1]])

        await asyncio.gather(*(writer(t) for t in range(40)))
        assert await adapter.counts() == {
            **{s: 0 for s in DocStatus}, DocStatus.PROCESSING: 120, DocStatus.FAILED: 40
        }
        listed = await walk_pages(adapter, None, 50)
        assert listed == sorted(f"t{t:02d}-{i}" for t in range(40) for i in (0, 2, 3, 4))
        errors = [r.error for r in await adapter.get([f"t{t:02d}-0" for t in range(40)])]
        assert errors == [f"t{t}" for t in range(40)]


@contract("doc_status", DocStatusStore)
class DocStatusStoreContract(
    # Collected bottom-up: read/write tests run first, the state machine last.
    DocStatusStateMachineTests,
    DocStatusEdgeCaseTests,
    FencingTests,
    ClosedStoreTests,
    DocStatusChangesTests,
    DocStatusGenerationTests,
    DocStatusConcurrencyTests,
    DocStatusLifecycleTests,
    DocStatusTransitionTests,
    DocStatusPagingTests,
    DocStatusCountTests,
    DocStatusReadWriteTests,
    StoreContractBase,
):
    """The document-status contract. Subclass it and override one fixture::

        class TestMyDocStatus(DocStatusStoreContract):
            @pytest.fixture
            async def adapter(self, tmp_path):
                async with MyDocStatus(StoreConfig(namespace="contract", working_dir=tmp_path)) as s:
                    yield s
                    await s.drop()
    """

    async def describe_contents(self, store: DocStatusStore) -> str:
        counts = await store.counts()
        page = await store.list_page(limit=5)
        if not any(counts.values()) and not page.items:
            return ""
        return f"counts()={ {s.value: n for s, n in counts.items() if n} }, first ids={[r.id for r in page.items]}"

    async def test_zzz_store_is_still_empty(self, adapter):
        """Canary, runs last: after every other test, the store handed out is
        still empty, also as seen by a second instance over the same config.

        Troubleshoot: some test's records outlived its fixture: drop the store in
        the fixture's teardown (a shared database keeps data).
        """
        await self.assert_still_empty(adapter)
