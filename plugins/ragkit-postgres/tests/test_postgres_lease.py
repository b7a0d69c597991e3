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
import gc
import time
import warnings
from urllib.parse import urlparse

import asyncpg
import pytest

from ragkit.errors import StoreError
from ragkit.protocols.lease import Holder
from ragkit_postgres import PostgresDocStatusStore
from ragkit_postgres.testing import fresh_prefix

from freezing_proxy import FreezingProxy

TERMINATE = b"X\x00\x00\x00\x04"  # the protocol's Terminate message: a session closing


async def _row_pid(admin, lease) -> int | None:
    return await admin.fetchval(f"SELECT backend_pid FROM {lease.table} WHERE workspace = $1", lease.workspace)


async def _alive(admin, pid: int) -> bool:
    return bool(await admin.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid))


async def _gone(admin, pid: int) -> bool:
    """Whether session ``pid`` ended (its backend exits just after the client closes)."""
    deadline = time.monotonic() + 5
    while await _alive(admin, pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def test_the_lease_is_the_documented_advisory_lock_on_a_session_of_its_own(stores, make_config, postgres_url):
    config = make_config("leased", table_prefix="rk")
    lease = (await stores(PostgresDocStatusStore, config)).writer_lease()
    assert lease.where == f"PostgreSQL {postgres_url}, advisory lock of workspace {config.workspace!r}"
    admin = await asyncpg.connect(postgres_url)
    probe = "SELECT pg_try_advisory_lock(hashtext($1), hashtext($2))"
    try:
        me = Holder(what="index")
        assert await lease.acquire(me, 30)
        assert not await admin.fetchval(probe, "ragkit-writer:rk", config.workspace)
        session = await _row_pid(admin, lease)
        assert session is not None and await _alive(admin, session)
        assert not await lease.acquire(Holder(), 30)  # the same lease object: advisory locks stack per session
        assert not await lease.renew(Holder(), 30)  # another holder's token
        assert (await lease.holder()).token == me.token and await lease.renew(me, 30)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            await lease.release(me)
            gc.collect()
        assert [str(w.message) for w in caught if "unclosed connection" in str(w.message)] == []  # closed, not dropped
        assert await _row_pid(admin, lease) is None  # no stale row left behind
        assert await _gone(admin, session)  # its session closed: the lock went with it
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
    """``frozen(freeze_on=None)``: a proxy the test freezes, the store's config, and
    that config through the proxy; one second limits."""
    made: list[FreezingProxy] = []

    def frozen(freeze_on: bytes | None = None):
        url = urlparse(postgres_url)
        made.append(FreezingProxy(url.hostname, url.port, freeze_on))
        dsn = url._replace(netloc=f"{url.username}@127.0.0.1:{made[-1].port}").geturl()
        config = make_config("frozen", command_timeout=1, connect_timeout=1)
        return made[-1], config, config.model_copy(update={"options": {**config.options, "dsn": dsn}})

    yield frozen
    for proxy in made:
        proxy.close()


async def test_a_server_that_stops_answering_makes_renewal_say_lost_not_hang(stores, frozen_config):
    proxy, config, through = frozen_config()
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
    proxy, config, through = frozen_config()
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


async def test_a_server_that_stops_answering_as_the_session_closes_does_not_hold_up_release(stores, frozen_config):
    """The statement went through, then the server stopped answering as the lease
    closed its session: release waits at most 5 s for it before dropping the
    connection, and the lock is free once the server sees it gone."""
    proxy, config, through = frozen_config(freeze_on=TERMINATE)
    await stores(PostgresDocStatusStore, config)
    lease = PostgresDocStatusStore(through).writer_lease()
    me = Holder()
    assert await lease.acquire(me, 30)
    started = time.monotonic()
    await asyncio.wait_for(lease.release(me), 30)
    assert 4 < time.monotonic() - started < 15
    proxy.thaw()
    other = (await stores(PostgresDocStatusStore, config)).writer_lease()
    them = Holder()
    deadline = time.monotonic() + 10
    while not await other.acquire(them, 30):
        assert time.monotonic() < deadline, "the dropped session kept the lock"
        await asyncio.sleep(0.1)
    await other.release(them)


@pytest.mark.parametrize("what", ["take", "read"])
async def test_a_lock_statement_past_command_timeout_is_named_and_keeps_no_lock(stores, make_config, postgres_url, what):
    """Another session holds the writer table locked (a long migration, a
    stuck transaction): taking or reading the lock waits ``command_timeout``,
    then fails naming the limit; a failed take keeps no advisory lock."""
    config = make_config("blocked", command_timeout=1, table_prefix=fresh_prefix())  # its own writer table to lock
    store = await stores(PostgresDocStatusStore, config)
    lease = store.writer_lease()
    admin = await asyncpg.connect(postgres_url)
    try:
        async with admin.transaction():
            await admin.execute(f"LOCK TABLE {lease.table} IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreError) as info:
                await asyncio.wait_for(lease.acquire(Holder(), 30) if what == "take" else lease.holder(), 20)
        assert str(info.value).startswith(
            f"{lease.where} failed to {what} the writer lock within command_timeout (1 s), and the statement was "
            "cancelled: another session may hold a lock it waits for"
        )
        other, me = (await stores(PostgresDocStatusStore, config)).writer_lease(), Holder()
        assert await other.acquire(me, 30)
        await other.release(me)
    finally:
        await admin.close()
