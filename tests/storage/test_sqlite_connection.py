"""``ragkit.storage._sqlite.Connection``: what the SQLite stores share and the
protocol cannot speak of: the journal mode, the connection's one thread, and
the messages a failing database gives.

Troubleshoot: ``Connection.__init__`` (WAL), ``Connection.run`` (the thread),
``Connection._failed`` (the messages).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from ragkit.errors import StoreError
from ragkit.protocols import StoreConfig
from ragkit.storage._sqlite import Connection
from ragkit.storage.sqlite_kv import SQLiteKVStore


def test_a_database_that_refuses_wal_is_refused_with_the_fix(tmp_path, monkeypatch):
    """An in-memory database cannot be in WAL mode (SQLite answers "memory"),
    as a file on a filesystem without shared memory cannot."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=r"refused WAL journal mode \(got 'memory'\); put the working_dir on a local filesystem"):
        Connection(":memory:", "NORMAL")


async def test_calls_run_in_call_order_on_the_connections_own_thread(tmp_path):
    """``run`` queues calls on one thread of the connection's: a slow first
    call is not overtaken (a write's transaction, then the read that follows)."""
    db = Connection(tmp_path / "db.sqlite", "NORMAL")
    order: list[int] = []
    threads: set[int] = set()

    def call(i: int) -> None:
        if i == 0:
            time.sleep(0.05)
        order.append(i)
        threads.add(threading.get_ident())

    try:
        await asyncio.gather(*(db.run(call, i) for i in range(6)))
    finally:
        db.close()
    assert order == list(range(6))
    assert len(threads) == 1 and threading.get_ident() not in threads


async def test_a_full_database_names_the_file_and_says_nothing_committed_is_lost(tmp_path):
    """SQLITE_FULL, here from a page limit (as a full disk gives it)."""
    config = StoreConfig(namespace="full", workspace="w", working_dir=tmp_path)
    async with SQLiteKVStore(config) as kv:
        await kv.upsert({"kept": {"v": 1}})
        pages = kv.db.fetchone("PRAGMA page_count")[0]
        kv.db.fetchone(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreError) as caught:
            await kv.upsert({f"k{i}": {"text": "x" * 2000} for i in range(50)})
        assert await kv.get("kept") == {"v": 1} and await kv.count() == 1
    message = str(caught.value)
    assert str(kv.path) in message and "database or disk is full" in message
    assert message.endswith("If its disk is full, free space and run the command again: what was committed "
                            "before is intact and the next run finishes the rest")


async def test_a_file_that_is_not_a_database_is_named_as_damaged(tmp_path):
    path = tmp_path / "w" / "ragkit.sqlite"
    path.parent.mkdir()
    path.write_bytes(b"not a database " * 400)
    with pytest.raises(StoreError) as caught:
        Connection(path, "NORMAL")
    message = str(caught.value)
    assert message == (f"SQLite database {path} is damaged or not a database (file is not a database); restore "
                       "it from a backup, or move it away and index the documents again")
    assert path.read_bytes() == b"not a database " * 400, "nothing is written over it"


async def test_a_damaged_page_is_named_as_damaged_where_it_is_read(tmp_path):
    config = StoreConfig(namespace="n", workspace="w", working_dir=tmp_path)
    async with SQLiteKVStore(config) as kv:
        await kv.upsert({f"k{i}": {"text": "x" * 500} for i in range(200)})
        kv.db.fetchone("PRAGMA wal_checkpoint(TRUNCATE)")
        path, size = kv.path, kv.path.stat().st_size
    with path.open("r+b") as f:  # every page but the first (header and schema) overwritten
        f.seek(4096)
        f.write(b"\xff" * (size - 4096))
    async with SQLiteKVStore(config) as kv:
        with pytest.raises(StoreError, match=r"is damaged or not a database \(database disk image is malformed\)"):
            await kv.get_many([f"k{i}" for i in range(200)])


def test_an_error_without_a_sqlite_result_code_is_a_store_error(tmp_path):
    """sqlite3's own errors (a closed connection's) carry no result code."""
    db = Connection(tmp_path / "db.sqlite", "NORMAL")
    db.close()
    with pytest.raises(StoreError, match="failed: Cannot operate on a closed database"):
        db.fetchall("SELECT 1")


def test_a_database_that_cannot_be_created_names_its_path_and_why(tmp_path):
    """A file where the database's folder must go: a ``ConfigError`` naming
    the database and the operating system's reason."""
    from ragkit.errors import ConfigError

    (tmp_path / "ws").write_text("not a folder", encoding="utf-8")
    path = tmp_path / "ws" / "ragkit.sqlite"
    with pytest.raises(ConfigError) as caught:
        Connection(path, "NORMAL")
    assert str(caught.value) == f"cannot open SQLite database {path}: [Errno 17] File exists: '{tmp_path / 'ws'}'"


def test_a_statement_outside_a_transaction_commits_by_itself(tmp_path):
    """Autocommit: a write run by ``fetchall`` or ``fetchone`` (``... RETURNING``)
    is seen at once by another connection; sqlite3's default would open a
    transaction for it that nothing commits."""
    db, other = Connection(tmp_path / "db.sqlite", "NORMAL"), Connection(tmp_path / "db.sqlite", "NORMAL")
    try:
        db.script("CREATE TABLE t (x INTEGER)")
        assert db.fetchall("INSERT INTO t VALUES (1) RETURNING x") == [(1,)]
        assert db.fetchone("UPDATE t SET x = 2 RETURNING x") == (2,)
        assert other.fetchall("SELECT x FROM t") == [(2,)]
    finally:
        db.close()
        other.close()
