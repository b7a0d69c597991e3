"""``RedisDocStatusStore``: status records as JSON strings, indexed by id
(sorted set ``...:ids``) and by status (one sorted set per status, ``...:s:<status>``).

All members score 0, so each set is ordered by id bytes: UTF-8 order, which is
code point order, as ``list_page`` requires. ``counts()`` is four ``ZCARD`` in
one round trip; ``list_page`` reads ``ZRANGEBYLEX`` after the cursor and the
records with ``MGET``: an id present for the whole listing is seen once, and a
record deleted or moved to another status between the two reads is skipped
(it was not present for the whole listing).

Every write is one ``MULTI``/``EXEC``: records, the id index and the status
sets change together. ``transition`` is a check-and-set (``WATCH`` the record,
retry if another client changed it first), so concurrent transitions of one
document cannot both pass the lifecycle check.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any, ClassVar

from ragkit.errors import InvalidTransitionError, InvalidValueError, StoreError
from ragkit.protocols.base import Capability
from ragkit.protocols.doc_status import DocStatusStore
from ragkit.schema import ALLOWED_TRANSITIONS, DocStatus, DocStatusPage, DocStatusRecord, utcnow
from ragkit_redis._base import RedisOptions, RedisStore, chunked, storable

_TRANSITION_RETRIES = 50


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _encode(record: DocStatusRecord) -> bytes:
    data = record.model_dump(mode="json")
    data["created_at"] = _utc(record.created_at).isoformat(timespec="microseconds")
    data["updated_at"] = _utc(record.updated_at).isoformat(timespec="microseconds")
    return json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8")


def _decode(raw: bytes) -> DocStatusRecord:
    record = DocStatusRecord.model_validate_json(raw)
    record.created_at = _utc(record.created_at)
    record.updated_at = _utc(record.updated_at)
    return record


class RedisDocStatusStore(RedisStore, DocStatusStore):
    """Document statuses in Redis (see ``ragkit_redis._base`` for the keys)."""

    name: ClassVar[str] = "redis"
    kind = "doc_status"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.TRANSACTIONAL, Capability.CONCURRENT_WRITES}
    )
    Options: ClassVar[type[RedisOptions]] = RedisOptions

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.status_keys = {s: f"{self.base}:s:{s.value}".encode() for s in DocStatus}

    # -- reads -----------------------------------------------------------------------

    async def _fetch(self, ids: list[str]) -> dict[str, DocStatusRecord]:
        found: dict[str, DocStatusRecord] = {}
        async with self.errors("read statuses"):
            for part in chunked(ids, self.options.batch_size):
                values = await self.client.mget([self.record_key(i) for i in part])
                found.update((i, _decode(v)) for i, v in zip(part, values) if v is not None)
        return found

    async def get(self, ids: Sequence[str]) -> list[DocStatusRecord | None]:
        self._check_open()
        ids = list(ids)
        found = await self._fetch(list(dict.fromkeys(i for i in ids if storable(i))))
        # A fresh copy per asked position: a repeated id yields independent objects.
        return [
            found[i].model_copy(deep=True) if isinstance(i, str) and i in found else None for i in ids
        ]

    async def counts(self) -> dict[DocStatus, int]:
        client = self.client
        async with self.errors("count statuses"):
            async with client.pipeline(transaction=True) as pipe:
                for status in DocStatus:
                    pipe.zcard(self.status_keys[status])
                sizes = await pipe.execute()
        return {status: int(n) for status, n in zip(DocStatus, sizes)}

    async def list_page(
        self, status: DocStatus | None = None, limit: int = 100, cursor: str | None = None
    ) -> DocStatusPage:
        self._check_open()
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidValueError(f"list_page needs limit >= 1, got {limit!r}")
        if cursor is not None and not isinstance(cursor, str):
            raise InvalidValueError(f"cursor must be the str next_cursor of a page, got {cursor!r}")
        if status is not None:
            try:
                status = DocStatus(status)
            except ValueError as exc:
                raise InvalidValueError(f"unknown document status {status!r}") from exc
        index = self.ids_key if status is None else self.status_keys[status]
        items: list[DocStatusRecord] = []
        after = cursor
        while True:
            want = limit + 1 - len(items)
            ids = await self.scan_index(index, after, want)
            found = await self._fetch(ids)
            for i in ids:
                record = found.get(i)
                # Gone or moved to another status since the index was read: skip it.
                if record is not None and (status is None or record.status is status):
                    items.append(record)
            if len(items) > limit or len(ids) < want:
                break
            after = ids[-1]
        more = len(items) > limit
        items = items[:limit]
        return DocStatusPage(items=items, next_cursor=items[-1].id if more else None)

    # -- writes ----------------------------------------------------------------------

    def _validate(self, records: Iterable[DocStatusRecord]) -> dict[str, tuple[DocStatus, bytes]]:
        rows: dict[str, tuple[DocStatus, bytes]] = {}
        for record in map(self.check_record, records):
            try:
                rows[record.id] = (record.status, _encode(record))
            except (TypeError, ValueError) as exc:  # lone surrogates, NaN in metadata
                raise InvalidValueError(f"document {record.id!r} cannot be stored: {exc}") from exc
        return rows

    def _queue_upsert(self, pipe: Any, rows: dict[str, tuple[DocStatus, bytes]]) -> None:
        ids = [i.encode("utf-8") for i in rows]
        pipe.mset({self.record_key(i): data for i, (_, data) in rows.items()})
        pipe.zadd(self.ids_key, {m: 0 for m in ids})
        for status in DocStatus:
            # Out of every other status set, into its own.
            members = [m for m, (s, _) in zip(ids, rows.values()) if s is status]
            others = [m for m, (s, _) in zip(ids, rows.values()) if s is not status]
            if others:
                pipe.zrem(self.status_keys[status], *others)
            if members:
                pipe.zadd(self.status_keys[status], {m: 0 for m in members})

    async def upsert(self, records: Iterable[DocStatusRecord]) -> None:
        client = self.client
        rows = self._validate(records)
        if not rows:
            return
        async with self.errors("write statuses"):
            async with client.pipeline(transaction=True) as pipe:
                self._queue_upsert(pipe, rows)
                await pipe.execute()

    async def delete(self, ids: Iterable[str]) -> None:
        client = self.client
        if isinstance(ids, str):
            ids = [ids]
        wanted = list(dict.fromkeys(i for i in ids if storable(i)))
        if not wanted:
            return
        members = [i.encode("utf-8") for i in wanted]
        async with self.errors("delete statuses"):
            async with client.pipeline(transaction=True) as pipe:
                pipe.unlink(*(self.record_key(i) for i in wanted))
                pipe.zrem(self.ids_key, *members)
                for key in self.status_keys.values():
                    pipe.zrem(key, *members)
                await pipe.execute()

    async def transition(self, id: str, to: DocStatus, *, error: str | None = None) -> DocStatusRecord:
        """The base class's checks and updates, as one check-and-set on the record."""
        from redis.exceptions import WatchError

        client = self.client
        if not storable(id):
            raise InvalidTransitionError(f"document {id!r} has no status record; upsert it first")
        key = self.record_key(id)
        async with self.errors("change a status"):
            async with client.pipeline(transaction=True) as pipe:
                for _ in range(_TRANSITION_RETRIES):
                    try:
                        await pipe.watch(key)
                        raw = await pipe.get(key)
                        updated = self._transitioned(id, raw, to, error)
                        pipe.multi()
                        self._queue_upsert(pipe, self._validate([updated]))
                        await pipe.execute()
                        return updated
                    except WatchError:
                        continue  # another client changed the record: read it again
                    finally:
                        await pipe.reset()
        raise StoreError(f"document {id!r} kept changing; transition to {to.value} gave up after {_TRANSITION_RETRIES} tries")

    @staticmethod
    def _transitioned(id: str, raw: bytes | None, to: DocStatus, error: str | None) -> DocStatusRecord:
        if raw is None:
            raise InvalidTransitionError(f"document {id!r} has no status record; upsert it first")
        record = _decode(raw)
        if to not in ALLOWED_TRANSITIONS[record.status]:
            allowed = ", ".join(sorted(s.value for s in ALLOWED_TRANSITIONS[record.status]))
            raise InvalidTransitionError(
                f"document {id!r} cannot go from {record.status.value} to {to.value} (allowed: {allowed})"
            )
        return record.model_copy(
            update={"status": to, "updated_at": utcnow(), "error": error if to is DocStatus.FAILED else None}
        )

    async def drop(self) -> None:
        self._check_open()
        await self.drop_indexed([self.ids_key, *self.status_keys.values()])
