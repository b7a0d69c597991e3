"""``RedisDocStatusStore``: status records as JSON strings, indexed by id
(sorted set ``...:ids``) and by status (one sorted set per status, ``...:s:<status>``).

All members score 0, so each set is ordered by id bytes: UTF-8 order, which is
code point order, as ``list_page`` requires. ``counts()`` is one ``ZCARD`` per
status in one round trip; ``list_page`` reads ``ZRANGEBYLEX`` after the cursor
and the records with ``MGET``: an id present for the whole listing is seen
once, and a record deleted or moved to another status between the two reads
is skipped (it was not present for the whole listing).

Every write is one ``MULTI``/``EXEC``: records, the id index, the status
sets and the generation (``...:gen``, an ``INCR``; never deleted, so it only
grows) change together. The change feed is one more sorted set,
``...:changed``, each id scored with the generation of its last write, a
deletion included (then it is a tombstone: the record is gone); a Lua script
in the same ``MULTI`` increments the generation and scores the ids with it.
``...:changed-gen`` holds the last generation the feed recorded and
``...:changed-from`` the one it is whole from: a store made before the feed,
or a write by a process of an older ragkit (an ``INCR`` alone), leaves the
generation ahead of the feed's, and ``changes_since`` an older generation is
``None`` ([doc_status.changes.floor]); the next write through the feed starts
it again from there. None of these keys is removed by ``drop``; the feed holds
one entry per id ever written. ``transition`` is a check-and-set (``WATCH`` the record,
retry if another client changed it first), so concurrent transitions of one
document cannot both pass the lifecycle check. Writes under the workspace's
writer lock are fenced (``ragkit_redis._base``); the lease itself is here
(``ragkit_redis.lease``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ragkit.errors import StoreError
from ragkit.protocols.base import Capability
from ragkit.protocols.lease import permit_of
from ragkit.protocols.doc_status import (
    DocStatusStore,
    StatusRow,
    decode_status,
    status_row,
    transitioned,
)
from ragkit.schema import DocStatus, DocStatusRecord
from ragkit_redis._base import RedisOptions, RedisStore
from ragkit_redis.lease import RedisLease

_TRANSITION_RETRIES = 50

# KEYS: generation, feed, feed's generation, feed start; ARGV: the written ids.
# The feed's generation is the last one the feed recorded: a write that did not
# (a process of an older ragkit INCRs alone) shows as a gap, and the feed
# starts again after it.
_WROTE = """
local last = tonumber(redis.call('GET', KEYS[3]) or '0')
local g = redis.call('INCR', KEYS[1])
if g - 1 ~= last then redis.call('SET', KEYS[4], g - 1) end
redis.call('SET', KEYS[3], g)
for i = 1, #ARGV do redis.call('ZADD', KEYS[2], g, ARGV[i]) end
return g
"""


class RedisDocStatusStore(RedisStore, DocStatusStore):
    """Document statuses in Redis (see ``ragkit_redis._base`` for the keys)."""

    name: ClassVar[str] = "redis"
    kind = "doc_status"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.TRANSACTIONAL, Capability.CONCURRENT_WRITES, Capability.GENERATION,
         Capability.CHANGES}
    )
    Options: ClassVar[type[RedisOptions]] = RedisOptions

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.status_keys = {s: f"{self.base}:s:{s.value}".encode() for s in DocStatus}
        self.generation_key = f"{self.base}:gen".encode()
        self.feed_key = f"{self.base}:changed".encode()
        self.feed_generation_key = f"{self.base}:changed-gen".encode()
        self.feed_from_key = f"{self.base}:changed-from".encode()

    @property
    def indexes(self) -> list[bytes]:
        return [self.ids_key, *self.status_keys.values()]

    def writer_lease(self) -> RedisLease:
        """The workspace's writer lock lives here, with the documents' statuses."""
        return RedisLease(self)

    # -- reads -----------------------------------------------------------------------

    async def _get(self, ids: list[str]) -> dict[str, bytes]:
        return await self.fetch(ids)

    async def _generation(self) -> int:
        async with self.errors("read the generation"):
            return int(await self.client.get(self.generation_key) or 0)

    async def _changed_since(self, generation: int) -> tuple[int, list[str]] | None:
        async with self.errors("read the change feed"):
            # First (see _changed_since in the protocol): the generation, and
            # from where the feed is whole, up to the last write it recorded.
            now, last, start = (int(v or 0) for v in await self.client.mget(
                [self.generation_key, self.feed_generation_key, self.feed_from_key]))
            if generation < (start if now == last else now):
                return None
            ids = await self.client.zrangebyscore(self.feed_key, f"({generation}", "+inf")
        return now, [i.decode("utf-8") for i in ids]

    async def _counts(self) -> dict[DocStatus, int]:
        async with self.errors("count statuses"):
            async with self.client.pipeline(transaction=True) as pipe:
                for key in self.status_keys.values():
                    pipe.zcard(key)
                sizes = await pipe.execute()
        return dict(zip(self.status_keys, sizes))

    async def _list_page(self, status: DocStatus | None, limit: int, after: str | None) -> list[DocStatusRecord]:
        index = self.ids_key if status is None else self.status_keys[status]
        items: list[DocStatusRecord] = []
        while True:
            want = limit - len(items)
            ids = await self.scan_index(index, after, want)
            found = await self.fetch(ids)
            for i in ids:
                record = decode_status(found[i]) if i in found else None
                # Gone or moved to another status since the index was read: skip it.
                if record is not None and (status is None or record.status is status):
                    items.append(record)
            if len(items) >= limit or len(ids) < want:
                return items
            after = ids[-1]

    # -- writes ----------------------------------------------------------------------

    def _queue_upsert(self, pipe: Any, rows: list[StatusRow]) -> None:
        ids = [row.id.encode("utf-8") for row in rows]
        pipe.mset({self.record_key(row.id): row.data.encode("utf-8") for row in rows})
        pipe.zadd(self.ids_key, {m: 0 for m in ids})
        for status, key in self.status_keys.items():
            # Out of every other status set, into its own.
            members = [m for m, row in zip(ids, rows) if row.status is status]
            others = [m for m, row in zip(ids, rows) if row.status is not status]
            if others:
                pipe.zrem(key, *others)
            if members:
                pipe.zadd(key, {m: 0 for m in members})
        self.wrote(pipe, ids)

    def wrote(self, pipe: Any, members: list[bytes]) -> None:
        pipe.eval(_WROTE, 4, self.generation_key, self.feed_key, self.feed_generation_key, self.feed_from_key, *members)

    async def _upsert(self, rows: list[StatusRow]) -> None:
        await self.commit("write statuses", lambda pipe: self._queue_upsert(pipe, rows))

    async def _transition(self, id: str, to: DocStatus, error: str | None) -> DocStatusRecord:
        """The lifecycle check and the write as one check-and-set on the record
        (and, under a Redis lease on this server, on the lease's fencing counter)."""
        from redis.exceptions import WatchError

        key = self.record_key(id)
        permit = permit_of(self.fence)
        async with self.errors("change a status"):
            async with self.client.pipeline(transaction=True) as pipe:
                for _ in range(_TRANSITION_RETRIES):
                    try:
                        # A changed counter aborts the EXEC; the next try refuses.
                        fenced = await self.watch_fence(pipe, permit)
                        await pipe.watch(key)
                        raw = await pipe.get(key)
                        updated = transitioned(id, decode_status(raw) if raw is not None else None, to, error)
                        pipe.multi()
                        self._queue_upsert(pipe, [status_row(updated)])
                        if fenced is None and permit is not None:
                            await permit.send()
                        await pipe.execute()
                        return updated
                    except WatchError:
                        continue  # another client changed the record: read it again
                    finally:
                        await pipe.reset()
        raise StoreError(f"document {id!r} kept changing; transition to {to.value} gave up after {_TRANSITION_RETRIES} tries")
