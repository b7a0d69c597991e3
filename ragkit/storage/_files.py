"""Crash-safe file replacement shared by the file-backed embedded stores.

A snapshot is written to a temporary file in the target's directory, fsynced,
renamed over the target with ``os.replace`` (atomic on POSIX and Windows) and the
directory is fsynced so that the rename itself is durable. A reader therefore
sees either the previous complete file or the new complete file, never a torn
one, whatever moment the writing process is killed at.

Temporary files are named ``.<target name>.<pid>.<random>.tmp``; a process killed
mid-write leaves one behind, and :func:`remove_stale_temps` (called when a store
opens) deletes those whose writer process no longer exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

TEMP_SUFFIX = ".tmp"


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


def atomic_write(target: Path, write: Callable[[BinaryIO], None]) -> None:
    """Replace ``target`` with what ``write(file)`` writes, atomically and durably."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(target)
    try:
        with open(tmp, "xb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(target.parent)


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


class SnapshotFile:
    """Dirty tracking and serialised, atomic saving of one in-memory store's file.

    Writers call :meth:`touch` after each change. :meth:`save` takes a snapshot
    (synchronously, so it is consistent with respect to the event loop), then
    writes it in a worker thread; saves and deletions are serialised by a lock
    so that an older snapshot can never land after a newer one, and a drop can
    never be undone by a save that was in flight.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._version = 0
        self._saved_version = 0
        self._lock: asyncio.Lock | None = None

    @property
    def lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def reset(self) -> None:
        """Forget dirtiness (after loading from disk)."""
        self._version = self._saved_version = 0
        self._lock = None

    @property
    def dirty(self) -> bool:
        return self._version != self._saved_version

    def touch(self) -> None:
        self._version += 1

    async def save(self, snapshot: Callable[[], Callable[[BinaryIO], None]]) -> bool:
        """Write the file if dirty; ``snapshot()`` returns the writer callable."""
        async with self.lock:
            if not self.dirty:
                return False
            version = self._version
            writer = snapshot()
            await asyncio.to_thread(atomic_write, self.path, writer)
            self._saved_version = version
            return True

    async def delete(self) -> None:
        """Remove the file (and any stale temps). Changes made before this call
        count as saved (the caller has just emptied the store); changes made while
        it waits for an in-flight save still mark the store dirty."""
        version = self._version
        async with self.lock:
            await asyncio.to_thread(remove_file, self.path)
            remove_stale_temps(self.path)
            self._saved_version = version
