"""Doc-status records as the contract writes and compares them: ``record()``
with fixed timestamps, the strict comparison (timezone-aware UTC stamps),
and a full paging walk that checks each page on the way."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from ragkit.protocols.doc_status import DocStatusStore
from ragkit.schema import DocStatus, DocStatusRecord
from ragkit.testing.contracts.base.contract import difference

T0 = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)


def record(id: str, status: DocStatus = DocStatus.PENDING, **kw: Any) -> DocStatusRecord:
    kw.setdefault("created_at", T0)
    kw.setdefault("updated_at", T0)
    return DocStatusRecord(id=id, status=status, **kw)


def record_diff(expected: DocStatusRecord | None, got: Any) -> str | None:
    if expected is None or got is None:
        return None if expected is got else f"expected {expected!r}, got {got!r}"
    if not isinstance(got, DocStatusRecord):
        return f"expected a DocStatusRecord, got {type(got).__name__}"
    for stamp in ("created_at", "updated_at"):
        value = getattr(got, stamp)
        if value.tzinfo is None or value.utcoffset() != timedelta(0):
            return f"{expected.id!r}.{stamp} = {value!r} is not timezone-aware UTC"
    return difference(expected.model_dump(), got.model_dump(), expected.id)


async def assert_get(store: DocStatusStore, expected: dict[str, DocStatusRecord], asked: list[str]) -> None:
    got = await store.get(asked)
    assert len(got) == len(asked), f"get() returned {len(got)} entries for {len(asked)} ids"
    for id_, rec in zip(asked, got):
        diff = record_diff(expected.get(id_), rec)
        assert diff is None, f"get({id_!r}): {diff}"


async def walk_pages(store: DocStatusStore, status: DocStatus | None, limit: int) -> list[str]:
    """Every id of a full paging walk; checks pages are sorted and end properly."""
    ids: list[str] = []
    cursor = None
    for _ in range(10_000):
        page = await store.list_page(status, limit=limit, cursor=cursor)
        assert len(page.items) <= limit, f"a page of {len(page.items)} items for limit={limit}"
        page_ids = [r.id for r in page.items]
        assert page_ids == sorted(page_ids), f"page not ordered by id: {page_ids}"
        if status is not None:
            assert all(r.status == status for r in page.items), f"page for {status} has other statuses"
        assert page.items or not ids, (
            f"an extra empty page after {len(ids)} ids: next_cursor must be None on the last page"
        )
        ids += page_ids
        if page.next_cursor is None:
            return ids
        assert len(page.items) == limit, f"a page of {len(page.items)} < limit={limit} items has a next_cursor"
        cursor = page.next_cursor
    raise AssertionError("list_page never returned next_cursor=None")


def status_counts(expected: dict[str, DocStatusRecord]) -> dict[DocStatus, int]:
    out = {s: 0 for s in DocStatus}
    for r in expected.values():
        out[r.status] += 1
    return out
