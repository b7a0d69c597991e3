"""The default key-value store: one SQLite table, one transaction per write.

Text search (``Capability.TEXT_SEARCH``) is SQLite's FTS5 over a ``terms``
column of the same table: the base class gives each record's terms, the row
keeps them, and triggers keep the FTS5 index (external content, so the terms
are stored once) in step with every insert, update and delete of a row, in
the same transaction. A record's terms therefore cannot outlive it or lag
behind it, whoever writes the row and whatever the store's config.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator

from ragkit import lexical
from ragkit.protocols.base import Capability
from ragkit.protocols.kv import KVStore
from ragkit.storage._sqlite import SQLiteStore, chunked

_KEYS_PAGE = 1000

_TERMS_IN = "(length({0}.terms) - length(replace({0}.terms, ' ', '')) + ({0}.terms != ''))"
"""How many terms a row holds: its spaces, plus one unless it has none."""

_TEXT_SCHEMA = [
    # rowid = kv.rowid; FTS5 reads the terms back from kv when it needs them.
    "CREATE VIRTUAL TABLE IF NOT EXISTS kv_text USING fts5("
    "terms, content='kv', content_rowid='rowid', tokenize='unicode61 remove_diacritics 0')",
    # Every (term, row) occurrence, read by term: the postings BM25 is computed from.
    "CREATE VIRTUAL TABLE IF NOT EXISTS kv_text_terms USING fts5vocab(kv_text, 'instance')",
    # Per indexed row, what scoring needs besides the postings, in a narrow
    # table: the kv row holds the record, megabytes that a lookup would read.
    """CREATE TABLE IF NOT EXISTS kv_text_rows (
        id INTEGER PRIMARY KEY, workspace TEXT NOT NULL, namespace TEXT NOT NULL, key TEXT NOT NULL,
        terms INTEGER NOT NULL)""",
    f"""CREATE TRIGGER IF NOT EXISTS kv_text_insert AFTER INSERT ON kv WHEN new.terms IS NOT NULL BEGIN
        INSERT INTO kv_text (rowid, terms) VALUES (new.rowid, new.terms);
        INSERT INTO kv_text_rows VALUES (new.rowid, new.workspace, new.namespace, new.key, {_TERMS_IN.format("new")});
    END""",
    """CREATE TRIGGER IF NOT EXISTS kv_text_delete AFTER DELETE ON kv WHEN old.terms IS NOT NULL BEGIN
        INSERT INTO kv_text (kv_text, rowid, terms) VALUES ('delete', old.rowid, old.terms);
        DELETE FROM kv_text_rows WHERE id = old.rowid;
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS kv_text_update AFTER UPDATE OF terms ON kv BEGIN
        INSERT INTO kv_text (kv_text, rowid, terms) SELECT 'delete', old.rowid, old.terms
            WHERE old.terms IS NOT NULL;
        DELETE FROM kv_text_rows WHERE id = old.rowid;
        INSERT INTO kv_text (rowid, terms) SELECT new.rowid, new.terms WHERE new.terms IS NOT NULL;
        INSERT INTO kv_text_rows SELECT new.rowid, new.workspace, new.namespace, new.key, {_TERMS_IN.format("new")}
            WHERE new.terms IS NOT NULL;
    END""",
    """CREATE TABLE IF NOT EXISTS kv_text_filled (
        workspace TEXT NOT NULL, namespace TEXT NOT NULL, field TEXT NOT NULL,
        PRIMARY KEY (workspace, namespace))""",
]
"""``kv_text_filled``: namespaces whose rows were all given terms (by field),
so that a database written before text search is indexed once, at open."""

_UPSERT = (
    "INSERT INTO kv (workspace, namespace, key, value, terms) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (workspace, namespace, key) DO UPDATE SET value = excluded.value, terms = excluded.terms"
)


class SQLiteKVStore(SQLiteStore, KVStore):
    """Records as JSON text in ``<working_dir>/<workspace>/ragkit.sqlite``."""

    capabilities = SQLiteStore.capabilities | {Capability.TEXT_SEARCH}
    table = "kv"
    key = "key"
    schema = """
    CREATE TABLE IF NOT EXISTS kv (
        workspace TEXT NOT NULL,
        namespace TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        terms TEXT,
        PRIMARY KEY (workspace, namespace, key)
    )
    """
    # terms: the record's search terms, space-separated ('' none); NULL when
    # the namespace has no text field.

    async def _open(self) -> None:
        await super()._open()
        try:
            await self.db.run(self._prepare_text)
        except BaseException:
            await self._close()
            raise

    def _prepare_text(self) -> None:
        with self.db.transaction() as conn:
            if "terms" not in {row[1] for row in conn.execute("PRAGMA table_info(kv)")}:
                conn.execute("ALTER TABLE kv ADD COLUMN terms TEXT")  # a database from before text search
            for statement in _TEXT_SCHEMA:
                conn.execute(statement)
            if self.indexes_text:
                self._fill(conn)

    def _fill(self, conn: sqlite3.Connection) -> None:
        """Give every row of this namespace its terms, once per field."""
        field = self.config.text_field
        filled = conn.execute(
            "SELECT field FROM kv_text_filled WHERE workspace = ? AND namespace = ?", self._scope
        ).fetchone()
        if filled is not None and filled[0] == field:
            return
        rows = conn.execute(f"SELECT rowid, value {self._where()}", self._scope).fetchall()
        conn.executemany(
            "UPDATE kv SET terms = ? WHERE rowid = ?",
            [(" ".join(lexical.terms(json.loads(value).get(field))), rowid) for rowid, value in rows],
        )
        conn.execute(
            "INSERT INTO kv_text_filled (workspace, namespace, field) VALUES (?, ?, ?) "
            "ON CONFLICT (workspace, namespace) DO UPDATE SET field = excluded.field",
            (*self._scope, field),
        )

    async def _get_many(self, keys: list[str]) -> dict[str, str]:
        return await self.select("value", keys)

    async def _upsert(self, records: dict[str, str]) -> None:
        # Rows without terms: if the namespace was indexed, the next indexed
        # open must fill it again ([kv.text.fills]).
        await self.write(
            _UPSERT, [(*self._scope, key, text, None) for key, text in records.items()],
            ("DELETE FROM kv_text_filled WHERE workspace = ? AND namespace = ?", self._scope),
        )

    async def _upsert_indexed(self, records: dict[str, str], terms: dict[str, list[str]]) -> None:
        await self.write(_UPSERT, [(*self._scope, key, text, " ".join(terms[key])) for key, text in records.items()])

    async def _text_postings(self, words: list[str]) -> list[tuple[str, int, dict[str, int]]]:
        return await self.db.run(self._postings, words)

    def _postings(self, words: list[str]) -> list[tuple[str, int, dict[str, int]]]:
        # One vocabulary read per word (an index range in FTS5, sorted by row):
        # a single IN over them made SQLite sort every occurrence (39 ms
        # against 3 at 18,900 records).
        counts: dict[int, dict[str, int]] = {}
        for word in words:
            for row, count in self.db.fetchall(
                "SELECT doc, count(*) FROM kv_text_terms WHERE term = ? GROUP BY doc", (word,)
            ):
                counts.setdefault(row, {})[word] = count
        rows = list(counts)
        postings = []
        for part in chunked(rows):
            marks = ",".join("?" * len(part))
            for row, key, length in self.db.fetchall(
                f"SELECT id, key, terms FROM kv_text_rows WHERE id IN ({marks}) AND workspace = ? AND namespace = ?",
                (*part, *self._scope),
            ):
                postings.append((key, length, counts[row]))
        return postings

    async def _count(self) -> int:
        return (await self.db.run(self.db.fetchone, f"SELECT COUNT(*) {self._where()}", self._scope))[0]  # type: ignore[index]

    async def _keys(self) -> AsyncIterator[str]:
        last: str | None = None
        while True:
            page = await self.page("key", last, _KEYS_PAGE)
            for key in page:
                yield key
            if len(page) < _KEYS_PAGE:
                return
            last = page[-1]
