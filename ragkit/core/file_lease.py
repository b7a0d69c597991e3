"""The file lease: the writer lock of a workspace whose stores are files
(``ragkit.core.lock`` takes it when no store offers a lease of its own).

An OS lock (``flock``; ``LockFileEx`` on Windows, both through
``filelock.lock_descriptor``, which knows which errors mean "held by
another" on each platform and file system) on
``<working_dir>/<workspace>/.writer.lock``: the OS drops it when its holder
exits, however it dies. The file holds the holder's JSON, for the next
waiter to name.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from ragkit.core.files import private_dir
from ragkit.protocols.lease import Holder

LOCK_FILENAME = ".writer.lock"


class FileLease:
    """An OS lock on ``<workspace dir>/.writer.lock``, holding its holder's JSON.

    The OS keeps it until it is released or the process exits, so a stalled
    holder cannot lose it to another process. It can be lost only if the file
    is removed or replaced while held (a cleanup deleting the workspace folder
    or the lock file): a second process would then lock a new file. ``renew``
    sees that (the path no longer names the locked file) and the holder stops.
    On a network file system a lock can also be lost with the client's lease
    on the server; use a server lease there (docs/architecture.md).

    Not ``filelock.FileLock`` itself: the holder's JSON and the fencing check
    need the locked descriptor, which this class keeps (filelock takes the lock).
    """

    heartbeat = False

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.where = str(self.path)
        self._fd: int | None = None

    async def acquire(self, holder: Holder, ttl: float) -> bool:
        return await asyncio.to_thread(self._acquire, holder)

    def _acquire(self, holder: Holder) -> bool:
        # Imported here: only writers need it, and it would add ~20 ms to every command's start.
        from filelock import lock_descriptor

        private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        # Locks the open file (flock), not the process (lockf): two RAGs in one process exclude each other too.
        if not lock_descriptor(fd, blocking=False):
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        self._fd = fd
        return True

    async def holder(self) -> Holder | None:
        try:
            return Holder.decode(self.path.read_bytes())
        except OSError:
            return None

    async def renew(self, holder: Holder, ttl: float) -> bool:
        fd = self._fd
        if fd is None:
            return False
        try:
            locked, named = os.fstat(fd), os.stat(self.path)
        except OSError:  # the lock file was removed
            return False
        return (locked.st_dev, locked.st_ino) == (named.st_dev, named.st_ino)

    async def release(self, holder: Holder) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # no stale name for the next waiter to read
            os.close(fd)  # closing the descriptor drops the OS lock
