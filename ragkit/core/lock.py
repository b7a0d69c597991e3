"""One writer per workspace: an inter-process lock taken around every write.

Indexing, deleting, graph edits and ``check --repair`` take it through
:meth:`ragkit.core.stores.Stores.writing`; readers (queries, listings, export,
``check`` without repair) never take it and never write.

Where the lock lives is decided by the doc-status store, the authority for
which documents exist: a store that can hold a lease itself (a server that every
process of the workspace shares) returns one from ``writer_lease()``; for the
others (the embedded SQLite store), it is a file lock beside the workspace's
files, ``<working_dir>/<workspace>/.writer.lock``.

Stale locks. A file lock is an OS lock (``flock``; ``msvcrt.locking`` on
Windows): the OS drops it when its holder exits, however it dies. A server lease
expires ``lease_ttl`` seconds after its holder's last heartbeat (renewed every
third of that), and only its owner (a random token) can renew or release it.

A second writer waits, saying once on stderr (a warning of this module's logger)
who holds the lock, and after ``timeout`` seconds raises
:class:`~ragkit.errors.WriterLockTimeoutError`, which names the holder and the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ragkit.core.files import private_dir
from ragkit.errors import WriterLockTimeoutError

if TYPE_CHECKING:
    from ragkit.protocols.doc_status import DocStatusStore

log = logging.getLogger(__name__)

LOCK_FILENAME = ".writer.lock"
POLL_SECONDS = 0.2


class LockSettings(BaseModel):
    """``[lock]`` in ragkit.toml, ``RAGKIT_LOCK__TIMEOUT`` in the environment."""

    model_config = ConfigDict(extra="forbid")

    timeout: float = Field(default=600.0, ge=0)
    """Seconds a writer waits for another writer of the workspace; 0 fails at once."""
    lease_ttl: float = Field(default=30.0, ge=1)
    """Seconds a server lease outlives its holder's last heartbeat (a holder that
    died frees the workspace after this)."""


class Holder(BaseModel):
    """Who holds (or wants) the lock; stored with it so a waiter can name it."""

    pid: int = Field(default_factory=os.getpid)
    host: str = Field(default_factory=socket.gethostname)
    since: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    what: str = "write"
    token: str = Field(default_factory=lambda: secrets.token_hex(16))

    def describe(self) -> str:
        return f"{self.what} (pid {self.pid} on {self.host}) since {self.since}"

    def encode(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def decode(cls, data: bytes | str | None) -> Holder | None:
        if not data:
            return None
        try:
            return cls.model_validate_json(data)
        except ValueError:  # written half-way, or by something else
            return None


class Lease(Protocol):
    """One workspace's lock as a backend holds it."""

    where: str
    """Where the lock is, for messages (a file path, a server and key)."""
    heartbeat: bool
    """Whether ``renew`` must be called while the lease is held."""

    async def acquire(self, holder: Holder, ttl: float) -> bool: ...
    async def holder(self) -> Holder | None: ...
    async def renew(self, holder: Holder, ttl: float) -> bool: ...
    async def release(self, holder: Holder) -> None: ...


class FileLease:
    """An OS lock on ``<workspace dir>/.writer.lock``, holding its holder's JSON."""

    heartbeat = False

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.where = str(self.path)
        self._fd: int | None = None

    async def acquire(self, holder: Holder, ttl: float) -> bool:
        return await asyncio.to_thread(self._acquire, holder)

    def _acquire(self, holder: Holder) -> bool:
        private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _try_lock(fd):
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
        return self._fd is not None

    async def release(self, holder: Holder) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # no stale name for the next waiter to read
            os.close(fd)  # closing the descriptor drops the OS lock


def _try_lock(fd: int) -> bool:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        # flock, not lockf: it belongs to the open file, so two RAGs in one process exclude each other too.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class WriterLock:
    """The writer lock of one workspace, shared by the writes of one process.

    Writes running concurrently in this process (tasks on the stores' loop)
    share one hold: the first takes the lock, the last releases it. A write
    nested in another (an edit that re-merges through the indexer) is free.
    """

    def __init__(self, lease: Lease, settings: LockSettings | None = None) -> None:
        self.lease = lease
        self.settings = settings or LockSettings()
        self._users = 0
        self._gate: asyncio.Lock | None = None
        self._gate_loop: asyncio.AbstractEventLoop | None = None
        self._holder: Holder | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self.lost = False

    @property
    def held(self) -> bool:
        return self._holder is not None

    @property
    def sole(self) -> bool:
        """Whether exactly one write of this process holds the lock."""
        return self._users == 1

    @contextlib.asynccontextmanager
    async def hold(self, what: str, on_acquired: Callable[[], Awaitable[None]] | None = None) -> AsyncIterator[None]:
        """Hold the lock while the block runs; ``on_acquired`` runs once the
        lock is newly taken (the stores reload what other writers changed)."""
        loop = asyncio.get_running_loop()
        if self._gate is None or (self._gate_loop is not loop and not self._users):
            # A lock belongs to one event loop; a RAG reopened on another makes a new one.
            self._gate, self._gate_loop = asyncio.Lock(), loop
        async with self._gate:
            if self._users == 0:
                await self._acquire(what)
                try:
                    if on_acquired is not None:
                        await on_acquired()
                except BaseException:
                    await self._release()
                    raise
            self._users += 1
        try:
            yield
        finally:
            async with self._gate:  # so a write starting meanwhile takes the lock after this release
                self._users -= 1
                if self._users == 0:
                    await self._release()

    async def _acquire(self, what: str) -> None:
        me = Holder(what=what)
        ttl = self.settings.lease_ttl
        deadline = time.monotonic() + self.settings.timeout
        said = False
        while not await self.lease.acquire(me, ttl):
            other = await self.lease.holder()
            who = other.describe() if other else "another writer (it did not say who)"
            if time.monotonic() >= deadline:
                raise WriterLockTimeoutError(
                    f"another process is writing to this workspace: {who}, holding {self.lease.where}. "
                    f"Waited {self.settings.timeout:g}s (setting lock.timeout, RAGKIT_LOCK__TIMEOUT). "
                    "Fix: wait for it to finish and retry, or raise the timeout; a holder that died "
                    "frees the lock by itself (the OS drops a file lock; a server lease expires after "
                    f"lock.lease_ttl = {ttl:g}s)"
                )
            if not said:
                log.warning("waiting for the writer %s (lock %s; timeout %gs)", who, self.lease.where, self.settings.timeout)
                said = True
            await asyncio.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        self._holder, self.lost = me, False
        if said:
            log.warning("got the writer lock of %s", self.lease.where)
        if self.lease.heartbeat:
            self._heartbeat = asyncio.ensure_future(self._beat(me, ttl))

    async def _beat(self, me: Holder, ttl: float) -> None:
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                renewed = await self.lease.renew(me, ttl)
            except Exception as exc:  # a blip: the next beat tries again within the ttl
                log.warning("could not renew the writer lease %s: %s", self.lease.where, exc)
                continue
            if not renewed:
                self.lost = True
                log.error(
                    "the writer lease %s expired while this process held it (stalled longer than "
                    "lock.lease_ttl = %gs): another writer may have started; run `ragkit check` after",
                    self.lease.where, ttl,
                )
                return

    async def _release(self) -> None:
        holder, self._holder = self._holder, None
        beat, self._heartbeat = self._heartbeat, None
        if beat is not None:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        if holder is not None:
            await self.lease.release(holder)

    async def try_hold_now(self, what: str) -> bool:
        """Take the lock only if it is free right now (used by close, which
        must never wait); release with :meth:`release_now`."""
        if self._users or self._holder is not None:
            return False
        me = Holder(what=what)
        if not await self.lease.acquire(me, self.settings.lease_ttl):
            return False
        self._holder = me
        return True

    async def release_now(self) -> None:
        await self._release()


def lease_for(doc_status: DocStatusStore) -> Lease:
    """The doc-status store's own lease if it offers one, else the file lock."""
    lease = doc_status.writer_lease()
    if lease is not None:
        return lease
    config = doc_status.config
    return FileLease(Path(config.working_dir) / config.workspace / LOCK_FILENAME)
