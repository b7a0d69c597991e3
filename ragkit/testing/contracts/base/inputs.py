"""Inputs that expose backend-shaped bugs, shared by the contract classes:
keys a collation or normaliser would merge, batches past SQL parameter
limits, scans that run while records are deleted, and the durable state a
store leaves after ``flush()``."""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ragkit.protocols.base import BaseStore

CONFUSABLE_KEYS = [
    "Apple", "apple", "APPLE",  # case
    "\u00e9cole", "e\u0301cole",  # NFC / NFD
    "\u212bngstr\u00f6m", "\u00c5ngstr\u00f6m",  # KELVIN-style compatibility: Å sign vs Å
    "stra\u00dfe", "STRASSE", "strasse",  # ß and its case-folding
    "\u03bf\u03b4\u03bf\u03c2", "\u03bf\u03b4\u03bf\u03c3", "\u039f\u0394\u039f\u03a3",  # final sigma
    "\ufb01le", "file",  # ligature fi (NFKC folds it)
    "key ", "key",  # trailing space (PAD SPACE collations compare them equal)
]
"""Distinct keys that case-insensitive collations, NFC/NFD/NFKC normalisation,
case-folding or trailing-space padding would make equal."""

SQL_PARAMETER_LIMIT = 32766
"""SQLite's default host-parameter limit since 3.32 (999 before); PostgreSQL's is 65535."""

LARGE = 2500
"""Records in one write: past SQLite's old 999 and most drivers' batch sizes."""

HUGE = SQL_PARAMETER_LIMIT + 234
"""Keys in one read or delete: past SQLite's current parameter limit."""


def many_keys(n: int, prefix: str = "k") -> list[str]:
    return [f"{prefix}-{i:06d}" for i in range(n)]


async def scan_while_deleting(
    scan: Callable[[], AsyncIterator[Any]],
    key_of: Callable[[Any], str],
    delete: Callable[[list[str]], Awaitable[None]],
    doomed: set[str],
) -> list[str]:
    """Walk ``scan()`` and, after each item, delete that item (a consumer
    cleaning up as it goes: what breaks paging by offset) and, after the first
    item, every key of ``doomed``. Returns the keys the scan yielded."""
    seen: list[str] = []
    async for item in scan():
        key = key_of(item)
        seen.append(key)
        batch = [key]
        if len(seen) == 1:
            batch += sorted(doomed - {key})
        await delete(batch)
    return seen


@contextlib.asynccontextmanager
async def durable_view(store: BaseStore) -> AsyncIterator[Any]:
    """A *new* opened instance seeing only what ``store`` made durable so far,
    while ``store`` stays open and unclosed (as after a crash following
    ``flush()``): the working directory is copied as it is now and the new
    instance opens the copy; server-backed stores keep their data in the
    server, which the new instance reaches through the same config. It is
    closed, never dropped, on exit (dropping a server namespace here would drop
    the store under test)."""
    src = store.config.working_dir
    dst = src.parent / f"{src.name}-durable-{uuid.uuid4().hex[:8]}"
    if src.exists():
        shutil.copytree(src, dst)
    else:
        dst.mkdir(parents=True)
    other = type(store)(store.config.model_copy(update={"working_dir": dst}))
    await other.open()
    try:
        yield other
    finally:
        await other.close()
        shutil.rmtree(dst, ignore_errors=True)


def scan_result(seen: list[str], keep: set[str], doomed: set[str]) -> str | None:
    """What a scan that deleted keys as it went got wrong (``None``: nothing):
    ``seen`` is what it yielded, ``keep`` what was stored throughout,
    ``doomed`` what was deleted during it."""
    dupes = sorted({k for k in seen if seen.count(k) > 1}) if len(seen) != len(set(seen)) else []
    if dupes:
        return f"the scan yielded {dupes[:5]} twice while keys were deleted during it"
    missed = sorted(keep - set(seen))
    if missed:
        return (
            f"the scan skipped {len(missed)} keys stored for the whole scan (first {missed[:5]}) "
            "while other keys were deleted during it: page by key, not by offset"
        )
    extra = sorted(set(seen) - keep - doomed)
    return f"the scan yielded keys never stored: {extra[:5]}" if extra else None
