"""The SQLite doc-status change feed on a database made before it existed,
and writes made by a process that does not know about it.

Troubleshoot: ``SQLiteDocStatusStore._open`` adds the ``generation`` column
and the feed's triggers to an older database, and records in
``doc_status_feed`` from which generation the feed is complete; the triggers
(not the adapter's Python) stamp rows and leave tombstones, so any writer's
statements are recorded.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

from ragkit.backends import build_store
from ragkit.schema import DocStatus, DocStatusRecord
from ragkit.settings import Settings

T0 = datetime(2024, 1, 2, tzinfo=timezone.utc)
OLD_SCHEMA = """
CREATE TABLE doc_status (workspace TEXT NOT NULL, namespace TEXT NOT NULL, id TEXT NOT NULL,
    status TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (workspace, namespace, id));
CREATE INDEX doc_status_by_status ON doc_status (workspace, namespace, status, id);
CREATE TABLE doc_status_generation (workspace TEXT NOT NULL, namespace TEXT NOT NULL,
    generation INTEGER NOT NULL, PRIMARY KEY (workspace, namespace));
"""


def record(id: str) -> DocStatusRecord:
    return DocStatusRecord(id=id, status=DocStatus.PROCESSED, created_at=T0, updated_at=T0)


async def test_a_database_from_before_the_feed_opens_and_starts_its_feed_there(tmp_path):
    """Records and a generation written with the previous schema: the store
    opens, keeps them, answers ``None`` for changes from before it opened
    (its earlier writes left no trace) and names every write after."""
    settings = Settings(working_dir=tmp_path)
    store = build_store(settings, "doc_status", "doc_status")
    path = store.path
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
        db.executemany("INSERT INTO doc_status VALUES (?, ?, ?, ?, ?)",
                       [(store.workspace, store.namespace, r.id, r.status.value, r.model_dump_json())
                        for r in (record("old1"), record("old2"))])
        db.execute("INSERT INTO doc_status_generation VALUES (?, ?, 7)", (store.workspace, store.namespace))
    async with store:
        assert [r.id for r in (await store.list_page()).items] == ["old1", "old2"]
        assert await store.generation() == 7
        assert await store.changes_since(6) is None, "a feed from before the migration must say it is not whole"
        start = await store.changes_since(7)
        assert start is not None and (start.records, start.deleted) == ([], [])
        await store.delete(["old1"])
        await store.upsert([record("new")])
        changes = await store.changes_since(7)
        assert ([r.id for r in changes.records], changes.deleted) == (["new"], ["old1"])
    async with build_store(settings, "doc_status", "doc_status") as again:  # opening twice migrates once
        assert await again.changes_since(6) is None
        assert (await again.changes_since(7)).deleted == ["old1"]


async def test_statements_of_a_writer_without_the_feed_are_recorded(tmp_path):
    """A process of the previous ragkit writes with its own statements (no
    generation column, a bump of the counter): the triggers stamp the row and
    leave the tombstone, so readers of the feed miss nothing."""
    settings = Settings(working_dir=tmp_path)
    async with build_store(settings, "doc_status", "doc_status") as store:
        await store.upsert([record("a"), record("b")])
        since = await store.generation()
        scope = (store.workspace, store.namespace)
        with sqlite3.connect(store.path, isolation_level=None) as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO doc_status (workspace, namespace, id, status, data) VALUES (?, ?, ?, ?, ?) "
                       "ON CONFLICT (workspace, namespace, id) DO UPDATE SET status = excluded.status, data = excluded.data",
                       (*scope, "a", "failed", record("a").model_copy(update={"status": DocStatus.FAILED}).model_dump_json()))
            db.execute("DELETE FROM doc_status WHERE workspace = ? AND namespace = ? AND id = 'b'", scope)
            db.execute("UPDATE doc_status_generation SET generation = generation + 1 "
                       "WHERE workspace = ? AND namespace = ?", scope)
            db.execute("COMMIT")
        changes = await store.changes_since(since)
        assert changes.generation == since + 1
        assert [(r.id, r.status) for r in changes.records] == [("a", DocStatus.FAILED)] and changes.deleted == ["b"]
        assert await store.changes_since(since + 1) == (since + 1, [], [])
