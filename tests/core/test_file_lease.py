"""``FileLease`` on its own: the file it makes, what it tells a waiter, and
when it knows it lost the lock. (``tests/concurrency/test_lock.py`` runs it
under ``WriterLock``; the lease contract, ``TestLease_file``, the protocol.)

Troubleshoot: ``ragkit/core/file_lease.py``.
"""

from __future__ import annotations

import os
import stat

import pytest

from ragkit.core.file_lease import FileLease
from ragkit.core.lock import LockSettings, WriterLock
from ragkit.errors import WriterLockTimeoutError
from ragkit.protocols.lease import Holder


async def test_the_lock_file_is_readable_by_others_and_writable_by_its_owner(tmp_path):
    """0644 (less the umask): another user's ``ragkit status`` can name the writer."""
    lease = FileLease(tmp_path / "ws" / ".writer.lock")
    old = os.umask(0o022)
    try:
        assert await lease.acquire(Holder(what="index"), 30)
    finally:
        os.umask(old)
    assert stat.S_IMODE(lease.path.stat().st_mode) == 0o644
    assert stat.S_IMODE(lease.path.parent.stat().st_mode) == 0o700
    await lease.release(Holder())


async def test_a_waiter_is_told_the_lock_file_and_its_holder(tmp_path):
    path = tmp_path / ".writer.lock"
    lease = FileLease(path)
    assert lease.where == str(path)
    held = Holder(what="index")
    assert await lease.acquire(held, 30)
    assert await FileLease(path).holder() == held
    with pytest.raises(WriterLockTimeoutError) as caught:
        async with WriterLock(FileLease(path), LockSettings(timeout=0)).hold("delete"):
            pass
    assert f"index (pid {os.getpid()} " in str(caught.value) and f"holding {path}." in str(caught.value)
    await lease.release(held)
    assert await FileLease(path).holder() is None and path.read_bytes() == b""


async def test_renew_knows_whether_its_file_is_still_the_locked_one(tmp_path):
    path = tmp_path / ".writer.lock"
    lease, me = FileLease(path), Holder()
    assert not await lease.renew(me, 30), "not held"
    assert await lease.acquire(me, 30) and await lease.renew(me, 30)
    path.unlink()
    assert not await lease.renew(me, 30), "removed"
    path.write_bytes(b"")
    assert not await lease.renew(me, 30), "replaced by another file"
    await lease.release(me)
    assert await lease.acquire(me, 30) and await lease.renew(me, 30)
    await lease.release(me)
