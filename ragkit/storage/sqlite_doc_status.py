"""The default document-status store: a SQLite table next to the KV table."""

from __future__ import annotations

from ragkit.protocols.doc_status import DocStatusStore, StatusRow
from ragkit.schema import DocStatus
from ragkit.storage._sqlite import SQLiteStore


class SQLiteDocStatusStore(SQLiteStore, DocStatusStore):
    """Status records as JSON in ``<working_dir>/<workspace>/ragkit.sqlite``.

    Listings use keyset pagination on ``id`` (the cursor is the last id of the
    previous page), through an index on (status, id).
    """

    table = "doc_status"
    key = "id"
    schema = """
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

    async def _get(self, ids: list[str]) -> dict[str, str]:
        return self.select("data", ids)

    async def _counts(self) -> dict[str, int]:
        return dict(
            self.db.fetchall(f"SELECT status, COUNT(*) {self._where(' GROUP BY status')}", self._scope)
        )

    async def _list_page(self, status: DocStatus | None, limit: int, after: str | None) -> list[str]:
        if status is None:
            return self.page("data", after, limit)
        return self.page("data", after, limit, " AND status = ?", (status.value,))

    async def _upsert(self, rows: list[StatusRow]) -> None:
        self.write(
            "INSERT INTO doc_status (workspace, namespace, id, status, data) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace, namespace, id) "
            "DO UPDATE SET status = excluded.status, data = excluded.data",
            [(*self._scope, row.id, row.status.value, row.data) for row in rows],
        )
