"""KV store ``postgres``: one row per record, its JSON text as given."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import ClassVar

from ragkit.protocols.base import Capability
from ragkit.protocols.kv import KVStore
from ragkit_postgres._db import PostgresStore


class PostgresKVStore(PostgresStore, KVStore):
    """Records in ``<prefix>_kv``; a batch is one statement (arrays, so no
    parameter limit) in one transaction."""

    name: ClassVar[str] = "postgres"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.TRANSACTIONAL, Capability.CONCURRENT_WRITES}
    )

    async def _get_many(self, keys: list[str]) -> dict[str, str]:
        async with self.read("read records") as conn:
            rows = await conn.fetch(
                f"SELECT key, value FROM {self.table('kv')} WHERE workspace = $1 AND namespace = $2 "
                "AND key = ANY($3::text[])", *self.scope, keys,
            )
        return {r[0]: r[1] for r in rows}

    async def _upsert(self, records: dict[str, str]) -> None:
        async with self.write("write records", {self.table("kv"): len(records)}) as conn:
            await conn.execute(
                f"INSERT INTO {self.table('kv')} (workspace, namespace, key, value) "
                "SELECT $1, $2, k, v FROM unnest($3::text[], $4::text[]) AS t(k, v) "
                "ON CONFLICT (workspace, namespace, key) DO UPDATE SET value = excluded.value",
                *self.scope, list(records), list(records.values()),
            )

    async def _delete(self, ids: list[str]) -> None:
        await self.delete_keys(self.table("kv"), "key", ids)

    async def _count(self) -> int:
        return await self.count_rows(self.table("kv"))

    def _keys(self) -> AsyncIterator[str]:
        return self.scan_keys(self.table("kv"), "key")

    async def _drop(self) -> None:
        async with self.write("drop") as conn:
            await conn.execute(f"DELETE FROM {self.table('kv')} WHERE workspace = $1 AND namespace = $2", *self.scope)
