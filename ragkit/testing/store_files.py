"""The files behind an embedded store, for tests that damage, kill or inspect them.

The numpy vector store and the NetworkX graph store keep a snapshot and an
edit journal beside it (``ragkit.storage.snapshot_journal.JournaledFile``). Crash and
damage tests need what no user of a store does: which journal file is
current, the snapshot's generation, whether edits are waiting to be written,
how many journal bytes were read as good. They read it here, in one
documented place, rather than each reaching into the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragkit.storage.snapshot_journal import JournaledFile


def journaled_file(store: Any) -> JournaledFile[Any]:
    """The snapshot-and-journal file of an embedded file store (``.journal``:
    its journal's path; ``.generation``; ``.dirty``: edits not yet written;
    ``.lock``: the loop-bound lock, ``None`` before ``open()``)."""
    found = getattr(store, "_file", None)
    if found is None:
        raise TypeError(f"{type(store).__name__} keeps no snapshot-and-journal file (numpy and networkx stores do)")
    return found


def journal_good_bytes(store: Any) -> int:
    """Bytes of the current journal read (or written) as whole frames: a torn
    tail after a kill is past this length, and the next append overwrites it."""
    return journaled_file(store)._journal_bytes


def vector_rows(store: Any) -> tuple[int, int]:
    """``(rows in use, rows of them dead)`` in a numpy vector store's matrix: a
    delete marks rows dead and a compaction drops them, so ``(alive, 0)`` after one."""
    return store._n, store._dead
