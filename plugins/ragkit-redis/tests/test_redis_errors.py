"""A server error names what the store was doing, and never the password.

Each case opens a store as a Redis user denied one command (an ACL: the
server answers ``NOPERM`` at once, with no retry), asks the store for what
needs that command and checks the ``StoreError``: the operation's words, the
url with the password masked. What a user reads is the only clue to which
call failed when one of many concurrent writes does.

Troubleshoot: the words are ``RedisStore.errors(what)``'s argument at each call.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from redis.asyncio import Redis

from ragkit.errors import StoreError
from ragkit.schema import DocStatus
from ragkit.testing.denied import OPEN, PASSWORD, Action, as_user, check_refusal, listed, pending, refusal
from ragkit_redis import RedisDocStatusStore, RedisKVStore


async def _keys(store: RedisKVStore) -> list[str]:
    return await listed(store.keys())


# (store, denied command, what the store is asked, the words its error must hold)
CASES: list[tuple[str, str, Action, str]] = [
    ("kv", "ping", OPEN, "failed to connect"),
    ("kv", "zcard", lambda s: s.count(), "failed to count records"),
    ("kv", "zrangebylex", _keys, "failed to list keys"),
    ("kv", "mget", lambda s: s.get_many(["a"]), "failed to read records"),
    ("kv", "mset", lambda s: s.upsert({"b": {"text": "new words"}}), "failed to write records"),
    ("kv", "unlink", lambda s: s.delete(["a"]), "failed to delete records"),
    ("kv", "zrange", lambda s: s.drop(), "failed to drop"),  # reading a page
    ("kv", "zrem", lambda s: s.drop(), "failed to drop"),  # deleting it
    ("kv", "del", lambda s: s.drop(), "failed to drop"),  # the indexes, at the end
    ("kv-text", "get", OPEN, "failed to read the text index's state"),
    ("kv-text", "eval", OPEN, "failed to index records' words"),
    ("kv-text", "hgetall", lambda s: s.search_text("words", 3), "failed to search records' words"),
    ("doc_status", "get", lambda s: s.generation(), "failed to read the generation"),
    ("doc_status", "zrangebyscore", lambda s: s.changes_since(0), "failed to read the change feed"),
    ("doc_status", "zcard", lambda s: s.counts(), "failed to count statuses"),
    ("doc_status", "mset", lambda s: s.upsert([pending("d2")]), "failed to write statuses"),
    ("doc_status", "watch", lambda s: s.transition("d1", DocStatus.PROCESSING), "failed to change a status"),
]


@pytest.mark.parametrize(("kind", "denied", "action", "words"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
async def test_a_failed_command_names_the_operation_and_hides_the_password(
    stores, make_config, redis_url, kind, denied, action, words
):
    user = f"ragkit-{uuid.uuid4().hex[:8]}"
    admin = Redis.from_url(redis_url)
    await admin.execute_command("ACL", "SETUSER", user, "on", f">{PASSWORD}", "~*", "&*", "+@all", f"-{denied}")
    try:
        config = make_config("errs")
        text = {"text_field": "text"} if kind == "kv-text" else {}
        # The data the action needs, written with every command allowed.
        if kind == "doc_status":
            await (await stores(RedisDocStatusStore, config)).upsert([pending("d1")])
        else:
            await (await stores(RedisKVStore, config)).upsert({"a": {"text": "some words"}})
        limited = config.model_copy(update={"options": {**config.options, "url": as_user(redis_url, user)}, **text})
        message = await refusal((RedisDocStatusStore if kind == "doc_status" else RedisKVStore)(limited), action)
    finally:
        await admin.execute_command("ACL", "DELUSER", user)
        await admin.aclose()
    check_refusal(message, words, user)


async def test_refused_credentials_are_named_as_such(make_config, redis_url):
    wrong = as_user(redis_url, f"nobody-{uuid.uuid4().hex[:6]}")
    config = make_config("creds")
    store = RedisKVStore(config.model_copy(update={"options": {**config.options, "url": wrong}}))
    with pytest.raises(StoreError, match="refused the credentials to connect") as caught:
        await store.open()
    assert PASSWORD not in str(caught.value) and ":****@" in str(caught.value)
    assert not store.is_open


def test_an_invalid_url_is_named_without_its_password():
    from ragkit.protocols import StoreConfig

    store = RedisKVStore(StoreConfig(namespace="n", options={"url": f"redis://u:{PASSWORD}@host:notaport/0"}))
    with pytest.raises(StoreError, match=r"invalid Redis url 'redis://u:\*\*\*\*@host:notaport/0'") as caught:
        asyncio.run(store.open())
    assert PASSWORD not in str(caught.value)


async def test_closing_a_store_closes_its_connections(make_config, redis_url):
    admin = Redis.from_url(redis_url)
    try:
        before = (await admin.info("clients"))["connected_clients"]
        for _ in range(3):
            store = RedisKVStore(make_config("conns"))
            await store.open()
            await store.count()
            await store.close()
        assert (await admin.info("clients"))["connected_clients"] == before
    finally:
        await admin.aclose()
