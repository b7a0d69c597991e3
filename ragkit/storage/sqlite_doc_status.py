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

    The change feed (``changes_since``): each row's ``generation`` column holds
    the generation of its last write, and a deleted row leaves a tombstone
    (id, generation) in ``doc_status_gone`` until the id is written again.
    Triggers keep both, in the writing statement's transaction, as "the
    generation now + 1": ``wrote`` bumps the counter to that number after the
    statements. Being in the database, they also record the writes of a
    process running an older ragkit. A database made before the feed gets the
    column at ``open()``; its ``doc_status_feed`` row says the feed starts at
    the generation it had then ([doc_status.changes.floor]). Tombstones are
    not pruned: at most one per id deleted and not written again.
    """

    capabilities: ClassVar[frozenset[Capability]] = SQLiteStore.capabilities | {
        Capability.GENERATION, Capability.CHANGES
    }

    table = "doc_status"
    key = "id"
    schema = """
    CREATE TABLE IF NOT EXISTS doc_status (
        workspace TEXT NOT NULL,
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        status TEXT NOT NULL,
        data TEXT NOT NULL,
        generation INTEGER NOT NULL DEFAULT 0,
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
    feed = """
    CREATE INDEX IF NOT EXISTS doc_status_by_generation
        ON doc_status (workspace, namespace, generation);
    CREATE TABLE IF NOT EXISTS doc_status_gone (
        workspace TEXT NOT NULL,
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        generation INTEGER NOT NULL,
        PRIMARY KEY (workspace, namespace, id)
    );
    CREATE INDEX IF NOT EXISTS doc_status_gone_by_generation
        ON doc_status_gone (workspace, namespace, generation);
    CREATE TABLE IF NOT EXISTS doc_status_feed (
        workspace TEXT NOT NULL,
        namespace TEXT NOT NULL,
        since INTEGER NOT NULL,
        PRIMARY KEY (workspace, namespace)
    );
    CREATE TRIGGER IF NOT EXISTS doc_status_feed_insert AFTER INSERT ON doc_status BEGIN
        UPDATE doc_status SET generation = {next}
            WHERE workspace = NEW.workspace AND namespace = NEW.namespace AND id = NEW.id;
        DELETE FROM doc_status_gone
            WHERE workspace = NEW.workspace AND namespace = NEW.namespace AND id = NEW.id;
    END;
    CREATE TRIGGER IF NOT EXISTS doc_status_feed_update AFTER UPDATE OF status, data ON doc_status BEGIN
        UPDATE doc_status SET generation = {next}
            WHERE workspace = NEW.workspace AND namespace = NEW.namespace AND id = NEW.id;
    END;
    CREATE TRIGGER IF NOT EXISTS doc_status_feed_delete AFTER DELETE ON doc_status BEGIN
        INSERT INTO doc_status_gone (workspace, namespace, id, generation)
            VALUES (OLD.workspace, OLD.namespace, OLD.id, {old_next})
            ON CONFLICT (workspace, namespace, id) DO UPDATE SET generation = excluded.generation;
    END
    """.format(
        next="1 + COALESCE((SELECT generation FROM doc_status_generation g "
        "WHERE g.workspace = NEW.workspace AND g.namespace = NEW.namespace), 0)",
        old_next="1 + COALESCE((SELECT generation FROM doc_status_generation g "
        "WHERE g.workspace = OLD.workspace AND g.namespace = OLD.namespace), 0)",
    )

    async def _open(self) -> None:
        await super()._open()
        try:
            with self.db.transaction() as conn:
                columns = {row[1] for row in conn.execute("PRAGMA table_info(doc_status)")}
                if "generation" not in columns:
                    # A database from before the feed: its earlier writes left no
                    # trace, so the feed starts at each namespace's generation now.
                    conn.execute("ALTER TABLE doc_status ADD COLUMN generation INTEGER NOT NULL DEFAULT 0")
                    conn.execute("CREATE TABLE IF NOT EXISTS doc_status_feed (workspace TEXT NOT NULL, "
                                 "namespace TEXT NOT NULL, since INTEGER NOT NULL, PRIMARY KEY (workspace, namespace))")
                    conn.execute("INSERT OR IGNORE INTO doc_status_feed (workspace, namespace, since) "
                                 "SELECT workspace, namespace, generation FROM doc_status_generation")
                for statement in _statements(self.feed):
                    conn.execute(statement)
        except BaseException:
            await self._close()
            raise

    async def _get(self, ids: list[str]) -> dict[str, str]:
        return await self.select("data", ids)

    async def _counts(self) -> dict[str, int]:
        return dict(
            await self.db.run(self.db.fetchall, f"SELECT status, COUNT(*) {self._where(' GROUP BY status')}", self._scope)
        )

    async def _list_page(self, status: DocStatus | None, limit: int, after: str | None) -> list[str]:
        if status is None:
            return await self.page("data", after, limit)
        return await self.page("data", after, limit, " AND status = ?", (status.value,))

    async def _generation(self) -> int:
        return await self.db.run(self._read_generation)

    def _read_generation(self) -> int:
        row = self.db.fetchone(
            "SELECT generation FROM doc_status_generation WHERE workspace = ? AND namespace = ?", self._scope
        )
        return int(row[0]) if row else 0

    async def _changed_since(self, generation: int) -> tuple[int, list[str]] | None:
        return await self.db.run(self._read_changes, generation)

    def _read_changes(self, generation: int) -> tuple[int, list[str]] | None:
        now = self._read_generation()  # first: see _changed_since in the protocol
        floor = self.db.fetchone("SELECT since FROM doc_status_feed WHERE workspace = ? AND namespace = ?", self._scope)
        if floor is not None and generation < floor[0]:
            return None
        rows = self.db.fetchall(
            "SELECT id FROM doc_status WHERE workspace = ? AND namespace = ? AND generation > ? "
            "UNION SELECT id FROM doc_status_gone WHERE workspace = ? AND namespace = ? AND generation > ?",
            (*self._scope, generation, *self._scope, generation),
        )
        return now, [id for (id,) in rows]

    def wrote(self, conn: sqlite3.Connection) -> None:
        # Not deleted by drop(): a counter that restarted could come back to a
        # number a reader kept, for other records.
        conn.execute(
            "INSERT INTO doc_status_generation (workspace, namespace, generation) VALUES (?, ?, 1) "
            "ON CONFLICT (workspace, namespace) DO UPDATE SET generation = generation + 1",
            self._scope,
        )

    async def _upsert(self, rows: list[StatusRow]) -> None:
        await self.write(
            "INSERT INTO doc_status (workspace, namespace, id, status, data) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace, namespace, id) "
            "DO UPDATE SET status = excluded.status, data = excluded.data",
            [(*self._scope, row.id, row.status.value, row.data) for row in rows],
        )


def _statements(script: str) -> list[str]:
    """The statements of ``script``, triggers (whose bodies hold ``;``) whole."""
    out, pending = [], ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            out.append(pending)
            pending = ""
    if pending.strip():
        out.append(pending)
    return out
