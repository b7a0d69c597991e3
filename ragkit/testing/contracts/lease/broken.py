"""Deliberately broken writer leases, the lease contract's test subjects: each adds
exactly one defect, named by its ``defect``, to the reference adapter (how
the self-test runs ``DEFECTS`` and ``RULE_BREAKERS``: ``base.broken``)."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from ragkit.protocols.lease import Holder


# -- the reference: a correct lease over a shared dict -----------------------


class MemoryLease:
    """A correct heartbeat lease whose "server" is a dict shared by the lease
    objects of one workspace (the reference of the lease breakers)."""

    heartbeat = True

    def __init__(self, table: dict[str, Any]) -> None:
        self.table = table
        self.where = "memory"

    def _current(self) -> Holder | None:
        held = self.table.get("lease")
        return held[0] if held and held[1] > time.monotonic() else None

    async def acquire(self, holder: Holder, ttl: float) -> bool:
        if self._current() is not None:
            return False
        self.table["lease"] = (holder, time.monotonic() + ttl)
        return True

    async def holder(self) -> Holder | None:
        return self._current()

    async def renew(self, holder: Holder, ttl: float) -> bool:
        current = self._current()
        if current is None or current.token != holder.token:
            return False
        self.table["lease"] = (holder, time.monotonic() + ttl)
        return True

    async def release(self, holder: Holder) -> None:
        current = self._current()
        if current is not None and current.token == holder.token:
            del self.table["lease"]


# -- rule breakers ------------------------------------------------------------


class BlindRenewLease(MemoryLease):
    """Renews whatever lease is there (a bare ``PEXPIRE``): a holder that lost
    its lease extends its successor's and believes it still holds it."""

    violates: ClassVar[str] = "lease.renew.owner-only"
    defect: ClassVar[str] = "renew does not compare the holder"

    async def renew(self, holder: Holder, ttl: float) -> bool:
        current = self._current()
        if current is None:
            return False
        self.table["lease"] = (current, time.monotonic() + ttl)
        return True


class BlindReleaseLease(MemoryLease):
    """Deletes the lease whoever holds it (a bare ``DEL``)."""

    violates: ClassVar[str] = "lease.release.owner-only"
    defect: ClassVar[str] = "release frees another holder's lease"

    async def release(self, holder: Holder) -> None:
        self.table.pop("lease", None)


class EverlastingLease(MemoryLease):
    """Says it has a heartbeat but never expires (a key set without a TTL):
    a holder that died blocks the workspace for ever."""

    violates: ClassVar[str] = "lease.expiry"
    defect: ClassVar[str] = "a lease that is not renewed never expires"

    def _current(self) -> Holder | None:
        held = self.table.get("lease")
        return held[0] if held else None


DEFECTS: tuple[type, ...] = ()

RULE_BREAKERS: dict[str, tuple[type, ...]] = {
    "LeaseContract": (BlindRenewLease, BlindReleaseLease, EverlastingLease),
}

REFERENCES: dict[str, type] = {"LeaseContract": MemoryLease}
