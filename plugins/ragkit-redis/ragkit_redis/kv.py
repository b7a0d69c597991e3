"""``RedisKVStore``: records as JSON strings, one key each, indexed by a sorted set.

Each batch is one round trip: ``upsert`` sends ``MULTI, MSET, ZADD, EXEC``,
``delete`` ``MULTI, UNLINK, ZREM, EXEC``, ``get_many`` one ``MGET`` per
``batch_size`` keys. Writes made under the workspace's writer lock are fenced
(``ragkit_redis._base``: ``WATCH`` of the lease's fencing counter). ``count`` is ``ZCARD`` of the index; ``keys()`` pages the
index with ``ZRANGEBYLEX`` from the last key seen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

from ragkit.protocols.base import Capability
from ragkit.protocols.kv import KVStore
from ragkit_redis._base import RedisOptions, RedisStore


class RedisKVStore(RedisStore, KVStore):
    """Namespaced JSON records in Redis (see ``ragkit_redis._base`` for the keys)."""

    name: ClassVar[str] = "redis"
    kind = "kv"
    # TRANSACTIONAL: each batch is one MULTI/EXEC, applied whole or (if the
    # connection fails before EXEC) not at all.
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.TRANSACTIONAL, Capability.CONCURRENT_WRITES}
    )
    Options: ClassVar[type[RedisOptions]] = RedisOptions

    async def _get_many(self, keys: list[str]) -> dict[str, bytes]:
        return await self.fetch(keys)

    async def _upsert(self, records: dict[str, str]) -> None:
        def queue(pipe: Any) -> None:
            pipe.mset({self.record_key(k): v.encode("utf-8") for k, v in records.items()})
            pipe.zadd(self.ids_key, {k.encode("utf-8"): 0 for k in records})

        await self.commit("write records", queue)

    async def _count(self) -> int:
        async with self.errors("count records"):
            return int(await self.client.zcard(self.ids_key))

    async def _keys(self) -> AsyncIterator[str]:
        # Keyset pages of the index: a key present for the whole iteration is
        # yielded exactly once, whatever other tasks write meanwhile.
        last: str | None = None
        size = self.options.batch_size
        while True:
            page = await self.scan_index(self.ids_key, last, size)
            for key in page:
                yield key
            if len(page) < size:
                return
            last = page[-1]
