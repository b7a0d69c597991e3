"""The default document-status store: a SQLite table next to the KV table."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import ClassVar

from ragkit.errors import InvalidValueError
from ragkit.protocols.base import Capability
from ragkit.protocols.doc_status import DocStatusStore
from ragkit.schema import DocStatus, DocStatusPage, DocStatusRecord
from ragkit.storage._sqlite import (
    MAX_PARAMS,
    Connection,
    SQLiteOptions,
    bindable,
    chunked,
    database_path,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS doc_status (
    workspace TEXT NOT NULL,
    namespace TEXT NOT NULL,
    id TEXT NOT NULL,
    status TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (workspace, namespace, id)
);
CREATE INDEX IF NOT EXISTS doc_status_by_status
    ON doc_status (workspace, namespace, status, id)
"""


def _utc(value: datetime) -> datetime:
    """Timezone-aware UTC; a naive datetime is taken to be UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def _encode(record: DocStatusRecord) -> str:
    data = record.model_dump(mode="json")
    # Full-precision ISO-8601 with an explicit +00:00 offset.
    data["created_at"] = _utc(record.created_at).isoformat(timespec="microseconds")
    data["updated_at"] = _utc(record.updated_at).isoformat(timespec="microseconds")
    return json.dumps(data, ensure_ascii=False, allow_nan=False)


def _decode(text: str) -> DocStatusRecord:
    record = DocStatusRecord.model_validate_json(text)
    # pydantic parses the offset into its own tzinfo class; hand back the stdlib one.
    record.created_at = _utc(record.created_at)
    record.updated_at = _utc(record.updated_at)
    return record


class SQLiteDocStatusStore(DocStatusStore):
    """Status records as JSON in ``<working_dir>/<workspace>/ragkit.sqlite``.

    Every write is one committed transaction when it returns. Listings use
    keyset pagination on ``id`` (the cursor is the last id of the previous page).
    """

    name: ClassVar[str] = "sqlite"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.TRANSACTIONAL, Capability.CONCURRENT_WRITES}
    )
    Options: ClassVar[type[SQLiteOptions]] = SQLiteOptions

    options: SQLiteOptions

    def __init__(self, config) -> None:
        super().__init__(config)
        self._db: Connection | None = None

    @property
    def path(self):
        """The database file."""
        return database_path(self.config, self.options)

    @property
    def _scope(self) -> tuple[str, str]:
        return (self.workspace, self.namespace)

    def _conn(self) -> Connection:
        self._check_open()
        assert self._db is not None
        return self._db

    # -- lifecycle -------------------------------------------------------------

    async def open(self) -> None:
        if self._open:
            return
        db = Connection(self.path, self.options.synchronous)
        try:
            db.script(_SCHEMA)
        except BaseException:
            db.close()
            raise
        self._db = db
        self._open = True

    async def flush(self) -> None:
        self._check_open()  # every write is already committed

    async def close(self) -> None:
        if not self._open:
            return
        await self.flush()
        self._open = False
        db, self._db = self._db, None
        if db is not None:
            db.close()

    # -- reads -----------------------------------------------------------------

    async def get(self, ids: Sequence[str]) -> list[DocStatusRecord | None]:
        db = self._conn()
        ids = list(ids)
        wanted = list(dict.fromkeys(i for i in ids if bindable(i)))
        found: dict[str, str] = {}
        for part in chunked(wanted, MAX_PARAMS):
            marks = ",".join("?" * len(part))
            found.update(
                db.fetchall(
                    f"SELECT id, data FROM doc_status WHERE workspace = ? AND namespace = ? "
                    f"AND id IN ({marks})",
                    (*self._scope, *part),
                )
            )
        # Decode per asked position: a repeated id yields independent objects.
        return [_decode(found[i]) if isinstance(i, str) and i in found else None for i in ids]

    async def counts(self) -> dict[DocStatus, int]:
        rows = self._conn().fetchall(
            "SELECT status, COUNT(*) FROM doc_status WHERE workspace = ? AND namespace = ? "
            "GROUP BY status",
            self._scope,
        )
        out = {status: 0 for status in DocStatus}
        for status, n in rows:
            out[DocStatus(status)] = int(n)
        return out

    async def list_page(
        self, status: DocStatus | None = None, limit: int = 100, cursor: str | None = None
    ) -> DocStatusPage:
        db = self._conn()
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidValueError(f"list_page needs limit >= 1, got {limit!r}")
        if cursor is not None and not isinstance(cursor, str):
            raise InvalidValueError(f"cursor must be the str next_cursor of a page, got {cursor!r}")
        sql = "SELECT id, data FROM doc_status WHERE workspace = ? AND namespace = ?"
        params: list[object] = [*self._scope]
        if status is not None:
            try:
                status = DocStatus(status)
            except ValueError as exc:
                raise InvalidValueError(f"unknown document status {status!r}") from exc
            sql += " AND status = ?"
            params.append(status.value)
        if cursor is not None:
            sql += " AND id > ?"
            params.append(cursor)
        sql += " ORDER BY id LIMIT ?"
        params.append(limit + 1)
        rows = db.fetchall(sql, params)
        more = len(rows) > limit
        rows = rows[:limit]
        items = [_decode(data) for _, data in rows]
        return DocStatusPage(items=items, next_cursor=rows[-1][0] if more else None)

    # -- writes ----------------------------------------------------------------

    async def upsert(self, records: Iterable[DocStatusRecord]) -> None:
        db = self._conn()
        rows = []
        for record in map(self.check_record, records):
            try:
                rows.append((*self._scope, record.id, record.status.value, _encode(record)))
            except (TypeError, ValueError) as exc:
                raise InvalidValueError(f"document {record.id!r} cannot be stored: {exc}") from exc
        if not rows:
            return
        try:
            with db.transaction() as conn:
                conn.executemany(
                    "INSERT INTO doc_status (workspace, namespace, id, status, data) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace, namespace, id) "
                    "DO UPDATE SET status = excluded.status, data = excluded.data",
                    rows,
                )
        except UnicodeEncodeError as exc:
            raise InvalidValueError(
                f"document status values must be valid Unicode text (no lone surrogates): {exc}"
            ) from exc

    async def delete(self, ids: Iterable[str]) -> None:
        db = self._conn()
        if isinstance(ids, str):
            ids = [ids]
        wanted = list(dict.fromkeys(i for i in ids if bindable(i)))
        if not wanted:
            return
        with db.transaction() as conn:
            for part in chunked(wanted, MAX_PARAMS):
                marks = ",".join("?" * len(part))
                conn.execute(
                    f"DELETE FROM doc_status WHERE workspace = ? AND namespace = ? "
                    f"AND id IN ({marks})",
                    (*self._scope, *part),
                )

    async def drop(self) -> None:
        with self._conn().transaction() as conn:
            conn.execute(
                "DELETE FROM doc_status WHERE workspace = ? AND namespace = ?", self._scope
            )

