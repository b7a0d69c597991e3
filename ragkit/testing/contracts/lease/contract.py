"""``LeaseContract``: what every writer lease must do (the rules are stated in
``ragkit.protocols.lease``). A store that offers ``writer_lease()`` runs it;
ragkit's ``tests/contract`` runs it for every such adapter and for the file
lock. Subclass it and override one fixture::

    class TestMyLease(LeaseContract):
        @pytest.fixture
        async def adapter(self, tmp_path):
            opened = []

            async def make():           # one lease per "process" of a workspace
                store = MyStore(config)  # the same config each time
                await store.open()
                opened.append(store)
                return store.writer_lease()

            yield make
            for store in opened:
                await store.close()

Each call of ``make()`` must give a new lease object over the same workspace,
with its own connection where the backend has one, as another process would
open it; the workspace must be fresh (no lease held in it).
"""

from __future__ import annotations

import asyncio

from ragkit.protocols.lease import Holder, Lease
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import ContractBase, contract

TTL = 30.0
SHORT = 0.6
"""Seconds of the leases the tests let expire; they sleep a little longer."""


async def _leases(adapter, n: int) -> list[Lease]:
    leases = [await adapter() for _ in range(n)]
    for lease in leases:
        assert isinstance(lease, Lease), f"`adapter` made {lease!r}, which lacks members of ragkit.protocols.Lease"
    return leases


@contract("lease", Lease, listed=False)
class LeaseContract(ContractBase):
    """The lease contract (see the module docstring for the fixture)."""

    @checks("lease.acquire.exclusive", "lease.holder.current")
    async def test_one_holder_at_a_time(self, adapter):
        """While one holder holds the lease, no other takes it, through any
        lease object, and every one names the holder; released, it is free and
        the next acquire takes it.

        Troubleshoot: ``acquire`` must be one atomic take-if-free on the
        backend (``SET NX``, a unique row, a lock held by the OS), never a read
        then a write.
        """
        a, b, c = await _leases(adapter, 3)
        first, second, third = Holder(what="first"), Holder(what="second"), Holder(what="third")
        assert await b.holder() is None, "a fresh workspace's lease has a holder"
        assert await a.acquire(first, TTL)
        try:
            assert not await b.acquire(second, TTL), "a second holder took a held lease"
            assert not await c.acquire(third, TTL), "a third holder took a held lease"
            for lease in (a, b, c):
                found = await lease.holder()
                assert found is not None and found.token == first.token, f"holder() gave {found}, not the holder"
                assert (found.pid, found.host, found.what) == (first.pid, first.host, first.what)
        finally:
            await a.release(first)
        assert await b.holder() is None, "the lease has a holder after its release"
        assert await b.acquire(second, TTL), "a released lease could not be taken"
        try:
            assert not await a.acquire(first, TTL)
            assert (await c.holder()).token == second.token
        finally:
            await b.release(second)

    @checks("lease.renew.owner-only", "lease.release.owner-only")
    async def test_only_the_holder_renews_and_releases(self, adapter):
        """``renew`` and ``release`` by anyone but the holder change nothing and
        ``renew`` says False; the holder's ``renew`` says True.

        Troubleshoot: both must compare the holder's token with the stored one
        in the same atomic step as the change (a Lua script, a conditional
        statement), or a former holder frees or extends its successor's lease.
        """
        a, b = await _leases(adapter, 2)
        owner, other = Holder(what="owner"), Holder(what="other")
        assert not await a.renew(owner, TTL), "renew of a lease nobody holds said True"
        assert await a.acquire(owner, TTL)
        try:
            assert not await b.renew(other, TTL), "a non-holder's renew said True"
            await b.release(other)
            assert (await b.holder()).token == owner.token, "a non-holder's release freed the lease"
            assert not await b.acquire(other, TTL)
            assert await a.renew(owner, TTL), "the holder's renew said False"
        finally:
            await a.release(owner)
        assert not await a.renew(owner, TTL), "renew after release said True"

    @checks("lease.expiry", "lease.renew.owner-only", "lease.release.owner-only")
    async def test_a_lease_lost_stays_lost(self, adapter):
        """With a heartbeat, a lease not renewed within its ttl goes to the next
        holder; the former holder's ``renew`` then says False (the writer lock's
        fence relies on that) and its ``release`` leaves the new lease alone.
        Without a heartbeat, time alone never frees a held lease.

        Troubleshoot: the expiry must be the backend's (a key's TTL, a time
        compared by the server), and ``renew`` must check the token, not only
        that some lease exists.
        """
        a, b = await _leases(adapter, 2)
        stalled, next_one = Holder(what="stalled"), Holder(what="next")
        assert await a.acquire(stalled, SHORT)
        if not a.heartbeat:
            try:
                await asyncio.sleep(SHORT * 1.5)
                assert not await b.acquire(next_one, TTL), "a lease without heartbeat expired by time"
                assert await a.renew(stalled, TTL)
            finally:
                await a.release(stalled)
            return
        await asyncio.sleep(SHORT * 1.5)  # the holder stalls: no renewal
        assert await b.acquire(next_one, TTL), "an expired lease could not be taken"
        try:
            assert not await a.renew(stalled, TTL), "the former holder's renew said True after another took the lease"
            await a.release(stalled)
            assert (await a.holder()).token == next_one.token, "the former holder's release freed the new lease"
            assert not await a.acquire(stalled, TTL)
            assert not await a.renew(stalled, TTL), "a lost lease came back"
        finally:
            await b.release(next_one)

    @checks("lease.expiry", "lease.renew.owner-only")
    async def test_renewals_keep_the_lease(self, adapter):
        """(Heartbeat leases) A lease renewed before its ttl is still held past
        its first ttl: nobody else takes it.

        Troubleshoot: ``renew`` must set the expiry to ``ttl`` from now.
        """
        a, b = await _leases(adapter, 2)
        holder, other = Holder(what="holder"), Holder(what="other")
        assert await a.acquire(holder, SHORT * 2)
        try:
            for _ in range(3):
                await asyncio.sleep(SHORT)
                assert await a.renew(holder, SHORT * 2), "renew of a held lease said False"
            assert not await b.acquire(other, TTL), "a renewed lease was taken past its first ttl"
            assert (await b.holder()).token == holder.token
        finally:
            await a.release(holder)
