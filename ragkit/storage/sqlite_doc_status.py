"""The default document-status store: a SQLite table next to the KV table."""

from __future__ import annotations

import sqlite3
from typing import ClassVar

from ragkit.protocols.base import Capability
from ragkit.protocols.doc_status import DocStatusStore, StatusRow
from ragkit.schema import DocStatus
from ragkit.storage._sqlite import SQLiteStore


class SQLiteDocStatusStore(SQLiteStore, DocStatusStore):
    """Status records as JSON in ``<working_dir>/<workspace>/ragkit.sqlite``.

    Listings use keyset pagination on ``id`` (the cursor is the last id of the
    previous page), through an index on (status, id). The generation is a row
    of ``doc_status_generation`` that every write's transaction increments
    (``wrote``): other connections and processes read it from the same file.
    """

    capabilities: ClassVar[frozenset[Capability]] = SQLiteStore.capabilities | {Capability.GENERATION}

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
        ON doc_status (workspace, namespace, status, id);
    CREATE TABLE IF NOT EXISTS doc_status_generation (
        workspace TEXT NOT NULL,
        namespace TEXT NOT NULL,
        generation INTEGER NOT NULL,
        PRIMARY KEY (workspace, namespace)
    )
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

    async def _generation(self) -> int:
        row = self.db.fetchone(
            "SELECT generation FROM doc_status_generation WHERE workspace = ? AND namespace = ?", self._scope
        )
        return int(row[0]) if row else 0

    def wrote(self, conn: sqlite3.Connection) -> None:
        # Not deleted by drop(): a counter that restarted could come back to a
        # number a reader kept, for other records.
        conn.execute(
            "INSERT INTO doc_status_generation (workspace, namespace, generation) VALUES (?, ?, 1) "
            "ON CONFLICT (workspace, namespace) DO UPDATE SET generation = generation + 1",
            self._scope,
        )

    async def _upsert(self, rows: list[StatusRow]) -> None:
        self.write(
            "INSERT INTO doc_status (workspace, namespace, id, status, data) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace, namespace, id) "
            "DO UPDATE SET status = excluded.status, data = excluded.data",
            [(*self._scope, row.id, row.status.value, row.data) for row in rows],
        )
