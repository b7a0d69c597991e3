"""Deliberately broken doc-status stores, the doc-status contract's test subjects: each adds
exactly one defect, named by its ``defect``, to the reference adapter (how
the self-test runs ``DEFECTS`` and ``RULE_BREAKERS``: ``base.broken``)."""

from __future__ import annotations

from typing import Any, ClassVar

from ragkit.protocols.base import bypass_template
from ragkit.protocols.doc_status import _record
from ragkit.schema import DocStatusPage
from ragkit.storage.sqlite_doc_status import SQLiteDocStatusStore


class ExtraEmptyPageDocStatusStore(SQLiteDocStatusStore):
    """Replaces ``list_page``: asks for ``limit`` rows and sets a cursor
    whenever the page is full, so a listing whose size is a multiple of the
    limit ends with an extra empty page."""

    violates: ClassVar[str] = "doc_status.list-page.last-page"
    defect: ClassVar[str] = "a full last page has a next_cursor (then an empty page)"

    @bypass_template("the defect: no limit + 1 look-ahead")
    async def list_page(self, status=None, limit: int = 100, cursor: str | None = None) -> DocStatusPage:  # type: ignore[override]
        self._check_open()
        items = [_record(data) for data in await self._list_page(status, limit, cursor)]
        return DocStatusPage(items=items, next_cursor=items[-1].id if len(items) == limit else None)


class DeleteKeepsGenerationDocStatusStore(SQLiteDocStatusStore):
    """Bumps the generation on upserts and drops but not on deletes: a reader
    keeps showing a deleted document."""

    violates: ClassVar[str] = "doc_status.generation.every-write"
    defect: ClassVar[str] = "delete() leaves the generation as it was"
    _deleting = False

    async def _delete(self, ids: list[str]) -> None:
        self._deleting = True
        try:
            await super()._delete(ids)
        finally:
            self._deleting = False

    def wrote(self, conn: Any) -> None:
        if not self._deleting:
            super().wrote(conn)


class InstanceGenerationDocStatusStore(SQLiteDocStatusStore):
    """Counts its own writes in memory: another connection or process never
    sees them, and a reopened store starts again from 0."""

    violates: ClassVar[str] = "doc_status.generation.shared"
    defect: ClassVar[str] = "the generation lives in the instance, not in the backend"
    _written = 0

    async def _generation(self) -> int:
        return self._written

    def wrote(self, conn: Any) -> None:
        self._written += 1


class NoTombstoneDocStatusStore(SQLiteDocStatusStore):
    """Reads its change feed from the records' generation column alone: a
    deleted document leaves no row, so no reader learns it is gone."""

    violates: ClassVar[str] = "doc_status.changes.tombstones"
    defect: ClassVar[str] = "changes_since() never names a deleted id"

    async def _changed_since(self, generation: int) -> tuple[int, list[str]] | None:
        now = await self._generation()
        rows = self.db.fetchall(f"SELECT id {self._where(' AND generation > ?')}", (*self._scope, generation))
        return now, [id for (id,) in rows]


class InclusiveChangesDocStatusStore(SQLiteDocStatusStore):
    """Selects ids written *at or after* the generation asked (``>=``): each
    reader applies the last write it already had once more, and a write is in
    the feed one generation too early."""

    violates: ClassVar[str] = "doc_status.changes.every-write"
    defect: ClassVar[str] = "changes_since(g) also names the writes made at g"

    async def _changed_since(self, generation: int) -> tuple[int, list[str]] | None:
        return await super()._changed_since(generation - 1)


DEFECTS: tuple[type, ...] = ()

RULE_BREAKERS: dict[str, tuple[type, ...]] = {
    "DocStatusStoreContract": (ExtraEmptyPageDocStatusStore, DeleteKeepsGenerationDocStatusStore, InstanceGenerationDocStatusStore, NoTombstoneDocStatusStore, InclusiveChangesDocStatusStore),
}

REFERENCES: dict[str, type] = {"DocStatusStoreContract": SQLiteDocStatusStore}
