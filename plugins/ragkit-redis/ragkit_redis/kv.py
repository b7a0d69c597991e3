"""``RedisKVStore``: records as JSON strings, one key each, indexed by a sorted set.

Each batch is one round trip: ``upsert`` sends ``MULTI, MSET, ZADD, EXEC``,
``delete`` ``MULTI, UNLINK, ZREM, EXEC``, ``get_many`` one ``MGET`` per
``batch_size`` keys. ``count`` is ``ZCARD`` of the index; ``keys()`` pages the
index with ``ZRANGEBYLEX`` from the last key seen.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from ragkit.errors import InvalidValueError
from ragkit.protocols.base import Capability
from ragkit.protocols.kv import KVStore, encode_record
from ragkit_redis._base import RedisOptions, RedisStore, chunked, storable


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

    async def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        client = self.client
        keys = list(keys)
        wanted = list(dict.fromkeys(k for k in keys if storable(k)))
        found: dict[str, bytes] = {}
        async with self.errors("read records"):
            for part in chunked(wanted, self.options.batch_size):
                values = await client.mget([self.record_key(k) for k in part])
                found.update((k, v) for k, v in zip(part, values) if v is not None)
        # json.loads per asked position: a key asked twice gives two dicts.
        return [json.loads(found[k]) if isinstance(k, str) and k in found else None for k in keys]

    async def upsert(self, records: Mapping[str, Mapping[str, Any]]) -> None:
        client = self.client
        if not isinstance(records, Mapping):
            raise InvalidValueError(
                f"upsert takes a mapping of key -> record, got {type(records).__name__}"
            )
        # Validate and serialise the whole batch before writing anything.
        pairs = {self.record_key(k): encode_record(k, v).encode("utf-8") for k, v in records.items()}
        if not pairs:
            return
        async with self.errors("write records"):
            async with client.pipeline(transaction=True) as pipe:
                pipe.mset(pairs)
                pipe.zadd(self.ids_key, {k.encode("utf-8"): 0 for k in records})
                await pipe.execute()

    async def delete(self, keys: Iterable[str]) -> None:
        client = self.client
        if isinstance(keys, str):
            keys = [keys]
        wanted = list(dict.fromkeys(k for k in keys if storable(k)))
        if not wanted:
            return
        async with self.errors("delete records"):
            async with client.pipeline(transaction=True) as pipe:
                pipe.unlink(*(self.record_key(k) for k in wanted))
                pipe.zrem(self.ids_key, *(k.encode("utf-8") for k in wanted))
                await pipe.execute()

    async def count(self) -> int:
        client = self.client
        async with self.errors("count records"):
            return int(await client.zcard(self.ids_key))

    def keys(self) -> AsyncIterator[str]:
        self._check_open()
        return self._iter_keys()

    async def _iter_keys(self) -> AsyncIterator[str]:
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

    async def drop(self) -> None:
        self._check_open()
        await self.drop_indexed([self.ids_key])
