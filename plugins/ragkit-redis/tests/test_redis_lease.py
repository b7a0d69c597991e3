"""The Redis writer lease as other processes and operators see it: its keys,
its expiry in Redis, what it says where it is, and its errors.

The lease contract (``TestLease_doc_status_redis``) checks the rules through
the lease's own methods; these read Redis beside it. The key names are shared
with every other ragkit process on the workspace (older versions included),
so they are checked as written in ``ragkit_redis.lease``'s docstring.

Troubleshoot: ``ragkit_redis/lease.py``.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis.asyncio import Redis

from ragkit.protocols.lease import Holder
from ragkit.testing.denied import PASSWORD, as_user, check_refusal, refusal
from ragkit_redis import RedisDocStatusStore


async def test_the_lease_lives_at_its_documented_keys_and_expires_after_its_ttl(stores, make_config, redis_url):
    config = make_config("leased", key_prefix="pfx")
    lease = (await stores(RedisDocStatusStore, config)).writer_lease()
    key, fence = f"pfx:{{{config.workspace}:lock}}:writer", f"pfx:{{{config.workspace}:lock}}:fence"
    assert (lease.key, lease.fence_key) == (key.encode(), fence.encode())
    assert lease.where == f"Redis {redis_url} key {key}"
    admin = Redis.from_url(redis_url)
    try:
        me = Holder(what="index")
        assert await lease.acquire(me, 30)
        assert Holder.decode(await admin.get(key)).token == me.token
        assert 29_000 < await admin.pttl(key) <= 30_000
        assert int(await admin.get(fence)) == me.fence == 1
        assert await lease.renew(me, 12.5)
        assert 11_500 < await admin.pttl(key) <= 12_500
        await lease.release(me)
        assert await admin.exists(key) == 0 and int(await admin.get(fence)) == 1  # the counter stays
    finally:
        await admin.aclose()


async def test_a_ttl_below_a_millisecond_asks_redis_for_one(stores, make_config, redis_url):
    """``SET ... PX 0`` is an error in Redis: a ttl that rounds to 0 ms is sent as
    1 ms (read from the server's MONITOR stream: what Redis received), and the
    lease is free again right after."""
    lease = (await stores(RedisDocStatusStore, make_config("tiny"))).writer_lease()
    admin = Redis.from_url(redis_url)
    try:
        async with admin.monitor() as monitor:
            assert await lease.acquire(Holder(), 0.0004)
            sent = await monitor.next_command()
            while not sent["command"].startswith("EVAL"):
                sent = await monitor.next_command()
        assert sent["command"].rsplit(" ", 1)[-1] == "1", sent["command"]
        await asyncio.sleep(0.01)
        assert await lease.acquire(Holder(), 30)  # expired: free for the next
    finally:
        await admin.aclose()


def test_where_hides_the_password(make_config, redis_url):
    config = make_config("where")
    url = as_user(redis_url, "someone")
    lease = RedisDocStatusStore(config.model_copy(update={"options": {"url": url}})).writer_lease()
    assert lease.where.startswith("Redis redis://someone:****@") and PASSWORD not in lease.where


def test_a_store_writes_under_the_lease_only_on_the_same_server_and_database(make_config, redis_url):
    lease = RedisDocStatusStore(make_config("same")).writer_lease()
    assert lease.same_server(redis_url)
    assert not lease.same_server(redis_url.rsplit("/", 1)[0] + "/7")


LEASE_CASES = [
    ("eval", lambda lease, me: lease.acquire(me, 30), "failed to take the writer lease"),
    ("get", lambda lease, me: lease.holder(), "failed to read the writer lease"),
    ("eval", lambda lease, me: lease.renew(me, 30), "failed to renew the writer lease"),
    ("eval", lambda lease, me: lease.release(me), "failed to release the writer lease"),
]


@pytest.mark.parametrize(("denied", "action", "words"), LEASE_CASES, ids=[c[2].split()[2] for c in LEASE_CASES])
async def test_a_failed_lease_command_names_the_operation_and_hides_the_password(
    make_config, redis_url, denied, action, words
):
    user = f"ragkit-{uuid.uuid4().hex[:8]}"
    admin = Redis.from_url(redis_url)
    await admin.execute_command("ACL", "SETUSER", user, "on", f">{PASSWORD}", "~*", "&*", "+@all", f"-{denied}")
    try:
        config = make_config("lease-errs")
        limited = config.model_copy(update={"options": {**config.options, "url": as_user(redis_url, user)}})
        message = await refusal(RedisDocStatusStore(limited), lambda store: action(store.writer_lease(), Holder()))
    finally:
        await admin.execute_command("ACL", "DELUSER", user)
        await admin.aclose()
    check_refusal(message, words, user)
