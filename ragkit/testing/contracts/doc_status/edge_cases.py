"""Doc-status tests of the rules backends break most: ids a collation would
merge, batches past SQL parameter limits, durability after ``flush()`` and
the last page of a listing. Each names the rules it checks."""

from __future__ import annotations

import pytest

from ragkit.protocols.base import Capability
from ragkit.schema import DocStatus, DocStatusRecord
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import needs
from ragkit.testing.contracts.base.inputs import CONFUSABLE_KEYS, HUGE, LARGE, durable_view, many_keys
from ragkit.testing.contracts.doc_status.records import record


def _status(id: str, status: DocStatus = DocStatus.PENDING) -> DocStatusRecord:
    return record(id, status)


class DocStatusEdgeCaseTests:
    @checks("store.keys.exact")
    async def test_ids_differing_in_case_or_normalisation_are_distinct(self, adapter):
        """Document ids differing only in case, normalisation, case-folding or a
        trailing space are different records, and list in code point order.

        Troubleshoot: a binary/exact id column (``COLLATE "C"``, ``BINARY``).
        """
        ids = list(CONFUSABLE_KEYS)
        await adapter.upsert([_status(i, DocStatus.PROCESSED if n % 2 else DocStatus.PENDING) for n, i in enumerate(ids)])
        assert await adapter.count() == len(ids), "ids differing only in case/normalisation were merged"
        assert [r.id if r else None for r in await adapter.get(ids)] == ids
        page = await adapter.list_page(limit=100)
        assert [r.id for r in page.items] == sorted(ids)
        await adapter.delete(["apple"])
        assert [r is None for r in await adapter.get(["Apple", "apple", "APPLE"])] == [False, True, False]

    @checks("store.batch.large", "doc_status.get.order")
    async def test_batches_past_sql_parameter_limits(self, adapter):
        """One upsert of 2500 records; ``get`` and ``delete`` of 33000 ids.

        Troubleshoot: chunk ``IN (...)`` lists inside the hooks.
        """
        stored = many_keys(LARGE, "d")
        await adapter.upsert([_status(i) for i in stored])
        asked = stored + many_keys(HUGE - LARGE, "absent")
        got = await adapter.get(asked)
        assert [r.id for r in got if r is not None] == stored
        assert (await adapter.counts())[DocStatus.PENDING] == LARGE
        await adapter.delete(asked)
        assert await adapter.count() == 0, "a delete of 33000 ids left records behind"

    @checks("doc_status.list-page.last-page")
    @pytest.mark.parametrize("total, limit", [(6, 3), (6, 2), (6, 6), (5, 5), (7, 3), (1, 1)])
    async def test_next_cursor_is_none_on_the_last_page(self, adapter, total, limit):
        """``next_cursor`` is ``None`` on the last page, also when the last page
        is full (no extra empty page), and a page with a cursor is full.

        Troubleshoot: fetch ``limit + 1`` rows to know whether another page
        exists (the protocol's ``list_page`` asks the hook for ``limit + 1``:
        return that many when there are).
        """
        ids = [f"p{i:02d}" for i in range(total)]
        await adapter.upsert([_status(i) for i in ids])
        pages, cursor = [], None
        while True:
            page = await adapter.list_page(limit=limit, cursor=cursor)
            pages.append([r.id for r in page.items])
            if page.next_cursor is None or len(pages) > total + 2:
                break
            assert len(page.items) == limit, f"page {pages[-1]} has a next_cursor but fewer than {limit} items"
            assert page.next_cursor == page.items[-1].id
            cursor = page.next_cursor
        want = [ids[i : i + limit] for i in range(0, total, limit)]
        assert pages == want, f"pages {pages}, expected {want} (no empty last page, nothing missing)"

    @checks("doc_status.upsert.whole")
    async def test_an_id_twice_in_one_upsert_keeps_the_last(self, adapter):
        """When one ``upsert`` holds a record twice, the last one wins.

        Troubleshoot: the protocol's ``upsert`` de-duplicates before the hook;
        a bulk insert must not reorder its rows.
        """
        await adapter.upsert([_status("x", DocStatus.PENDING), _status("y"), _status("x", DocStatus.PROCESSED)])
        got = await adapter.get(["x"])
        assert got[0] is not None and got[0].status == DocStatus.PROCESSED
        assert (await adapter.counts())[DocStatus.PENDING] == 1

    @needs(Capability.PERSISTENT)
    @checks("store.flush.durable")
    async def test_flush_makes_writes_durable(self, adapter):
        """(PERSISTENT) After ``flush()``, with the store still open, a new
        instance over what is durable sees every write so far.

        Troubleshoot: ``_flush`` must commit what ``_close`` would.
        """
        await adapter.upsert([_status("a"), _status("b"), _status("c")])
        await adapter.transition("a", DocStatus.PROCESSING)
        await adapter.delete(["b"])
        await adapter.flush()
        async with durable_view(adapter) as durable:
            got = await durable.get(["a", "b", "c"])
            assert [r.status if r else None for r in got] == [DocStatus.PROCESSING, None, DocStatus.PENDING]
