"""Document status store protocol."""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, NamedTuple

from pydantic import ValidationError

from ragkit.errors import InvalidTransitionError, InvalidValueError, StoreError, describe_validation_error
from ragkit.protocols.base import Capability, KeyedStore, in_order, storable_key, template, unique_keys
from ragkit.schema import (
    ALLOWED_TRANSITIONS,
    DocStatus,
    DocStatusPage,
    DocStatusRecord,
    utcnow,
)


class StatusRow(NamedTuple):
    """One validated record as ``_upsert`` gets it: its id, its status and its
    JSON text (``encode_status``), which ``_get``/``_list_page`` hand back."""

    id: str
    status: DocStatus
    data: str


class DocStatusChanges(NamedTuple):
    """What changed in a doc-status store after a generation
    (``DocStatusStore.changes_since``)."""

    generation: int
    """The generation these changes reach: every write up to it is in them
    (later ones may be too)."""
    records: list[DocStatusRecord]
    """The changed records present now, as they are now."""
    deleted: list[str]
    """The changed ids no record holds now."""


class DocStatusStore(KeyedStore):
    """Where each document is in its lifecycle.

    ``pending -> processing -> processed | failed``, and ``deleting`` from any
    of them until the record is removed; the allowed changes are
    ``ragkit.schema.ALLOWED_TRANSITIONS`` and ``transition()`` enforces them.

    Semantics every adapter must follow (the contract suite checks each):

    - [doc_status.upsert.whole] ``upsert`` stores records whole (replacing);
      when one call holds an id twice the last record wins.
      [doc_status.timestamps.utc] Datetimes stay timezone-aware (UTC) with
      microsecond precision.
    - [doc_status.get.order] ``get`` returns one entry per id, in order, ``None``
      where missing; [store.keys.exact] and [store.batch.large] hold for ids.
    - [doc_status.counts.every-status] ``counts()`` has an entry for *every*
      status, 0 included, and follows every write.
    - [doc_status.list-page.order] ``list_page(status, limit, cursor)`` pages
      through the documents of one status (or all, with ``status=None``)
      ordered by id ascending, code point order (not a collation's order). The
      cursor is the last id of the previous page, so a document present during
      the whole listing appears exactly once even while others are inserted
      concurrently.
    - [doc_status.list-page.last-page] ``next_cursor`` is ``None`` on the last
      page and only there: a listing whose size is a multiple of ``limit`` ends
      with a full page whose ``next_cursor`` is ``None``, never with an extra
      empty page; a page with a ``next_cursor`` holds exactly ``limit`` items.
    - [doc_status.transition.lifecycle] ``transition`` follows
      ``ALLOWED_TRANSITIONS`` and refuses a missing document; the
      ``InvalidTransitionError`` names the document (``transitioned`` does).

    With ``Capability.GENERATION`` (optional; ``generation()`` is ``None`` without it):

    - [doc_status.generation.every-write] ``generation()`` is an integer that
      every write changing the records (``upsert``, ``transition``, ``delete``
      of a present id, ``drop`` of a non-empty store) makes larger, atomically
      with the write: a reader that sees the new number sees the write. Reads
      leave it as it is; writes made at once each count (``n`` concurrent
      writes raise it by at least ``n``); it never goes back, also across
      ``drop``, close and reopen.
    - [doc_status.generation.shared] Every instance over the same backend
      (another connection, another process) sees the same number, so a write
      made through one invalidates what readers of the others derived.

    With ``Capability.CHANGES`` as well (optional; ``changes_since()`` is ``None``
    without it, and readers read every record again):

    - [doc_status.changes.every-write] ``changes_since(g)`` names every id a
      write after generation ``g`` changed (upserted, transitioned, deleted,
      dropped) and no id whose last write was at or before ``g``: a write
      appears exactly from the generation before it. Its ``generation`` is at
      least the one ``generation()`` gave before the call.
    - [doc_status.changes.tombstones] A deleted or dropped id is named among
      ``deleted`` (a tombstone kept in the write's transaction), in every
      instance over the backend, until it is written again.
    - [doc_status.changes.floor] Changes from before what the store keeps (a
      generation older than its tombstones, or than the feed itself in a
      database made before it existed) are ``None``, never a partial list:
      the reader then reads every record.

    Adapters implement the hooks ``_get``, ``_upsert``, ``_delete``, ``_counts``,
    ``_list_page`` and ``_drop`` (``_transition`` optionally, to make the
    check-and-set atomic; ``_generation`` with ``Capability.GENERATION``,
    ``_changed_since`` with ``Capability.CHANGES``).
    Records travel as JSON text (``StatusRow.data``): the public methods
    validate, encode and decode them, so every backend keeps the same fields
    with the same precision.
    """

    @template("_get")
    async def get(self, ids: Sequence[str]) -> list[DocStatusRecord | None]:
        self._check_open()
        ids = list(ids)
        wanted = unique_keys(ids)
        found = await self._get(wanted) if wanted else {}
        # Decoded per asked position: a repeated id yields independent objects.
        return in_order(ids, found, _record)

    @template("_upsert")
    async def upsert(self, records: Iterable[DocStatusRecord]) -> None:
        self._check_open()
        rows = {row.id: row for row in map(status_row, records)}  # the last of an id wins
        if rows:
            await self._fenced()
            await self._upsert(list(rows.values()))

    @template("_counts")
    async def counts(self) -> dict[DocStatus, int]:
        self._check_open()
        found = {DocStatus(s): int(n) for s, n in (await self._counts()).items()}
        return {status: found.get(status, 0) for status in DocStatus}

    @template("_list_page")
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
        # One more than asked: whether there is a next page.
        rows = await self._list_page(status, limit + 1, cursor)
        if len(rows) > limit + 1:  # an adapter that ignored its limit would read a whole store per page
            raise StoreError(f"{type(self).__name__}._list_page returned {len(rows)} records when asked for at "
                             f"most {limit + 1}: the adapter must apply its limit")
        items = [_record(data) for data in rows]
        more = len(items) > limit
        items = items[:limit]
        return DocStatusPage(items=items, next_cursor=items[-1].id if more else None)

    @template("_transition")
    async def transition(
        self, id: str, to: DocStatus, *, error: str | None = None
    ) -> DocStatusRecord:
        """Move one document to ``to``; ``error`` is kept only for ``failed``."""
        self._check_open()
        try:
            to = DocStatus(to)
        except ValueError as exc:
            raise InvalidValueError(f"unknown document status {to!r}") from exc
        if not storable_key(id):
            raise InvalidTransitionError(f"document {id!r} has no status record; upsert it first")
        await self._fenced()
        return await self._transition(id, to, error)

    @template("_generation")
    async def generation(self) -> int | None:
        """The records' generation: larger after every write, the same in every
        instance over this backend ([doc_status.generation.every-write]).
        ``None`` when the adapter does not declare ``Capability.GENERATION``:
        then nothing derived from the records may be kept across reads (the
        access checks read every record on each query instead)."""
        self._check_open()
        if Capability.GENERATION not in self.capabilities:
            return None
        value = await self._generation()
        if isinstance(value, bool) or not isinstance(value, int):
            raise StoreError(f"{type(self).__name__}._generation() returned {value!r}, not an int")
        return value

    @template("_changed_since")
    async def changes_since(self, generation: int) -> DocStatusChanges | None:
        """The records changed after ``generation`` (one ``generation()`` gave),
        as they are now ([doc_status.changes.every-write]); ``None`` when the
        adapter does not declare ``Capability.CHANGES`` or keeps no changes
        from that far back ([doc_status.changes.floor]): then read every record."""
        self._check_open()
        if isinstance(generation, bool) or not isinstance(generation, int):
            raise InvalidValueError(f"changes_since takes a generation (an int), got {generation!r}")
        if not {Capability.GENERATION, Capability.CHANGES} <= self.capabilities:
            return None
        found = await self._changed_since(generation)
        if found is None:
            return None
        now, ids = found
        if isinstance(now, bool) or not isinstance(now, int):
            raise StoreError(f"{type(self).__name__}._changed_since() returned generation {now!r}, not an int")
        ids = unique_keys(ids)
        records = await self.get(ids) if ids else []
        return DocStatusChanges(
            now, [r for r in records if r is not None], [i for i, r in zip(ids, records) if r is None]
        )

    async def _count(self) -> int:
        """Derived from ``_counts``; an adapter may count directly."""
        return sum((await self.counts()).values())

    # -- hooks ----------------------------------------------------------------------

    @abstractmethod
    async def _get(self, ids: list[str]) -> Mapping[str, str | bytes | DocStatusRecord]:
        """``{id: JSON text}`` of the stored records among ``ids`` (or records)."""

    @abstractmethod
    async def _upsert(self, rows: list[StatusRow]) -> None:
        """Write (replace) these records; their ids are distinct."""

    @abstractmethod
    async def _counts(self) -> Mapping[DocStatus | str, int]:
        """Records per status; statuses without records may be left out."""

    @abstractmethod
    async def _list_page(
        self, status: DocStatus | None, limit: int, after: str | None
    ) -> Sequence[str | bytes | DocStatusRecord]:
        """Up to ``limit`` records (JSON texts, or records) of ``status`` (or all)
        whose ids come after ``after`` (all if None), ordered by id (code point order)."""

    async def _generation(self) -> int:
        """The stored generation (0 before the first write); needed with
        ``Capability.GENERATION``. Bump it in the same transaction as each write."""
        raise NotImplementedError(f"{type(self).__name__} declares Capability.GENERATION but has no _generation()")

    async def _changed_since(self, generation: int) -> tuple[int, Iterable[str]] | None:
        """``(generation now, ids written after generation)``, or ``None`` when
        changes from that far back are not kept; needed with
        ``Capability.CHANGES``. Read the generation *first*: ids written after
        it may be named too (they are read again at the next call), but a write
        the generation counts must not be missed. Record each written id's
        generation, and a tombstone per deleted id, in the write's transaction."""
        raise NotImplementedError(f"{type(self).__name__} declares Capability.CHANGES but has no _changed_since()")

    async def _transition(self, id: str, to: DocStatus, error: str | None) -> DocStatusRecord:
        """Read, check and write back; override to make it one atomic check-and-set."""
        (record,) = await self.get([id])
        updated = transitioned(id, record, to, error)
        await self.upsert([updated])
        return updated

    @staticmethod
    def check_record(record: DocStatusRecord | Mapping[str, Any]) -> DocStatusRecord:
        """An upsert's record, validated (mappings are accepted) with a clear error:
        one rule for every adapter. The id must be a non-empty valid Unicode string."""
        if isinstance(record, Mapping):
            try:
                record = DocStatusRecord.model_validate(record)
            except ValidationError as exc:
                raise InvalidValueError(f"invalid document status record: {describe_validation_error(exc)}") from exc
        if not isinstance(record, DocStatusRecord):
            raise InvalidValueError(f"doc status upsert takes DocStatusRecord objects, got {type(record).__name__}")
        if not storable_key(record.id):
            raise InvalidValueError(f"document ids must be non-empty valid Unicode strings, got {record.id!r}")
        return record


def transitioned(
    id: str, record: DocStatusRecord | None, to: DocStatus, error: str | None
) -> DocStatusRecord:
    """``record`` moved to ``to``, or ``InvalidTransitionError`` when it is
    missing or the lifecycle forbids the change."""
    if record is None:
        raise InvalidTransitionError(f"document {id!r} has no status record; upsert it first")
    if to not in ALLOWED_TRANSITIONS[record.status]:
        allowed = ", ".join(sorted(s.value for s in ALLOWED_TRANSITIONS[record.status])) or "none"
        raise InvalidTransitionError(
            f"document {id!r} cannot go from {record.status.value} to {to.value} "
            f"(allowed: {allowed})"
        )
    return record.model_copy(
        update={
            "status": to,
            "updated_at": utcnow(),
            "error": error if to is DocStatus.FAILED else None,
        }
    )


def _utc(value: datetime) -> datetime:
    """Timezone-aware UTC; a naive datetime is taken to be UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def encode_status(record: DocStatusRecord) -> str:
    """A record's JSON text: full-precision ISO-8601 times with an explicit
    +00:00 offset. ``InvalidValueError`` when it cannot be stored."""
    data = record.model_dump(mode="json")
    if data.get("access") is None:  # no list: the record's JSON as before access lists existed
        data.pop("access", None)
    data["created_at"] = _utc(record.created_at).isoformat(timespec="microseconds")
    data["updated_at"] = _utc(record.updated_at).isoformat(timespec="microseconds")
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")  # lone surrogates cannot be stored as UTF-8
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(f"document {record.id!r} cannot be stored: {exc}") from exc
    return text


def decode_status(data: str | bytes) -> DocStatusRecord:
    record = DocStatusRecord.model_validate_json(data)
    # pydantic parses the offset into its own tzinfo class; hand back the stdlib one.
    record.created_at = _utc(record.created_at)
    record.updated_at = _utc(record.updated_at)
    return record


def _record(data: str | bytes | DocStatusRecord) -> DocStatusRecord:
    return data.model_copy(deep=True) if isinstance(data, DocStatusRecord) else decode_status(data)


def status_row(record: DocStatusRecord | Mapping[str, Any]) -> StatusRow:
    """Validate and encode one record for ``_upsert``."""
    record = DocStatusStore.check_record(record)
    return StatusRow(record.id, record.status, encode_status(record))
