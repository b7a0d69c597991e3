"""The PostgreSQL writer lease as other sessions and operators see it: the
advisory lock it takes (shared with every other ragkit process, older ones
included), its row, its sessions, a session ended by the server, and a server
that stops answering.

The lease contract (``TestLease_*_postgres``) checks the rules through the
lease's methods; these read the server beside it.

Troubleshoot: ``ragkit_postgres/lease.py``.
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlparse

import asyncpg
import pytest

from ragkit.errors import StoreError
from ragkit.protocols.lease import Holder
from ragkit_postgres import PostgresDocStatusStore

from freezing_proxy import FreezingProxy

SESSIONS = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"


async def _row_pid(admin, lease) -> int | None:
    return await admin.fetchval(f"SELECT backend_pid FROM {lease.table} WHERE workspace = $1", lease.workspace)


async def _settled(admin, want: int) -> int:
    """The server's client sessions once a closed one is gone (its backend exits just after)."""
    deadline = time.monotonic() + 5
    while (count := await admin.fetchval(SESSIONS)) != want and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return count


async def test_the_lease_is_the_documented_advisory_lock_on_a_session_of_its_own(stores, make_config, postgres_url):
    config = make_config("leased", table_prefix="rk")
    lease = (await stores(PostgresDocStatusStore, config)).writer_lease()
    assert lease.where == f"PostgreSQL {postgres_url}, advisory lock of workspace {config.workspace!r}"
    admin = await asyncpg.connect(postgres_url)
    probe = "SELECT pg_try_advisory_lock(hashtext($1), hashtext($2))"
    try:
        before = await admin.fetchval(SESSIONS)
        me = Holder(what="index")
        assert await lease.acquire(me, 30)
        assert await admin.fetchval(SESSIONS) == before + 1  # its own session, not one of the pool
        assert not await admin.fetchval(probe, "ragkit-writer:rk", config.workspace)
        assert await _row_pid(admin, lease) is not None
        assert not await lease.acquire(Holder(), 30)  # the same lease object: advisory locks stack per session
        assert not await lease.renew(Holder(), 30)  # another holder's token
        assert (await lease.holder()).token == me.token and await lease.renew(me, 30)
        await lease.release(me)
        assert await _row_pid(admin, lease) is None  # no stale row left behind
        assert await _settled(admin, before) == before  # its session closed: the lock went with it
        assert await admin.fetchval(probe, "ragkit-writer:rk", config.workspace)
        await admin.execute("SELECT pg_advisory_unlock_all()")
    finally:
        await admin.close()


async def test_a_lease_whose_session_the_server_ended_is_lost_and_stays_lost(stores, make_config, postgres_url):
    """An administrator's ``pg_terminate_backend`` (or a restart, an idle
    timeout) ends the lease's session: renewals say False from then on, and a
    release of the lost lease neither fails nor frees anyone else's."""
    config = make_config("ended")
    lease = (await stores(PostgresDocStatusStore, config)).writer_lease()
    admin = await asyncpg.connect(postgres_url)
    try:
        me = Holder()
        assert await lease.acquire(me, 30)
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", await _row_pid(admin, lease))
        assert not await lease.renew(me, 30)
        assert not await lease.renew(me, 30)
        other_lease = (await stores(PostgresDocStatusStore, config)).writer_lease()
        other = Holder()
        assert await other_lease.acquire(other, 30)
        await lease.release(me)
        assert (await lease.holder()).token == other.token
        await other_lease.release(other)
    finally:
        await admin.close()


@pytest.fixture
def frozen_config(make_config, postgres_url):
    """A config whose dsn goes through a proxy that the test freezes; one second limits."""
    url = urlparse(postgres_url)
    proxy = FreezingProxy(url.hostname, url.port)
    dsn = url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}").geturl()
    config = make_config("frozen", command_timeout=1, connect_timeout=1)
    yield proxy, config, config.model_copy(update={"options": {**config.options, "dsn": dsn}})
    proxy.close()


async def test_a_server_that_stops_answering_makes_renewal_say_lost_not_hang(stores, frozen_config):
    proxy, config, through = frozen_config
    await stores(PostgresDocStatusStore, config)  # the tables, made directly
    lease = PostgresDocStatusStore(through).writer_lease()
    me = Holder()
    assert await lease.acquire(me, 30)
    proxy.freeze()
    assert not await asyncio.wait_for(lease.renew(me, 30), 20)  # command_timeout: 1 s
    with pytest.raises(StoreError) as info:
        await asyncio.wait_for(lease.holder(), 20)
    assert str(info.value) == (
        f"cannot reach {lease.where} to read the writer lock: no answer in time; is the server running and the dsn right?"
    )
    with pytest.raises(StoreError, match=r"cannot reach .* to take the writer lock: no answer in time"):
        await asyncio.wait_for(PostgresDocStatusStore(through).writer_lease().acquire(Holder(), 30), 20)


async def test_a_release_on_a_server_that_stopped_answering_fails_in_time_and_drops_the_session(stores, frozen_config):
    proxy, config, through = frozen_config
    await stores(PostgresDocStatusStore, config)
    lease = PostgresDocStatusStore(through).writer_lease()
    me = Holder()
    assert await lease.acquire(me, 30)
    proxy.freeze()
    started = time.monotonic()
    with pytest.raises(StoreError) as info:
        await asyncio.wait_for(lease.release(me), 30)
    assert str(info.value).startswith(
        f"{lease.where} failed to release the writer lock within command_timeout (1 s), and the statement was cancelled"
    )
    assert time.monotonic() - started < 15  # 1 s for the statement, at most 5 s to close the session
    assert not await lease.renew(me, 30)
