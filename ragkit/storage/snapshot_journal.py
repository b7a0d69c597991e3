"""Crash-safe files shared by the file-backed embedded stores: an atomic
snapshot plus an append-only journal of the changes made since it.

Snapshot. A snapshot is written to a temporary file in the target's directory,
fsynced, renamed over the target with ``os.replace`` (atomic on POSIX and
Windows) and the directory is fsynced so that the rename itself is durable. A
reader therefore sees either the previous complete file or the new complete
file, never a torn one, whatever moment the writing process is killed at.

Temporary files are named ``.<target name>.<pid>.<random>.tmp``; a process killed
mid-write leaves one behind, and :func:`remove_stale_temps` (called when a store
opens) deletes those whose writer process no longer exists.

Journal. Rewriting the whole snapshot on every flush makes indexing quadratic,
so a flush appends only what changed since the previous flush to
``<target name>.journal`` next to the snapshot, and fsyncs it. The journal is a
sequence of frames::

    b"RKJ1" | payload length (uint32 LE) | crc32 of length + payload (uint32 LE) | payload

The first frame is a header ``{"format": "ragkit.journal/1", "generation": g}``;
each later frame holds the changes of one flush, encoded by the store, so a
flush is all or nothing on reload. Loading is: the snapshot, then the payloads
of the journal in order, if the journal's generation is the snapshot's.

- A frame cut short at the end of the file (a writer killed mid-append) is a
  torn tail: it is ignored, and the next append overwrites it.
- A damaged frame followed by a valid one is corruption, not a torn tail:
  loading raises :class:`StoreError` naming the file.
- When the journal has grown beyond the snapshot (or the snapshot is small, or
  the store closes after writing), the next save compacts: it writes a whole
  new snapshot with generation g + 1, then removes the journal. A crash between
  the two leaves a journal of generation g, which is stale and ignored.

Several processes. Only the holder of the workspace's writer lock
(:mod:`ragkit.core.lock`) saves; other processes only read. Loading reads the
journal *before* the snapshot: generations only grow, and a journal of
generation g + 1 is started only after the snapshot of g + 1 is in place, so a
reader never pairs a snapshot with a newer journal, whatever the writer does
meanwhile; it sees the state of some flush of the writer. A store that never
wrote in a session never rewrites or removes a file (not even at close), and
:meth:`JournaledFile.changed_on_disk` tells a long-lived process that another
one wrote since it loaded (``refresh`` reloads then).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import secrets
import struct
import zlib
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import BinaryIO, Generic, TypeVar

from ragkit.core.files import private_dir
from ragkit.errors import StoreError

TEMP_SUFFIX = ".tmp"
JOURNAL_SUFFIX = ".journal"
JOURNAL_FORMAT = "ragkit.journal/1"
# Below this size a snapshot is rewritten on every save: that costs about what an
# append costs, and a small store then stays one self-contained file.
SMALL_SNAPSHOT = 64 * 1024

_MAGIC = b"RKJ1"
_LENGTH = struct.Struct("<I")
_HEAD = struct.Struct("<4sII")  # magic, payload length, crc32(length + payload)

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)  # what a store names a changed item by
Writer = Callable[[BinaryIO], None]


def _temp_prefix(target: Path) -> str:
    return f".{target.name}."


def temp_path(target: Path) -> Path:
    """A fresh temporary path next to ``target`` (same directory, same filesystem)."""
    return target.with_name(
        f"{_temp_prefix(target)}{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
    )


def fsync_dir(directory: Path) -> None:
    """Make renames and unlinks inside ``directory`` durable (no-op where unsupported)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(target: Path, write: Writer) -> None:
    """Replace ``target`` with what ``write(file)`` writes, atomically and durably."""
    target = Path(target)
    private_dir(target.parent)
    tmp = temp_path(target)
    try:
        with _write_errors(target), open(tmp, "xb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(target.parent)


@contextlib.contextmanager
def _write_errors(target: Path) -> Iterator[None]:
    """A failed write (a full disk above all: ENOSPC, or EFBIG past a file size
    limit) as ``StoreError`` naming the file and the fix, not a traceback. The
    file itself is untouched: snapshots are replaced atomically, and a journal's
    torn tail is cut off by the next write (``write_at``)."""
    try:
        yield
    except OSError as exc:
        full = exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
        raise StoreError(
            f"cannot write {target}: {exc.strerror or exc}. "
            + ("The disk is full: free space and run the command again; " if full else "Fix the cause and run the command again; ")
            + "what was flushed before is intact and the next run finishes the rest"
        ) from exc


def atomic_write_bytes(target: Path, data: bytes) -> None:
    atomic_write(target, lambda fh: fh.write(data))


def remove_file(target: Path) -> None:
    """Delete ``target`` if it exists and make the deletion durable."""
    target = Path(target)
    try:
        target.unlink()
    except FileNotFoundError:
        return
    fsync_dir(target.parent)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists but not ours, or cannot tell: leave its file alone
    return True


def remove_stale_temps(target: Path) -> list[Path]:
    """Delete temporary files of ``target`` left by writers that were killed."""
    target = Path(target)
    removed: list[Path] = []
    if not target.parent.is_dir():
        return removed
    prefix = _temp_prefix(target)
    for candidate in target.parent.iterdir():
        name = candidate.name
        if not (name.startswith(prefix) and name.endswith(TEMP_SUFFIX)):
            continue
        pid_text = name[len(prefix) :].split(".", 1)[0]
        if not pid_text.isdigit() or _pid_alive(int(pid_text)):
            continue
        with contextlib.suppress(OSError):
            candidate.unlink()
            removed.append(candidate)
    return removed


# -- journal frames ----------------------------------------------------------------


def journal_path(target: Path) -> Path:
    """The journal of snapshot ``target``: ``<target name>.journal`` beside it."""
    return target.with_name(target.name + JOURNAL_SUFFIX)


def frame(payload: bytes) -> bytes:
    """``payload`` framed for the journal (see the module docstring)."""
    length = _LENGTH.pack(len(payload))
    return _MAGIC + length + _LENGTH.pack(zlib.crc32(payload, zlib.crc32(length))) + payload


def _frame_at(data: bytes, pos: int) -> tuple[bytes, int] | None:
    """(payload, end) of the valid frame starting at ``pos``, or None."""
    if pos + _HEAD.size > len(data):
        return None
    magic, length, crc = _HEAD.unpack_from(data, pos)
    start = pos + _HEAD.size
    end = start + length
    if magic != _MAGIC or end > len(data):
        return None
    payload = data[start:end]
    # The crc covers the length too, so a zero-filled tail is not an empty frame.
    if zlib.crc32(payload, zlib.crc32(data[pos + 4 : pos + 8])) != crc:
        return None
    return payload, end


def _valid_frame_after(data: bytes, pos: int) -> bool:
    # A torn tail is a prefix of the last frame written, so nothing valid follows
    # it. Searching for the magic (rather than trusting the damaged frame's length)
    # finds later frames even when the damage hit a length field.
    while (pos := data.find(_MAGIC, pos + 1)) != -1:
        if _frame_at(data, pos) is not None:
            return True
    return False


def read_frames(data: bytes) -> tuple[list[bytes], int]:
    """Payloads of the valid frames at the start of ``data``, and the bytes they span.

    Whatever follows them is a torn tail, ignored; raises ``ValueError`` if a
    valid frame follows a damaged one.
    """
    payloads: list[bytes] = []
    pos = 0
    while (found := _frame_at(data, pos)) is not None:
        payload, pos = found
        payloads.append(payload)
    if pos < len(data) and _valid_frame_after(data, pos):
        raise ValueError(
            f"the record at byte {pos} is damaged but valid records follow it, "
            "so this is not a write cut short by a crash"
        )
    return payloads, pos


@dataclass
class Journal:
    """What a journal file holds: ``generation`` is None when it has no valid
    header (missing, empty, or torn while being started)."""

    generation: int | None = None
    payloads: list[bytes] = field(default_factory=list)
    length: int = 0  # bytes of valid frames; the next append goes there


def read_journal(path: Path) -> Journal:
    """Parse the journal at ``path``; ``ValueError`` when it is corrupt."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Journal()
    payloads, length = read_frames(data)
    if not payloads:
        return Journal()
    header = json.loads(payloads[0])
    if not isinstance(header, dict) or header.get("format") != JOURNAL_FORMAT:
        raise ValueError(f"not a {JOURNAL_FORMAT} file")
    return Journal(int(header["generation"]), payloads[1:], length)


def write_at(path: Path, start: int, data: bytes) -> int:
    """Write ``data`` at byte ``start`` of ``path``, cutting off whatever followed
    (a torn tail, or a failed append), and fsync. ``start == 0`` (re)creates the
    file. Returns the new length."""
    with _write_errors(path), open(path, "r+b" if start else "wb") as fh:
        fh.truncate(start)
        fh.seek(start)
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    if not start:
        fsync_dir(path.parent)  # the file may be new: make its name durable
    return start + len(data)


Signature = tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _replace_snapshot(target: Path, write: Writer) -> int:
    atomic_write(target, write)  # looked up at call time: tests replace it
    return target.stat().st_size


PIECE = 64
"""Items per ``json.dumps`` call when a store encodes what it saves: one call
holds the GIL from start to end (it runs no bytecode), so a whole store in one
call would hold a server's loop for a second even from a worker thread; a
piece takes a few milliseconds, and the interpreter switches threads between
two pieces."""


def json_array(items: list[object], dumps: Callable[[object], bytes], sep: bytes = b",") -> bytes:
    """``dumps(items)``, as the JSON array of ``dumps`` of ``PIECE`` items at a
    time (each a list without its brackets), joined by ``sep``."""
    return b"[" + sep.join(dumps(items[i : i + PIECE])[1:-1] for i in range(0, len(items), PIECE)) + b"]"


def json_object(fields: dict[str, bytes]) -> bytes:
    """A JSON object of already encoded values, in the order given."""
    return b"{" + b",".join(json.dumps(k).encode() + b":" + v for k, v in fields.items()) + b"}"


async def _in_thread(fn: Callable[[], T], start: Callable[[Callable[[], T]], Awaitable[T]] = asyncio.to_thread) -> T:
    """``fn()`` in a worker thread (``start(fn)``: the default executor's),
    waited for even if the caller is cancelled.

    A thread cannot be stopped: the caller's lock must stay held until its file
    write is over, or a later write could overlap it. The cancellation is
    re-raised once the thread is done.
    """
    task = asyncio.ensure_future(start(fn))
    try:
        return await asyncio.shield(task)  # the thread's own error is raised here
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):  # cancelled again: still wait
                await asyncio.wait([task])
        raise


# -- one store's snapshot and journal ------------------------------------------------


class JournaledFile(Generic[K]):
    """Change tracking, journal appends and compaction for one in-memory store.

    Writers call :meth:`touch` with the keys they changed. :meth:`save` takes
    the pending keys, encodes their current state and writes it, both in a
    worker thread: encoding a large store is seconds of work, which on the
    event loop would keep every reader waiting. While it encodes, the store's
    state is frozen: every write first awaits :meth:`writable` (readers do not
    wait, they only read). Writes made after the encoding are pending for the
    next save. Saves and deletions are serialised by a lock, so an older write
    never lands after a newer one, and a drop is never undone by a save that
    was in flight.

    Encoding the current state of changed keys (not the operations) makes a
    failed save easy to retry: its keys are simply pending again.
    """

    def __init__(self, path: Path, what: str) -> None:
        self.path = Path(path)
        self.journal = journal_path(self.path)
        self.what = what  # "graph" or "vector", for error messages
        self.generation = 0
        self._snapshot_bytes = 0
        self._journal_bytes = 0  # 0: no journal of this generation; the next append starts one
        self._pending: dict[K, None] = {}  # a dict keeps the order of changes
        self.lock: asyncio.Lock | None = None  # made by load(), in the store's open()
        self.wrote = False  # saved something since load(): only then may close compact
        self._seen: Signature = (None, None)  # the files as last loaded or written here
        self._stable = asyncio.Event()  # cleared while a thread reads the state (read_in_thread)
        self._stable.set()
        self._reading = 0  # threads reading the state now

    @property
    def dirty(self) -> bool:
        return bool(self._pending)

    @property
    def journaled(self) -> bool:
        """Whether a journal of the current generation holds changes."""
        return self._journal_bytes > 0

    def signature(self) -> Signature:
        return _stat(self.path), _stat(self.journal)

    def changed_on_disk(self) -> bool:
        """Whether another process wrote the files since this one loaded or
        wrote them; False while this one has unsaved changes or a save under
        way (reloading then would lose them)."""
        if self._pending or (self.lock is not None and self.lock.locked()):
            return False
        return self.signature() != self._seen

    async def writable(self) -> None:
        """Return once no thread is reading the store's state (a save encoding
        it, a large search): a store awaits this first in every write (and in
        a reload), then changes its state without awaiting anything else.
        Returns at once, without yielding, when no thread reads."""
        while not self._stable.is_set():  # another reader may start before this waiter runs
            await self._stable.wait()

    async def read_in_thread(self, fn: Callable[[], T]) -> T:
        """``fn()`` in a worker thread, the store's writes waiting meanwhile
        (``writable``): ``fn`` may read the state, never change it. Readers on
        the loop go on."""
        self._reading += 1
        self._stable.clear()
        try:
            return await _in_thread(fn)
        finally:
            self._reading -= 1
            if not self._reading:
                self._stable.set()

    def touch(self, keys: Iterable[K]) -> None:
        """Record that ``keys`` changed (were written or deleted) since the last save."""
        self._pending.update(dict.fromkeys(keys))

    # -- loading -------------------------------------------------------------

    def load(self, read_snapshot: Callable[[], int], apply: Callable[[bytes], None]) -> None:
        """Read the snapshot (``read_snapshot()`` returns its generation), then
        ``apply`` each payload of a journal of the same generation, in order.

        Called by the store's ``open()``, on the event loop that will use the
        store: the lock that serialises saves is made here, for that session.
        """
        remove_stale_temps(self.path)
        seen = self.signature()  # before reading: a write meanwhile shows as a change
        journal = self._read_journal()  # before the snapshot (see the module docstring)
        exists = self.path.exists()
        generation = read_snapshot() if exists else 0
        current = self._check_generation(journal, generation, exists)
        if current:
            self._replay(journal.payloads, apply)
        self.generation = generation
        self._snapshot_bytes = self.path.stat().st_size if exists else 0
        self._journal_bytes = journal.length if current else 0
        self._pending.clear()
        self.lock = asyncio.Lock()
        self.wrote, self._seen = False, seen

    def _read_journal(self) -> Journal:
        try:
            return read_journal(self.journal)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise self._journal_error(exc) from exc

    def _journal_error(self, exc: Exception) -> StoreError:
        return StoreError(
            f"cannot read {self.what} journal {self.journal}: {exc}; restore it together "
            f"with {self.path.name} from a backup, or delete it to reopen the store as of "
            "its last snapshot (losing the changes flushed since) and re-index"
        )

    def _check_generation(self, journal: Journal, generation: int, exists: bool) -> bool:
        """Whether the journal extends this snapshot; an older one is stale (a
        crash between writing a snapshot and removing the journal) and ignored."""
        if journal.generation is None:
            return False
        if not exists:
            raise StoreError(
                f"{self.what} journal {self.journal} holds changes to {self.path}, which "
                f"is missing: restore {self.path.name} from a backup, or delete the "
                "journal too and re-index"
            )
        if journal.generation > generation:
            raise StoreError(
                f"{self.what} journal {self.journal} (generation {journal.generation}) is "
                f"newer than {self.path} (generation {generation}): the snapshot was "
                "replaced by an older copy; restore the matching snapshot, or delete the "
                "journal (losing the changes flushed since) and re-index"
            )
        return journal.generation == generation

    def _replay(self, payloads: list[bytes], apply: Callable[[bytes], None]) -> None:
        for payload in payloads:
            try:
                apply(payload)
            except StoreError:
                raise
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                raise self._journal_error(exc) from exc

    # -- saving --------------------------------------------------------------

    async def save(
        self,
        encode: Callable[[list[K]], bytes],
        snapshot: Callable[[int], Writer],
        *,
        compact: bool = False,
    ) -> bool:
        """Persist the changes since the last save; False if there were none.

        ``encode(keys)`` returns the journal payload for the current state of
        ``keys``; ``snapshot(generation)`` returns a writer of the whole store.
        The changes are appended to the journal, or folded into a new snapshot
        when the journal has outgrown it, and always when ``compact`` is true.
        """
        assert self.lock is not None, "load() (the store's open()) comes first"
        async with self.lock:
            if not self._pending and not (compact and self._journal_bytes):
                return False
            keys = list(self._pending)
            self._pending.clear()  # writes from now on belong to the next save
            try:
                write = await self.read_in_thread(partial(self._plan, keys, encode, snapshot, compact))
                await _in_thread(write)
            except BaseException:
                self.touch(keys)  # not (known to be) saved: pending again
                raise
            finally:
                self._seen = self.signature()  # what this process wrote is not news
            self.wrote = True
            return True

    def _plan(
        self,
        keys: list[K],
        encode: Callable[[list[K]], bytes],
        snapshot: Callable[[int], Writer],
        compact: bool,
    ) -> Callable[[], None]:
        """The write to do, encoded in a worker thread while the store's writes
        wait (``writable``): ``encode`` and ``snapshot`` only read the state."""
        if not compact and self._snapshot_bytes >= SMALL_SNAPSHOT:
            payload = encode(keys)
            if self._journal_bytes + len(payload) <= self._snapshot_bytes:
                return partial(self._append, payload)
        return partial(self._compact, snapshot(self.generation + 1), self.generation + 1)

    def _append(self, payload: bytes) -> None:
        start = self._journal_bytes
        data = frame(payload) if start else self._header() + frame(payload)
        self._journal_bytes = write_at(self.journal, start, data)

    def _header(self) -> bytes:
        header = {"format": JOURNAL_FORMAT, "generation": self.generation}
        return frame(json.dumps(header).encode())

    def _compact(self, write: Writer, generation: int) -> None:
        size = _replace_snapshot(self.path, write)
        # From here on the old journal is stale, whether or not its removal below
        # happens: the next append starts a new one.
        self.generation, self._snapshot_bytes, self._journal_bytes = generation, size, 0
        remove_file(self.journal)

    async def delete(self) -> None:
        """Remove the snapshot and the journal (and stale temps). Changes made
        before this call count as saved (the caller has just emptied the store);
        changes made while it waits for an in-flight save stay pending."""
        self._pending.clear()
        assert self.lock is not None, "load() (the store's open()) comes first"
        async with self.lock:
            try:
                await _in_thread(self._remove_files)
            finally:
                self._seen = self.signature()

    def _remove_files(self) -> None:
        # The journal first: a crash in between leaves the old snapshot whole,
        # never a journal without its snapshot.
        remove_file(self.journal)
        self._journal_bytes = 0
        remove_file(self.path)
        self._snapshot_bytes = 0
        remove_stale_temps(self.path)


class JournaledStore:
    """The lifecycle hooks both journaled stores share (mixed into a store
    class that has ``_file``, ``_open``, ``_encode_changes`` and ``_snapshot``).

    ``refresh``, ``compact`` and ``wants_compaction`` are what
    :class:`ragkit.core.stores.Stores` uses to reload after another process
    wrote and to compact only under the writer lock; it sets
    ``compact_on_close`` to False on the stores it manages.
    """

    compact_on_close = True
    _file: JournaledFile

    async def _flush(self) -> None:
        await self._file.save(self._encode_changes, self._snapshot)  # type: ignore[attr-defined]

    async def _close(self) -> None:
        # Fold the journal into the snapshot once per writing session, leaving
        # one self-contained file. A session that only read writes nothing.
        compact = self.compact_on_close and (self._file.wrote or self._file.dirty)
        await self._file.save(self._encode_changes, self._snapshot, compact=compact)  # type: ignore[attr-defined]
        self._forget()

    def _forget(self) -> None:
        """Drop the in-memory state (after close)."""

    async def _discard(self) -> None:
        # The writer lock was lost: what is only in memory must never be
        # saved. Reloading the files forgets it (and what was saved stays).
        await self._open()  # type: ignore[attr-defined]

    @property
    def wants_compaction(self) -> bool:
        """Unsaved changes, or a journal this session appended to."""
        return self._file.dirty or (self._file.wrote and self._file.journaled)

    async def compact(self) -> None:
        """Fold the journal into a new snapshot now (an open store; the caller
        holds the writer lock)."""
        await self._file.save(self._encode_changes, self._snapshot, compact=True)  # type: ignore[attr-defined]

    async def refresh(self) -> bool:
        """Reload from the files if another process changed them since; True if it did."""
        if not self.is_open or not self._file.changed_on_disk():  # type: ignore[attr-defined]
            return False
        await self._open()  # type: ignore[attr-defined]
        return True
