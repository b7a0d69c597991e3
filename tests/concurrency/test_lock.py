"""The writer lock's own rules, in one process: two ``WriterLock`` objects stand
for two processes (a file lock is per open file, so they exclude each other).

- a second writer fails at once with timeout 0, naming the holder and the fix,
  and gets the lock once the first releases it;
- the writes of one process share one hold (nested and concurrent);
- a Redis lease is renewed and released only by its owner: a holder whose
  lease expired and was taken by another cannot release or extend the new one;
- ``RAGKIT_LOCK__TIMEOUT`` and ``[lock]`` reach the settings.
"""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from ragkit.core.lock import FileLease, Holder, LockSettings, WriterLock
from ragkit.errors import WriterLockTimeoutError
from ragkit.settings import load_settings

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


def test_lock_settings_from_the_environment_and_the_file(tmp_path):
    got = load_settings(env={"RAGKIT_LOCK__TIMEOUT": "0", "RAGKIT_LOCK__LEASE_TTL": "5"}).settings.lock
    assert (got.timeout, got.lease_ttl) == (0, 5)
    toml = tmp_path / "ragkit.toml"
    toml.write_text("[lock]\ntimeout = 12.5\n")
    assert load_settings(toml, env={}).settings.lock.timeout == 12.5
