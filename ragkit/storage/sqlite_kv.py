"""The default key-value store: one SQLite table, one transaction per write."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from ragkit.errors import InvalidValueError
from ragkit.protocols.base import Capability
from ragkit.protocols.kv import KVStore, encode_record
from ragkit.storage._sqlite import (
    MAX_PARAMS,
    Connection,
    SQLiteOptions,
    bindable,
    chunked,
    database_path,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    workspace TEXT NOT NULL,
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (workspace, namespace, key)
)
"""

_KEYS_PAGE = 1000


class SQLiteKVStore(KVStore):
    """Records as JSON text in ``<working_dir>/<workspace>/ragkit.sqlite``.

    Every ``upsert``/``delete`` is one committed transaction when it returns, so
    ``flush()`` has nothing to do and a killed process loses no returned write.
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

    async def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        db = self._conn()
        keys = list(keys)
        wanted = list(dict.fromkeys(k for k in keys if bindable(k)))
        found: dict[str, str] = {}
        for part in chunked(wanted, MAX_PARAMS):
            marks = ",".join("?" * len(part))
            rows = db.fetchall(
                f"SELECT key, value FROM kv WHERE workspace = ? AND namespace = ? "
                f"AND key IN ({marks})",
                (*self._scope, *part),
            )
            found.update(rows)
        # json.loads per asked position: every returned dict is a fresh copy,
        # even for a key asked twice.
        return [
            json.loads(found[k]) if isinstance(k, str) and k in found else None for k in keys
        ]

    async def count(self) -> int:
        row = self._conn().fetchone(
            "SELECT COUNT(*) FROM kv WHERE workspace = ? AND namespace = ?", self._scope
        )
        return int(row[0]) if row else 0

    def keys(self) -> AsyncIterator[str]:
        self._check_open()
        return self._iter_keys()

    async def _iter_keys(self) -> AsyncIterator[str]:
        # Keyset pagination: no cursor is held across ``yield``, and a key that
        # exists for the whole iteration is seen exactly once even while other
        # tasks write.
        last: str | None = None
        while True:
            db = self._conn()
            if last is None:
                rows = db.fetchall(
                    "SELECT key FROM kv WHERE workspace = ? AND namespace = ? "
                    "ORDER BY key LIMIT ?",
                    (*self._scope, _KEYS_PAGE),
                )
            else:
                rows = db.fetchall(
                    "SELECT key FROM kv WHERE workspace = ? AND namespace = ? AND key > ? "
                    "ORDER BY key LIMIT ?",
                    (*self._scope, last, _KEYS_PAGE),
                )
            for (key,) in rows:
                yield key
            if len(rows) < _KEYS_PAGE:
                return
            last = rows[-1][0]

    # -- writes ----------------------------------------------------------------

    async def upsert(self, records: Mapping[str, Mapping[str, Any]]) -> None:
        db = self._conn()
        if not isinstance(records, Mapping):
            raise InvalidValueError(
                f"upsert takes a mapping of key -> record, got {type(records).__name__}"
            )
        # Validate and serialise everything before writing anything.
        rows = [(*self._scope, key, encode_record(key, value)) for key, value in records.items()]
        if not rows:
            return
        try:
            with db.transaction() as conn:
                conn.executemany(
                    "INSERT INTO kv (workspace, namespace, key, value) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (workspace, namespace, key) DO UPDATE SET value = excluded.value",
                    rows,
                )
        except UnicodeEncodeError as exc:
            raise InvalidValueError(
                f"KV keys and values must be valid Unicode text (no lone surrogates): {exc}"
            ) from exc

    async def delete(self, keys: Iterable[str]) -> None:
        db = self._conn()
        if isinstance(keys, str):
            keys = [keys]
        # A key that is not a str or not encodable cannot be stored: nothing to delete.
        wanted = list(dict.fromkeys(k for k in keys if bindable(k)))
        if not wanted:
            return
        with db.transaction() as conn:
            for part in chunked(wanted, MAX_PARAMS):
                marks = ",".join("?" * len(part))
                conn.execute(
                    f"DELETE FROM kv WHERE workspace = ? AND namespace = ? "
                    f"AND key IN ({marks})",
                    (*self._scope, *part),
                )

    async def drop(self) -> None:
        with self._conn().transaction() as conn:
            conn.execute("DELETE FROM kv WHERE workspace = ? AND namespace = ?", self._scope)

