"""The writer lock's own rules, in one process: two ``WriterLock`` objects stand
for two processes (a file lock is per open file, so they exclude each other).

- a second writer fails at once with timeout 0, naming the holder and the fix,
  and gets the lock once the first releases it;
- the writes of one process share one hold (nested and concurrent);
- a Redis lease is renewed and released only by its owner: a holder whose
  lease expired and was taken by another cannot release or extend the new one;
- the fence: a holder whose event loop was blocked past ``lease_ttl`` (Redis
  and Neo4j leases), or whose lock file was removed, writes nothing more to
  any store, while writes made outside the hold (a query caching an answer)
  are not checked;
- ``RAGKIT_LOCK__TIMEOUT`` and ``[lock]`` reach the settings.

(The lease rules themselves are the lease contract's, in tests/contract.)
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest

from ragkit.core.lock import FileLease, Holder, LockSettings, WriterLock
from ragkit.errors import WriterLeaseLostError, WriterLockTimeoutError
from ragkit.protocols.base import StoreConfig
from ragkit.settings import load_settings
from ragkit.storage import SQLiteKVStore

from .conftest import REQUIRED


def file_lock(tmp_path, **settings) -> WriterLock:
    return WriterLock(FileLease(tmp_path / ".writer.lock"), LockSettings(**settings))


async def test_a_second_writer_fails_at_once_naming_the_holder_then_gets_the_lock(tmp_path, caplog):
    first, second = file_lock(tmp_path), file_lock(tmp_path, timeout=0)
    async with first.hold("index"):
        with pytest.raises(WriterLockTimeoutError) as info:
            async with second.hold("delete"):
                pass
        message = str(info.value)
        assert f"index (pid {os.getpid()} on " in message and "RAGKIT_LOCK__TIMEOUT" in message and "Fix:" in message
    async with second.hold("delete"):
        assert second.held and not first.held


async def test_a_waiting_writer_says_so_once_and_proceeds_when_the_holder_releases(tmp_path, caplog):
    first, second = file_lock(tmp_path), file_lock(tmp_path, timeout=30)
    entered = asyncio.Event()

    async def later():
        async with second.hold("edit"):
            entered.set()

    async with first.hold("index"):
        task = asyncio.create_task(later())
        await asyncio.sleep(0.5)
        assert not entered.is_set()
    await asyncio.wait_for(task, 10)
    waits = [r.getMessage() for r in caplog.records if "waiting for the writer" in r.getMessage()]
    assert len(waits) == 1 and f"index (pid {os.getpid()}" in waits[0]


async def test_writes_of_one_process_share_one_hold(tmp_path):
    lock, other = file_lock(tmp_path), file_lock(tmp_path, timeout=0)
    reloads = []

    async def reload():
        reloads.append(1)

    async def write(delay):
        async with lock.hold("index", reload):
            async with lock.hold("nested", reload):  # an edit re-merging through the indexer
                await asyncio.sleep(delay)

    await asyncio.gather(write(0.2), write(0.3))
    assert reloads == [1]  # taken (and the stores reloaded) once
    async with other.hold("after"):  # released by the last of them
        pass


async def test_a_redis_lease_is_renewed_and_released_only_by_its_owner(tmp_path):
    from ragkit_redis.doc_status import RedisDocStatusStore

    from ragkit.protocols.base import StoreConfig
    from ragkit.testing.contracts.options import contract_options

    try:
        options = contract_options("doc_status", "redis", tmp_path)
    except pytest.skip.Exception as exc:
        if "servers" in REQUIRED:
            pytest.fail(f"Redis is required but unreachable: {exc.msg}")
        raise

    store = RedisDocStatusStore(StoreConfig(namespace="doc_status", workspace=f"l{uuid.uuid4().hex[:8]}", working_dir=tmp_path, options=options))
    await store.open()
    try:
        lease = store.writer_lease()
        old, new = Holder(what="old"), Holder(what="new")
        assert await lease.acquire(old, 0.3)
        assert not await lease.acquire(new, 0.3)
        assert (await lease.holder()).token == old.token
        assert await lease.renew(old, 0.3)
        await asyncio.sleep(0.5)  # the old holder stalled: its lease expired
        assert await lease.acquire(new, 30)
        assert not await lease.renew(old, 30)
        await lease.release(old)  # must not delete the new holder's lease
        assert (await lease.holder()).token == new.token
        await lease.release(new)
        assert await lease.holder() is None
    finally:
        await store.client.delete(lease.key)
        await store.close()


def _server_store(kind: str, name: str, tmp_path, workspace: str):
    """An unopened ``kind:name`` store on the test servers (a failure when
    ``RAGKIT_MATRIX_REQUIRE`` names ``servers``, else a skip)."""
    from ragkit.plugins import create_store, get_registry
    from ragkit.testing.contracts.options import contract_options

    try:
        options = contract_options(kind, name, tmp_path)
    except pytest.skip.Exception as exc:
        if "servers" in REQUIRED:
            pytest.fail(f"{kind}:{name} is required but unreachable: {exc.msg}")
        raise
    cls = get_registry().get(kind, name)
    return create_store(kind, cls, StoreConfig(namespace=kind, workspace=workspace, working_dir=tmp_path, options=options))


@pytest.mark.parametrize("server", ["doc_status:redis", "graph:neo4j"])
async def test_a_holder_blocked_past_the_ttl_writes_nothing_more(tmp_path, server):
    """The event loop of the holder blocks (``time.sleep``) longer than its
    lease; another writer takes the lease and writes; the holder's next write,
    to a store that is not the lease's (SQLite here), is refused with
    ``WriterLeaseLostError`` and changes nothing. A write made meanwhile by a
    task that is not part of the hold (a query caching an answer) passes."""
    workspace = f"f{uuid.uuid4().hex[:8]}"
    home, away = (_server_store(*server.split(":"), tmp_path, workspace) for _ in range(2))
    config = StoreConfig(namespace="kv", workspace=workspace, working_dir=tmp_path)
    kv, kv_away = SQLiteKVStore(config), SQLiteKVStore(config)  # this process's and the other's
    for store in (home, away, kv, kv_away):
        await store.open()
    stalled = WriterLock(home.writer_lease(), LockSettings(lease_ttl=1))
    taker = WriterLock(away.writer_lease(), LockSettings(timeout=5))
    kv.fence, kv_away.fence = stalled, taker
    reading = asyncio.Event()

    async def reader():
        await reading.wait()
        await kv.upsert({"cached": {"v": 4}})

    query = asyncio.create_task(reader())  # started outside the hold
    try:
        with pytest.raises(WriterLeaseLostError, match="lease_ttl = 1s"):
            async with stalled.hold("index"):
                await kv.upsert({"before": {"v": 1}})
                time.sleep(1.5)  # a blocked event loop: no heartbeat runs
                async with taker.hold("delete"):
                    await kv_away.upsert({"after": {"v": 2}})
                    reading.set()
                    await query
                    await kv.upsert({"stalled": {"v": 3}})
        assert stalled.lost and not stalled.held
        assert await kv.get_many(["before", "after", "cached", "stalled"]) == [{"v": 1}, {"v": 2}, {"v": 4}, None]
    finally:
        for store in (kv, kv_away, away, home):
            store.fence = None
            if store.is_open:
                if store is away:
                    await store.drop()
                await store.close()


async def test_a_holder_whose_lock_file_was_removed_writes_nothing_more(tmp_path):
    """A file lock cannot be lost by stalling (the OS keeps it), but a removed
    lock file lets a second process lock a new one: the holder's next write
    sees that its file is gone and is refused."""
    path = tmp_path / "ws" / ".writer.lock"
    first, second = WriterLock(FileLease(path)), WriterLock(FileLease(path), LockSettings(timeout=0))
    kv = SQLiteKVStore(StoreConfig(namespace="kv", workspace="ws", working_dir=tmp_path))
    await kv.open()
    kv.fence = first
    try:
        with pytest.raises(WriterLeaseLostError):
            async with first.hold("index"):
                await kv.upsert({"before": {"v": 1}})
                with pytest.raises(WriterLockTimeoutError):  # held: the OS lock keeps others out
                    async with second.hold("delete"):
                        pass
                path.unlink()  # a cleanup removes the lock file
                async with second.hold("delete"):  # ...and a second writer locks a new one
                    await kv.upsert({"stalled": {"v": 2}})
        assert await kv.get_many(["before", "stalled"]) == [{"v": 1}, None]
    finally:
        kv.fence = None
        await kv.close()


def test_lock_settings_from_the_environment_and_the_file(tmp_path):
    got = load_settings(env={"RAGKIT_LOCK__TIMEOUT": "0", "RAGKIT_LOCK__LEASE_TTL": "5"}).settings.lock
    assert (got.timeout, got.lease_ttl) == (0, 5)
    toml = tmp_path / "ragkit.toml"
    toml.write_text("[lock]\ntimeout = 12.5\n")
    assert load_settings(toml, env={}).settings.lock.timeout == 12.5
