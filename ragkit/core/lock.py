"""One writer per workspace: an inter-process lock taken around every write.

Indexing, deleting, graph edits and ``check --repair`` take it through
:meth:`ragkit.core.stores.Stores.writing`; readers (queries, listings, export,
``check`` without repair) never take it and never write.

Where the lock lives (``lease_for``): in the first store that can hold a lease
for every process of the workspace (a server they all share) and offers one from
``writer_lease()``, asking the doc-status store first (the authority for which
documents exist), then the graph, KV and vector stores; when none does (the
embedded stores), a file lock beside the workspace's files,
``<working_dir>/<workspace>/.writer.lock`` (``ragkit.core.file_lease``). The rules a lease follows are
``ragkit.protocols.lease``'s.

Stale locks. A file lock is an OS lock (``flock``; ``LockFileEx`` on Windows,
both through ``filelock.lock_descriptor``, which knows which errors mean "held
by another" on each platform and file system): the OS drops it when its holder
exits, however it dies. A server lease expires ``lease_ttl`` seconds after its
holder's last heartbeat (renewed every third of that), and only its owner (a
random token) can renew or release it.

Fencing. A holder that stalls longer than ``lease_ttl`` (a blocked event loop,
a paused or suspended process) loses its lease to the next writer, and must
not write after it wakes up. So every store write made under the lock first
asks ``WriterLock.check`` (the stores' ``fence``), which renews the lease (one
compare-and-extend): the write goes ahead only if this process still holds
it, and a holder that lost it gets ``WriterLeaseLostError`` from that write
and every later one of the same hold, and its stores drop what they had not
saved yet. Writes made outside a hold (a query caching an answer) are not the
holder's and are not checked. A file lock cannot be lost by stalling; its
check only sees whether the lock file was removed or replaced.

A holder can also stall after that check, inside the store call, with its
request not yet applied. So a store also checks the write's ``permit()``
where it sends the request (``ragkit.protocols.lease``; docs/architecture.md
has the table):

- Redis stores on the Redis lease's server: ``WATCH`` of the lease's fencing
  counter around the write's ``MULTI``/``EXEC``, refused once another writer
  acquired (``ragkit_redis._base.RedisStore.commit``);
- the Neo4j graph under its own lease: each statement matches the lock node
  with the holder's token, refused once it is another's (``ragkit_neo4j.lease``);
- every other server store (Chroma; Neo4j under the Redis lease; Redis on
  another server): the permit's deadline, immediately before each request
  leaves: ``lease_ttl * (1 - SEND_MARGIN)`` after the last renewal was sent,
  past which it renews first or raises. Not refused there: a request that
  left in time and was applied more than ``lease_ttl * SEND_MARGIN`` later,
  or one a stall caught between that check and its last byte.

A second writer waits, saying once on stderr (a warning of this module's logger)
who holds the lock, and after ``timeout`` seconds raises
:class:`~ragkit.errors.WriterLockTimeoutError`, which names the holder and the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from ragkit.core.file_lease import LOCK_FILENAME, FileLease
from ragkit.errors import WriterLeaseLostError, WriterLockTimeoutError
from ragkit.protocols.lease import SEND_MARGIN, Holder, Lease, Permit, lease_clock

if TYPE_CHECKING:
    from ragkit.protocols.base import BaseStore

__all__ = ["LOCK_FILENAME", "FileLease", "Holder", "Lease", "LockSettings", "WriterLock", "lease_for"]

log = logging.getLogger(__name__)

POLL_SECONDS = 0.2


class LockSettings(BaseModel):
    """``[lock]`` in ragkit.toml, ``RAGKIT_LOCK__TIMEOUT`` in the environment."""

    model_config = ConfigDict(extra="forbid")

    timeout: float = Field(default=600.0, ge=0)
    """Seconds a writer waits for another writer of the workspace; 0 fails at once."""
    lease_ttl: float = Field(default=30.0, ge=1)
    """Seconds a server lease outlives its holder's last heartbeat (a holder that
    died frees the workspace after this)."""


_WRITES: ContextVar[tuple[tuple[WriterLock, Holder], ...]] = ContextVar("ragkit_writes", default=())
"""The holds the running task writes under (each lock with the holder it had
when the write began): tasks a write starts inherit them, readers have none."""


class WriterLock:
    """The writer lock of one workspace, shared by the writes of one process.

    Writes running concurrently in this process (tasks on the stores' loop)
    share one hold: the first takes the lock, the last releases it. A write
    nested in another (an edit that re-merges through the indexer) is free.
    It is also every store's ``fence`` (``check``): see the module docstring.
    """

    def __init__(self, lease: Lease, settings: LockSettings | None = None) -> None:
        self.lease = lease
        self.settings = settings or LockSettings()
        self._users = 0
        self._gate: asyncio.Lock | None = None
        self._gate_loop: asyncio.AbstractEventLoop | None = None
        self._holder: Holder | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._until = -math.inf
        """Monotonic time before which the current holder's requests may
        leave (``Permit.until``): its last renewal's start + ttl * (1 - SEND_MARGIN)."""
        self.lost = False
        """The lease was lost during the current (or last) hold: nothing more
        is written under it, and unsaved writes are discarded, not flushed."""

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
                        with self._writing():
                            await on_acquired()
                except BaseException:
                    await self._release()
                    raise
            self._users += 1
        try:
            with self._writing():
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
        while not await self._take(me, ttl):
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

    async def _take(self, me: Holder, ttl: float) -> bool:
        started = lease_clock()
        if not await self.lease.acquire(me, ttl):
            return False
        self._valid_from(started)
        return True

    async def _renew(self, me: Holder, ttl: float) -> bool:
        started = lease_clock()
        renewed = await self.lease.renew(me, ttl)
        if renewed and self._holder is me:
            self._valid_from(started)
        return renewed

    def _valid_from(self, started: float) -> None:
        """The lease was taken or renewed by a request sent at ``started``: the
        server counts its ttl from a later moment, so it holds at least until
        ``started + ttl``; requests may leave until a margin before that."""
        if not self.lease.heartbeat:
            self._until = math.inf
            return
        self._until = max(self._until, started + self.settings.lease_ttl * (1 - SEND_MARGIN))

    async def _beat(self, me: Holder, ttl: float) -> None:
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                renewed = await self._renew(me, ttl)
            except Exception as exc:  # a blip: the next beat tries again within the ttl
                log.warning("could not renew the writer lease %s: %s", self.lease.where, exc)
                continue
            if not renewed:
                self._lose(me)
                return

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Mark what runs inside (and the tasks it starts) as writes of this hold."""
        assert self._holder is not None
        token = _WRITES.set((*_WRITES.get(), (self, self._holder)))
        try:
            yield
        finally:
            _WRITES.reset(token)

    async def check(self) -> None:
        """The fence every store asks before a write (``BaseStore.fence``).

        A write of a hold of this lock goes ahead only when the lease is still
        this hold's: renewed now (one compare-and-extend), it lasts
        ``lease_ttl`` more seconds. Otherwise ``WriterLeaseLostError``, for this
        write and every later one of the hold. Other writes (not made inside
        ``hold``, such as a query caching an answer) pass unchecked."""
        mine = self._mine()
        if mine is not None:
            await self._recheck(mine)

    def permit(self) -> Permit | None:
        """The permit of the running task's write (``Fence.permit``): ``None``
        outside a hold of this lock."""
        mine = self._mine()
        if mine is None:
            return None
        return Permit(
            self.lease, mine,
            until=lambda: self._until if self._holder is mine and not self.lost else -math.inf,
            renew=lambda: self._recheck(mine),
            refused=lambda: self._refused(mine),
        )

    def _mine(self) -> Holder | None:
        return next((holder for lock, holder in reversed(_WRITES.get()) if lock is self), None)

    async def _recheck(self, mine: Holder) -> None:
        if self.lost or self._holder is not mine:
            raise self._lost_error(mine)
        # Every time, not "recently confirmed": a clock can miss a stall (a
        # suspended machine), the lease's server cannot.
        if not await self._renew(mine, self.settings.lease_ttl):
            self._lose(mine)
            raise self._lost_error(mine)

    def _refused(self, mine: Holder) -> WriterLeaseLostError:
        self._lose(mine)
        return self._lost_error(mine)

    def _lose(self, me: Holder) -> None:
        if self._holder is me and not self.lost:
            self.lost = True
            log.error(
                "this process lost the writer lock %s while it held it: %s; nothing more is written under it",
                self.lease.where, self._why(),
            )

    def _why(self) -> str:
        if self.lease.heartbeat:
            return (
                f"it stalled for longer than lock.lease_ttl = {self.settings.lease_ttl:g}s (a blocked event "
                "loop, a paused or suspended process) and another writer may have taken over"
            )
        return "its lock file was removed or replaced, so another writer may have locked a new one"

    def _lost_error(self, me: Holder) -> WriterLeaseLostError:
        fix = (
            "if such stalls are expected, raise lock.lease_ttl (RAGKIT_LOCK__LEASE_TTL)"
            if self.lease.heartbeat
            else "never remove the lock file (or the workspace's folder) while a writer runs"
        )
        return WriterLeaseLostError(
            f"this process lost the writer lock of the workspace ({self.lease.where}) during its "
            f"{me.what} begun {me.since}: {self._why()}. Nothing more was written; what it left half "
            f"done is redone by the next `ragkit index` (recovery). Fix: run it again; {fix}"
        )

    async def _release(self) -> None:
        holder, self._holder = self._holder, None
        self._until = -math.inf
        beat, self._heartbeat = self._heartbeat, None
        if beat is not None:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        if holder is not None:
            await self.lease.release(holder)

    @contextlib.asynccontextmanager
    async def hold_if_free(self, what: str) -> AsyncIterator[bool]:
        """Hold the lock for the block only if it is free right now (used by
        close, which must never wait); yields whether it is held. Writes in the
        block are fenced like those of ``hold``."""
        if self._users or self._holder is not None:
            yield False
            return
        me = Holder(what=what)
        ttl = self.settings.lease_ttl
        if not await self._take(me, ttl):
            yield False
            return
        self._holder, self.lost = me, False
        if self.lease.heartbeat:
            self._heartbeat = asyncio.ensure_future(self._beat(me, ttl))
        try:
            with self._writing():
                yield True
        finally:
            await self._release()


def lease_for(first: BaseStore, *others: BaseStore) -> Lease:
    """The lease of the first store that offers one (``first``, the doc-status
    store, then ``others`` in order), else the file lock of ``first``'s workspace."""
    for store in (first, *others):
        lease = store.writer_lease()
        if lease is not None:
            return lease
    config = first.config
    return FileLease(Path(config.working_dir) / config.workspace / LOCK_FILENAME)
