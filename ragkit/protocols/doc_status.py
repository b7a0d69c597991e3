"""Document status store protocol."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ragkit.errors import InvalidTransitionError, InvalidValueError, describe_validation_error
from ragkit.protocols.base import BaseStore
from ragkit.schema import (
    ALLOWED_TRANSITIONS,
    DocStatus,
    DocStatusPage,
    DocStatusRecord,
    utcnow,
)


class DocStatusStore(BaseStore, ABC):
    """Where each document is in its lifecycle.

    ``pending -> processing -> processed | failed``, and ``deleting`` from any
    of them until the record is removed; the allowed changes are
    ``ragkit.schema.ALLOWED_TRANSITIONS`` and ``transition()`` enforces them.

    Semantics every adapter must follow (the contract suite checks each):

    - ``upsert`` stores records whole (replacing), timestamps included, and keeps
      datetimes timezone-aware (UTC) with microsecond precision.
    - ``get`` returns one entry per id, in order, ``None`` where missing.
    - ``counts()`` has an entry for *every* status, 0 included.
    - ``list_page(status, limit, cursor)`` pages through the documents of one
      status (or all, with ``status=None``) ordered by id ascending. The cursor is
      the last id of the previous page, so a document present during the whole
      listing appears exactly once even while others are inserted concurrently.
    """

    @abstractmethod
    async def get(self, ids: Sequence[str]) -> list[DocStatusRecord | None]: ...

    @abstractmethod
    async def upsert(self, records: Iterable[DocStatusRecord]) -> None: ...

    @abstractmethod
    async def delete(self, ids: Iterable[str]) -> None:
        """Missing ids are not an error."""

    @abstractmethod
    async def counts(self) -> dict[DocStatus, int]: ...

    @abstractmethod
    async def list_page(
        self, status: DocStatus | None = None, limit: int = 100, cursor: str | None = None
    ) -> DocStatusPage: ...

    @abstractmethod
    async def drop(self) -> None: ...

    async def count(self) -> int:
        return sum((await self.counts()).values())

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
        try:
            valid_id = bool(record.id) and bool(record.id.encode("utf-8"))
        except UnicodeEncodeError:  # lone surrogates
            valid_id = False
        if not valid_id:
            raise InvalidValueError(f"document ids must be non-empty valid Unicode strings, got {record.id!r}")
        return record

    async def transition(
        self, id: str, to: DocStatus, *, error: str | None = None
    ) -> DocStatusRecord:
        """Move one document to ``to``; ``error`` is kept only for ``failed``."""
        (record,) = await self.get([id])
        if record is None:
            raise InvalidTransitionError(f"document {id!r} has no status record; upsert it first")
        if to not in ALLOWED_TRANSITIONS[record.status]:
            allowed = ", ".join(sorted(s.value for s in ALLOWED_TRANSITIONS[record.status])) or "none"
            raise InvalidTransitionError(
                f"document {id!r} cannot go from {record.status.value} to {to.value} "
                f"(allowed: {allowed})"
            )
        updated = record.model_copy(
            update={
                "status": to,
                "updated_at": utcnow(),
                "error": error if to is DocStatus.FAILED else None,
            }
        )
        await self.upsert([updated])
        return updated
