"""``RedisKVStore``: records as JSON strings, one key each, indexed by a sorted set.

Each batch is one round trip: ``upsert`` sends ``MULTI, MSET, ZADD, EXEC``,
``delete`` ``MULTI, UNLINK, ZREM, EXEC``, ``get_many`` one ``MGET`` per
``batch_size`` keys. Writes made under the workspace's writer lock are fenced
(``ragkit_redis._base``: ``WATCH`` of the lease's fencing counter). ``count`` is ``ZCARD`` of the index; ``keys()`` pages the
index with ``ZRANGEBYLEX`` from the last key seen.

Text search (``Capability.TEXT_SEARCH``, a store given a ``text_field``): the
postings of each term are a hash ``...:t:<term>`` (record key -> count), and
``...:tt`` / ``...:tn`` hold each record's ``{term: count}`` and its number of
terms. A Lua script queued in the write's own ``MULTI`` replaces a record's
postings with its new terms (or removes them: a write from a store given no
text field, a delete, a drop), so they change with the record, atomically.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from ragkit import lexical
from ragkit.protocols.base import Capability
from ragkit.protocols.kv import KVStore
from ragkit_redis._base import RedisOptions, RedisStore, chunked

_TERMS = """
local prefix, records = ARGV[1], ARGV[2]
if ARGV[3] == '0' and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 4, #ARGV, 3 do
  local key, expected, new = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if expected == '' or redis.call('GET', records .. key) == expected then
    local old = redis.call('HGET', KEYS[1], key)
    if old then
      for term, _ in pairs(cjson.decode(old)) do redis.call('HDEL', prefix .. term, key) end
      redis.call('HDEL', KEYS[1], key)
      redis.call('HDEL', KEYS[2], key)
    end
    if new ~= '' then
      local n = 0
      for term, count in pairs(cjson.decode(new)) do
        redis.call('HSET', prefix .. term, key, count)
        n = n + count
      end
      redis.call('HSET', KEYS[1], key, new)
      redis.call('HSET', KEYS[2], key, n)
    end
  end
end
return 1
"""
"""Replace records' postings. ARGV: the term key prefix, the record key
prefix, '1' when some record gets terms (else nothing to do where no record
has any), then (record key, the value it must still hold or '', its
``{term: count}`` JSON or '' for none) triples."""


class RedisKVStore(RedisStore, KVStore):
    """Namespaced JSON records in Redis (see ``ragkit_redis._base`` for the keys)."""

    name: ClassVar[str] = "redis"
    kind = "kv"
    # TRANSACTIONAL: each batch is one MULTI/EXEC, applied whole or (if the
    # connection fails before EXEC) not at all.
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.TRANSACTIONAL, Capability.CONCURRENT_WRITES, Capability.TEXT_SEARCH}
    )
    Options: ClassVar[type[RedisOptions]] = RedisOptions

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.terms_key = f"{self.base}:tt".encode()
        self.lengths_key = f"{self.base}:tn".encode()
        self.term_prefix = f"{self.base}:t:"
        self.filled_key = f"{self.base}:tfield".encode()

    async def _open(self) -> None:
        await super()._open()
        if self.indexes_text:
            await self._fill()

    async def _fill(self) -> None:
        """Give every record its terms, once per field: records written before
        text search, or by a store given no text field. Only where the record
        is still the one read: a writer that replaced it meanwhile wrote its
        terms with it."""
        field = str(self.config.text_field)
        async with self.errors("read the text index's state"):
            if await self.client.get(self.filled_key) == field.encode():
                return
        last: str | None = None
        while True:
            page = await self.scan_index(self.ids_key, last, self.options.batch_size)
            found = await self.fetch(page)
            triples = [(k, v.decode("utf-8"), _counts(lexical.terms(json.loads(v).get(field))))
                       for k, v in found.items()]
            async with self.errors("index records' words"):
                await self.client.eval(_TERMS, 2, self.terms_key, self.lengths_key, *self._script_args(triples))
                if len(page) < self.options.batch_size:
                    await self.client.set(self.filled_key, field)
                    return
            last = page[-1]

    def _script_args(self, triples: list[tuple[str, str, str]]) -> list[str]:
        args = [self.term_prefix, self._record_prefix.decode("utf-8"), "1" if any(t[2] for t in triples) else "0"]
        for triple in triples:
            args.extend(triple)
        return args

    def _queue_terms(self, pipe: Any, terms: dict[str, str]) -> None:
        """Queue the postings' replacement of these records (``''``: none)."""
        triples = [(k, "", t) for k, t in terms.items()]
        pipe.eval(_TERMS, 2, self.terms_key, self.lengths_key, *self._script_args(triples))

    async def _get_many(self, keys: list[str]) -> dict[str, bytes]:
        return await self.fetch(keys)

    async def _upsert(self, records: dict[str, str]) -> None:
        await self._write(records, dict.fromkeys(records, ""), unfill=True)

    async def _upsert_indexed(self, records: dict[str, str], terms: dict[str, list[str]]) -> None:
        await self._write(records, {k: _counts(terms[k]) for k in records})

    async def _write(self, records: dict[str, str], terms: dict[str, str], *, unfill: bool = False) -> None:
        def queue(pipe: Any) -> None:
            pipe.mset({self.record_key(k): v.encode("utf-8") for k, v in records.items()})
            pipe.zadd(self.ids_key, {k.encode("utf-8"): 0 for k in records})
            self._queue_terms(pipe, terms)
            if unfill:
                # Records without terms: if the namespace was indexed, the
                # next indexed open must fill it again ([kv.text.fills]).
                pipe.delete(self.filled_key)

        await self.commit("write records", queue)

    def wrote(self, pipe: Any, members: list[bytes]) -> None:
        # Deleted or dropped records: their postings go in the same MULTI.
        self._queue_terms(pipe, {m.decode("utf-8"): "" for m in members})

    async def _text_postings(self, words: list[str]) -> list[tuple[str, int, dict[str, int]]]:
        async with self.errors("search records' words"):
            async with self.client.pipeline(transaction=False) as pipe:
                for word in words:
                    pipe.hgetall(f"{self.term_prefix}{word}".encode())
                found = await pipe.execute()
            counts: dict[str, dict[str, int]] = {}
            for word, postings in zip(words, found):
                for key, count in postings.items():
                    counts.setdefault(key.decode("utf-8"), {})[word] = int(count)
            keys = list(counts)
            lengths: list[Any] = []
            for part in chunked(keys, self.options.batch_size):
                lengths += await self.client.hmget(self.lengths_key, [k.encode("utf-8") for k in part])
        return [(k, int(n), counts[k]) for k, n in zip(keys, lengths) if n is not None]

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


def _counts(terms: list[str]) -> str:
    return json.dumps(Counter(terms), ensure_ascii=False)
