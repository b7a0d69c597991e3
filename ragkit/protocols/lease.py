"""The writer lease protocol: one workspace's writer lock as a backend holds it,
and the fence every store write asks before it reaches the backend.

``ragkit.core.lock.WriterLock`` runs the lock on top of a ``Lease``; a store
that can hold one for every process of the workspace offers it from
``writer_lease()`` (``ragkit.protocols.base.BaseStore``); otherwise the core
uses an OS file lock beside the workspace's files (``ragkit.core.lock.FileLease``).

Rules every lease must follow (``ragkit.testing.contracts.LeaseContract``
checks each; "another process" is another lease object over the same
workspace, with its own connection):

- [lease.acquire.exclusive] While one holder holds the lease, ``acquire`` by
  any other holder returns False, whichever lease object (process) asks.
- [lease.holder.current] ``holder()`` returns the current holder (its pid,
  host and token as given to ``acquire``), ``None`` once it released the lease.
- [lease.renew.owner-only] ``renew(holder, ttl)`` is one atomic
  compare-and-extend on the backend: it returns True only while ``holder``
  (its random ``token``) holds an unexpired lease,
  which then lasts ``ttl`` seconds from the moment the backend applied the
  renewal. Otherwise it changes nothing and returns False, and keeps
  returning False: a lease once lost stays lost for that holder. The writer
  lock calls it before every write of the holder (the fence below), so this
  is what keeps a stalled holder from writing after another took over.
- [lease.release.owner-only] ``release(holder)`` frees the lease only if
  ``holder`` holds it: a former holder's release leaves the new holder's
  lease in place.
- [lease.expiry] With ``heartbeat`` true, a lease that is not renewed for
  ``ttl`` seconds goes to the next ``acquire`` (its holder may have died);
  renewals keep it held past its first ``ttl``. Without a heartbeat, a lease
  holds until released or until its holder's process ends (an OS lock), never
  by time alone; ``renew`` still says False if it was lost another way (its
  lock file removed or replaced).

Which fencing this buys. Before each write made under the lock, the holder
renews its lease (``WriterLock.check``, through ``Fence``): the write starts
only if the holder still held the lease, which then lasts ``ttl`` more
seconds; a holder that stalled longer than ``ttl`` (a blocked event loop, a
paused or suspended process) gets ``WriterLeaseLostError`` from its next write
and writes nothing more. What that leaves is a stall of more than ``ttl``
inside one store call, between the renewal and the backend applying the write.
The store closes it with the write's ``Permit`` (``Fence.permit``):

- a store on the lease's own server checks the lease in the write's own
  transaction or statement and writes nothing when the lease is no longer the
  holder's (Redis: the lease's fencing counter, ``Holder.fence``, watched
  around the write's ``MULTI``; Neo4j: each statement matches the lock node
  with the holder's token);
- any other store calls ``Permit.send`` immediately before each request
  leaves. The holder knows that its lease holds at least ``ttl`` after its
  last renewal was sent (``lease_clock``, which counts suspended time too);
  a request may leave until ``ttl * (1 - SEND_MARGIN)`` after it, later only
  after a renewal, else ``WriterLeaseLostError``. What such a store cannot
  refuse is a request that left in time and that its server applies more
  than ``ttl * SEND_MARGIN`` later, or one whose sending a stall interrupted
  between that check and its last byte: see docs/architecture.md.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field


class Holder(BaseModel):
    """Who holds (or wants) the lock; stored with it so a waiter can name it."""

    pid: int = Field(default_factory=os.getpid)
    host: str = Field(default_factory=socket.gethostname)
    since: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    what: str = "write"
    token: str = Field(default_factory=lambda: secrets.token_hex(16))
    fence: int = Field(default=0, exclude=True)
    """The lease's fencing token, set by ``acquire`` on a lease that has one
    (monotonic per workspace: each acquisition gets a larger one); 0 when it
    has none. Not part of the stored value."""

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


@runtime_checkable
class Lease(Protocol):
    """One workspace's lock as a backend holds it (rules: the module docstring)."""

    where: str
    """Where the lock is, for messages (a file path, a server and key)."""
    heartbeat: bool
    """Whether the lease expires unless ``renew`` is called within ``ttl``."""

    async def acquire(self, holder: Holder, ttl: float) -> bool:
        """Take the lease for ``holder`` if it is free (or expired); True if
        taken. A lease with fencing tokens sets ``holder.fence``."""
        ...

    async def holder(self) -> Holder | None:
        """The current holder, or ``None`` when the lease is free."""
        ...

    async def renew(self, holder: Holder, ttl: float) -> bool:
        """Compare-and-extend: True if ``holder`` still holds it, now for ``ttl`` more seconds."""
        ...

    async def release(self, holder: Holder) -> None:
        """Free the lease if ``holder`` holds it; otherwise change nothing."""
        ...


def lease_clock() -> float:
    """Seconds on a clock that never goes back and keeps counting while the
    machine is suspended (Linux's ``CLOCK_BOOTTIME``; ``time.monotonic``
    elsewhere), so a suspended holder sees the time its lease lost."""
    return time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None else time.monotonic()


_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)

SEND_MARGIN = 0.25
"""Share of ``lease_ttl`` a request must leave before the lease could expire
(``Permit.send``): the time its server has to apply it."""


@dataclass(frozen=True)
class Permit:
    """A write's right to reach the backend: the hold it is made under
    (``Fence.permit``), for the checks a store makes when the request leaves."""

    lease: Lease
    holder: Holder
    until: Callable[[], float]
    """``lease_clock()`` before which a request may leave: the lease holds
    until then plus ``ttl * SEND_MARGIN`` (``inf`` for a lease that cannot expire)."""
    renew: Callable[[], Awaitable[None]]
    """Renew the lease now (moving ``until``), or raise ``WriterLeaseLostError``."""
    refused: Callable[[], Exception]
    """The backend refused the write (the lease is another's): marks the hold
    lost and returns the ``WriterLeaseLostError`` to raise."""

    @property
    def token(self) -> int:
        return self.holder.fence

    def may_send(self) -> bool:
        return lease_clock() < self.until()

    async def send(self) -> None:
        """Call immediately before a request leaves: returns when it may
        (renewing first once the deadline passed), else raises."""
        if not self.may_send():
            await self.renew()


@runtime_checkable
class Fence(Protocol):
    """What a store asks before each write (``BaseStore.fence``; the writer
    lock of the workspace sets it on every store it runs)."""

    lost: bool
    """Whether the lock was lost during the current (or last) hold: unsaved
    writes must then be discarded, not flushed (``BaseStore.discard``)."""

    async def check(self) -> None:
        """Return when the write may go ahead: it is not made under the lock,
        or the lock is still held (and was just extended). Raise
        ``WriterLeaseLostError`` when it is not."""
        ...

    def permit(self) -> Permit | None:
        """The permit of the running task's write: ``None`` when it is not
        made under a hold of this lock (no check needed)."""
        ...


def permit_of(fence: object | None) -> Permit | None:
    """``fence.permit()`` for a store's write; ``None`` without a fence, or
    with a fence that hands out no permits (one written before ``permit``
    existed, or a test's): then the fence's check is all there is."""
    permit = getattr(fence, "permit", None)
    return permit() if callable(permit) else None
