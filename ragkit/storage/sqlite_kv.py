"""The default key-value store: one SQLite table, one transaction per write."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ragkit.protocols.kv import KVStore
from ragkit.storage._sqlite import SQLiteStore

_KEYS_PAGE = 1000


class SQLiteKVStore(SQLiteStore, KVStore):
    """Records as JSON text in ``<working_dir>/<workspace>/ragkit.sqlite``."""

    table = "kv"
    key = "key"
    schema = """
    CREATE TABLE IF NOT EXISTS kv (
        workspace TEXT NOT NULL,
        namespace TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (workspace, namespace, key)
    )
    """

    async def _get_many(self, keys: list[str]) -> dict[str, str]:
        return await self.select("value", keys)

    async def _upsert(self, records: dict[str, str]) -> None:
        await self.write(
            "INSERT INTO kv (workspace, namespace, key, value) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (workspace, namespace, key) DO UPDATE SET value = excluded.value",
            [(*self._scope, key, text) for key, text in records.items()],
        )

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
