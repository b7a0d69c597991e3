"""The SQLite KV store over a database written before text search: the
``kv`` table had no ``terms`` column. Opening it with a text field adds the
column, keeps every record, and makes them searchable (the contract's
[kv.text.fills] speaks of records, not of schemas: this is the schema half).

Troubleshoot: ``SQLiteKVStore._prepare_text`` adds the column when
``PRAGMA table_info(kv)`` lacks it, then fills the namespace's terms.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from ragkit.protocols import StoreConfig
from ragkit.storage import SQLiteKVStore

OLD_SCHEMA = """
CREATE TABLE kv (workspace TEXT NOT NULL, namespace TEXT NOT NULL, key TEXT NOT NULL,
    value TEXT NOT NULL, PRIMARY KEY (workspace, namespace, key));
"""


async def test_a_database_from_before_text_search_opens_and_is_searchable(tmp_path):
    config = StoreConfig(namespace="chunks", workspace="w", working_dir=tmp_path, text_field="content")
    path = tmp_path / "w" / "ragkit.sqlite"
    path.parent.mkdir()
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SCHEMA)
        conn.executemany("INSERT INTO kv VALUES ('w', 'chunks', ?, ?)", [
            ("c1", json.dumps({"content": "Hank Snow was born in Nova Scotia"})),
            ("c2", json.dumps({"content": "Kassel hosts documenta"})),
        ])
    conn.close()
    store = SQLiteKVStore(config)
    await store.open()
    try:
        assert await store.get("c2") == {"content": "Kassel hosts documenta"}
        assert [k for k, _ in await store.search_text("Nova Scotia", 5)] == ["c1"]
        await store.upsert({"c3": {"content": "Kassel is in Hesse"}})
        assert sorted(k for k, _ in await store.search_text("Kassel", 5)) == ["c2", "c3"]
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert "terms" in {row[1] for row in conn.execute("PRAGMA table_info(kv)")}
    conn.close()


async def test_close_closes_the_connection_and_a_second_close_is_harmless(tmp_path):
    store = SQLiteKVStore(StoreConfig(namespace="n", workspace="w", working_dir=tmp_path))
    await store.open()
    conn = store.db._conn
    await store.close()
    with pytest.raises(sqlite3.ProgrammingError):  # "Cannot operate on a closed database"
        conn.execute("SELECT 1")
    await store._close()  # the hook again, with no connection: nothing to do
