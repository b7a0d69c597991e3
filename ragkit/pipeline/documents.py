"""Finding documents: list them with their paths, statuses and errors, one page
at a time, and turn what a user names (ids, or the paths documents were indexed
from) into document ids. It only reads; the CLI and the HTTP server share it.

Paths. The loader stores ``Document.file_path`` as the user gave it, in POSIX
form and not resolved (``corpus/a.txt``, ``/data/corpus/a.txt``), and the
file's absolute path, resolved in the folder the indexing ran in, in its
metadata (``identity.SOURCE_PATH``); the indexer maps the absolute path to the
document's id in the ``doc_paths`` store when the document is committed. An
argument matches when one of its spellings does: as given, normalised
(``./corpus//a.txt`` is ``corpus/a.txt``), absolute, or relative to the current
folder. So a file indexed as ``corpus/a.txt`` in ``/data`` is found as
``/data/corpus/a.txt`` from any folder, as ``../data/corpus/a.txt`` from
``/tmp``, and as ``corpus/a.txt`` (the path as given) from anywhere.

Cost. Ids and committed paths are direct lookups. Documents not committed
(pending, processing, failed, deleting) have no ``doc_paths`` entry, so path
arguments also page through the records of those statuses (few, in a healthy
workspace), so that every document indexed from the path is found. An argument
still unmatched then pages through the processed records once (documents added
by ``insert_custom_kg`` have a path but no ``doc_paths`` entry; a typo costs one
scan before its error). Nothing holds more than one page in memory beyond the
matches.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ragkit.access import Principal, allows
from ragkit.errors import DocumentNotFoundError, InvalidValueError
from ragkit.core.stores import Stores
from ragkit.pipeline.identity import SOURCE_PATH
from ragkit.schema import DocStatus, DocStatusRecord

MAX_PAGE = 1000
"""The largest page a listing returns; more is reached through the cursor."""

_SCAN_PAGE = 500
_NOT_COMMITTED = tuple(s for s in DocStatus if s is not DocStatus.PROCESSED)


class DocumentRow(BaseModel):
    """One document as a listing shows it."""

    model_config = ConfigDict(frozen=True)

    id: str
    path: str | None
    status: DocStatus
    chunks: int
    error: str | None
    updated: datetime
    created: datetime

    @classmethod
    def of(cls, record: DocStatusRecord) -> DocumentRow:
        return cls(
            id=record.id, path=record.file_path, status=record.status, chunks=len(record.chunk_ids),
            error=record.error, updated=record.updated_at, created=record.created_at,
        )


class DocumentPage(BaseModel):
    """A page of documents by id; pass ``next_cursor`` back for the next one."""

    model_config = ConfigDict(frozen=True)

    documents: list[DocumentRow]
    next_cursor: str | None
    total: int
    """Documents of the listed status (or all), on every page."""


def parse_status(value: DocStatus | str | None) -> DocStatus | None:
    if value is None or isinstance(value, DocStatus):
        return value
    try:
        return DocStatus(value)
    except ValueError:
        names = ", ".join(s.value for s in DocStatus)
        raise InvalidValueError(f"unknown document status {value!r}; use one of: {names}") from None


async def list_documents(
    stores: Stores, status: DocStatus | str | None = None, limit: int = 100, cursor: str | None = None,
    *, principal: Principal | None = None,
) -> DocumentPage:
    """One page of documents ordered by id, of one status or all; with a
    principal, of the documents it may read only (``total`` too: counting them
    reads every record of the status)."""
    status = parse_status(status)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidValueError(f"the page size must be 1 to {MAX_PAGE}, got {limit!r}; page on with the cursor")
    if principal is not None:
        return await _readable_page(stores, status, limit, cursor, principal)
    page = await stores.doc_status.list_page(status, limit, cursor)
    counts = await stores.doc_status.counts()
    total = counts.get(status, 0) if status is not None else sum(counts.values())
    return DocumentPage(
        documents=[DocumentRow.of(r) for r in page.items], next_cursor=page.next_cursor, total=total
    )


async def _readable_page(
    stores: Stores, status: DocStatus | None, limit: int, cursor: str | None, principal: Principal
) -> DocumentPage:
    rows: list[DocumentRow] = []
    total, more, after = 0, False, None
    scan = None
    while True:  # one pass: the page after ``cursor``, and the count of all
        page = await stores.doc_status.list_page(status, _SCAN_PAGE, scan)
        for record in page.items:
            if not allows(record.access, principal):
                continue
            total += 1
            if cursor is not None and record.id <= cursor:
                continue
            if len(rows) < limit:
                rows.append(DocumentRow.of(record))
                after = record.id
            else:
                more = True
        if page.next_cursor is None:
            break
        scan = page.next_cursor
    return DocumentPage(documents=rows, next_cursor=after if more else None, total=total)


async def readable_counts(stores: Stores, principal: Principal) -> dict[str, int]:
    """Documents per status among those ``principal`` may read (reads every record)."""
    counts = dict.fromkeys((s.value for s in DocStatus), 0)
    cursor = None
    while True:
        page = await stores.doc_status.list_page(None, _SCAN_PAGE, cursor)
        for record in page.items:
            if allows(record.access, principal):
                counts[record.status.value] += 1
        if page.next_cursor is None:
            return counts
        cursor = page.next_cursor


class Resolution(BaseModel):
    """What each argument named."""

    model_config = ConfigDict(frozen=True)

    matches: dict[str, list[str]]
    """argument -> the ids of the documents it names (none when unknown)"""

    @property
    def doc_ids(self) -> list[str]:
        """Every named document once, in argument order."""
        return list(dict.fromkeys(i for ids in self.matches.values() for i in ids))

    @property
    def unknown(self) -> list[str]:
        return [a for a, ids in self.matches.items() if not ids]

    def require_all(self) -> list[str]:
        """The ids, or ``DocumentNotFoundError`` naming every unknown argument:
        callers check everything before changing anything, so a typo among
        several arguments changes nothing."""
        if self.unknown:
            raise DocumentNotFoundError(self.unknown)
        return self.doc_ids


async def resolve_documents(
    stores: Stores, arguments: Sequence[str], cwd: Path | None = None, *, principal: Principal | None = None
) -> Resolution:
    """Document ids for ``arguments``, each an id or a path a document was
    indexed from (see the module's notes on spellings); ids win over paths.
    With ``principal``: among the documents it may read only."""
    if principal is not None:
        return await _resolve_readable(stores, list(dict.fromkeys(arguments)), principal)
    args = list(dict.fromkeys(arguments))
    matches: dict[str, list[str]] = {a: [] for a in args}
    for arg, record in zip(args, await stores.doc_status.get(args)):
        if record is not None:
            matches[arg].append(arg)
    spellings = {a: path_spellings(a, cwd) for a in args if not matches[a]}
    if not spellings:
        return Resolution(matches=matches)
    await _committed(stores, spellings, matches)
    await _scan(stores, _NOT_COMMITTED, spellings, matches)
    unmatched = {a: s for a, s in spellings.items() if not matches[a]}
    if unmatched:
        await _scan(stores, (DocStatus.PROCESSED,), unmatched, matches)
    return Resolution(matches=matches)


async def _resolve_readable(stores: Stores, args: list[str], principal: Principal) -> Resolution:
    """Ids and paths among the readable documents. Paths are matched against
    every record's stored path (one scan, whatever the arguments): a hidden
    document and an absent one cost the same and are equally unknown."""
    matches: dict[str, list[str]] = {a: [] for a in args}
    for arg, record in zip(args, await stores.doc_status.get(args)):
        if record is not None and allows(record.access, principal):
            matches[arg].append(arg)
    spellings = {a: path_spellings(a) for a in args if not matches[a]}
    if spellings:
        await _scan(stores, tuple(DocStatus), spellings, matches, principal)
    return Resolution(matches=matches)


def path_spellings(argument: str, cwd: Path | None = None) -> set[str]:
    """The forms under which a file given as ``argument`` may have been stored."""
    if not argument.strip():
        return set()
    cwd = cwd or Path.cwd()
    given = Path(argument)
    absolute = Path(os.path.normpath(cwd / given))  # cwd / "/abs" is "/abs"
    return {argument, given.as_posix(), absolute.as_posix(), Path(os.path.relpath(absolute, cwd)).as_posix()}


async def _committed(stores: Stores, spellings: dict[str, set[str]], matches: dict[str, list[str]]) -> None:
    """Ids from ``doc_paths``, kept only where the document still exists."""
    paths = sorted(set().union(*spellings.values()))
    found = {p: rec["doc_id"] for p, rec in zip(paths, await stores.doc_paths.get_many(paths)) if rec}
    ids = sorted(set(found.values()))
    existing = {i for i, r in zip(ids, await stores.doc_status.get(ids)) if r is not None}
    for arg, forms in spellings.items():
        _add(matches[arg], (found[p] for p in sorted(forms) if found.get(p) in existing))


async def _scan(
    stores: Stores, statuses: Iterable[DocStatus], spellings: dict[str, set[str]], matches: dict[str, list[str]],
    principal: Principal | None = None,
) -> None:
    """Documents of ``statuses`` whose stored path is a spelling of an
    argument (and that ``principal``, if any, may read)."""
    args_of: dict[str, list[str]] = {}
    for arg, forms in spellings.items():
        for form in forms:
            args_of.setdefault(form, []).append(arg)
    for status in statuses:
        cursor = None
        while True:
            page = await stores.doc_status.list_page(status, _SCAN_PAGE, cursor)
            for record in page.items:
                if principal is not None and not allows(record.access, principal):
                    continue
                stored = {record.file_path, record.metadata.get(SOURCE_PATH)}
                for arg in {a for form in stored if form for a in args_of.get(str(form), ())}:
                    _add(matches[arg], [record.id])
            if page.next_cursor is None:
                break
            cursor = page.next_cursor


def _add(ids: list[str], new: Iterable[str]) -> None:
    for doc_id in new:
        if doc_id not in ids:
            ids.append(doc_id)
