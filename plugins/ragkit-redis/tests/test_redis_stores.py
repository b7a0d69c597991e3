"""ragkit-redis beyond the contract: which commands reach the server (no
``KEYS``/``SCAN``, one ``MULTI``/``EXEC`` per batch), key layout and isolation,
paging under concurrent writers, atomic transitions.

The contract itself runs from ragkit's ``tests/contract`` (``TestKV_redis``,
``TestDocStatus_redis``). Troubleshooting: every test needs the server at
``RAGKIT_REDIS_URL`` (``scripts/redis-server start``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timezone

import pytest
from redis.asyncio import Redis

from ragkit.errors import ConfigError, InvalidTransitionError, StoreError
from ragkit.protocols import StoreConfig
from ragkit.schema import DocStatus, DocStatusRecord
from ragkit_redis import RedisDocStatusStore, RedisKVStore

T0 = datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)
HOT_PATH_FORBIDDEN = {"KEYS", "SCAN", "FLUSHDB", "FLUSHALL"}


def rec(id: str, status: DocStatus = DocStatus.PENDING) -> DocStatusRecord:
    return DocStatusRecord(id=id, status=status, created_at=T0, updated_at=T0)


@contextlib.asynccontextmanager
async def monitored(store, url: str) -> AsyncIterator[Callable[[Callable[[], Awaitable[object]]], Awaitable[list[str]]]]:
    """``commands(action)``: the command names ``store``'s connection sends
    while ``action()`` runs, as the server's ``MONITOR`` reports them. The
    store must have ``max_connections=1`` so that one address is all of it."""
    addr = (await store.client.client_info())["addr"]
    addr = addr.decode() if isinstance(addr, bytes) else addr
    monitor_client = Redis.from_url(url)
    async with monitor_client.monitor() as monitor:

        async def commands(action: Callable[[], Awaitable[object]]) -> list[str]:
            sentinel = f"ragkit-sentinel-{uuid.uuid4().hex}"
            seen: list[str] = []

            async def collect() -> None:
                while True:
                    cmd = await monitor.next_command()
                    if f"{cmd['client_address']}:{cmd['client_port']}" != addr:
                        continue
                    if sentinel in cmd["command"]:
                        return
                    seen.append(cmd["command"].split(" ", 1)[0].upper())

            task = asyncio.create_task(collect())
            await action()
            await store.client.echo(sentinel)
            await asyncio.wait_for(task, 10)
            return seen

        yield commands
    await monitor_client.aclose()


async def _keys(store) -> list[str]:
    return [k async for k in store.keys()]


async def test_kv_hot_paths_send_batched_commands_and_never_keys(stores, make_config, redis_url):
    """Each KV operation sends a fixed number of commands whatever the batch
    size (one MULTI/EXEC per write, with the EVAL that replaces the records'
    search terms: it ends at once where nothing is indexed; a store given no
    text field also DELs the namespace's "filled" mark, so the next indexed
    open gives its records their terms), and none scans
    the keyspace. A text search is one HGETALL per word and an HMGET of the
    lengths per page of found records, then ZCARD (how many records BM25 weighs among).

    Troubleshoot: a per-record loop shows up as N commands; a KEYS/SCAN means
    count() or keys() stopped using the sorted-set index.
    """
    kv = await stores(RedisKVStore, make_config("hot", max_connections=1, batch_size=100))
    records = {f"k{i:04d}": {"i": i, "text": "x" * 50} for i in range(300)}
    async with monitored(kv, redis_url) as commands:
        assert await commands(lambda: kv.upsert(records)) == ["MULTI", "MSET", "ZADD", "EVAL", "DEL", "EXEC"]
        assert await commands(lambda: kv.get_many(list(records)[:100])) == ["MGET"]
        assert await commands(lambda: kv.get_many(list(records))) == ["MGET"] * 3
        assert await commands(kv.count) == ["ZCARD"]
        assert await commands(lambda: _keys(kv)) == ["ZRANGEBYLEX"] * 4  # 3 full pages + the empty tail
        assert await commands(lambda: kv.missing(["k0001", "nope"])) == ["MGET"]
        assert await commands(lambda: kv.delete(list(records)[:150])) == ["MULTI", "UNLINK", "ZREM", "EVAL", "EXEC"]
        everything = await commands(kv.drop)
    assert not HOT_PATH_FORBIDDEN & set(everything), everything
    assert await kv.count() == 0
    config = make_config("hot-text", max_connections=1, batch_size=100).model_copy(update={"text_field": "text"})
    text = await stores(RedisKVStore, config)
    written = {f"k{i:04d}": {"text": f"record {i} about rivers and {'bridges' if i % 2 else 'towns'}"}
               for i in range(300)}
    async with monitored(text, redis_url) as commands:
        assert await commands(lambda: text.upsert(written)) == ["MULTI", "MSET", "ZADD", "EVAL", "EXEC"]
        assert await commands(lambda: text.search_text("bridges over rivers", 5)) == ["HGETALL"] * 2 + ["HMGET"] * 3 + ["ZCARD"]
        everything = await commands(text.drop)
    assert not HOT_PATH_FORBIDDEN & set(everything), everything
    assert await text.search_text("rivers", 5) == []


async def test_doc_status_hot_paths_send_batched_commands_and_never_keys(stores, make_config, redis_url):
    """Doc-status writes are one MULTI/EXEC (record, id index, status sets
    and one EVAL: the script that INCRs the generation and scores the written ids
    with it in the change feed); counts are one transaction of a ZCARD per status; a page is a
    ZRANGEBYLEX and an MGET; the changes since a generation are an MGET (generation, feed's own), a ZRANGEBYSCORE and an MGET.

    Troubleshoot: as for KV; counts() must not list documents to count them.
    """
    docs = await stores(RedisDocStatusStore, make_config("hot", max_connections=1))
    # 160, not more: MONITOR echoes the whole MSET on one line, and redis-py
    # reads it with asyncio's 64 KiB line limit.
    batch = [rec(f"d{i:03d}", list(DocStatus)[i % 4]) for i in range(160)]
    async with monitored(docs, redis_url) as commands:
        sent = await commands(lambda: docs.upsert(batch))
        assert sent[0] == "MULTI" and sent[-1] == "EXEC" and sent.count("MSET") == 1, sent
        assert len(sent) <= 2 + 2 + 2 * len(DocStatus) + 1, f"commands do not grow with the batch: {sent}"
        assert sent[-2] == "EVAL", f"the generation and feed are not written in the write's transaction: {sent}"
        since = []

        async def read_generation() -> None:
            since.append(await docs.generation())

        assert await commands(read_generation) == ["GET"]
        assert await commands(docs.counts) == ["MULTI"] + ["ZCARD"] * len(DocStatus) + ["EXEC"]
        assert await commands(lambda: docs.list_page(DocStatus.FAILED, limit=10)) == ["ZRANGEBYLEX", "MGET"]
        assert await commands(lambda: docs.get(["d001", "d002", "zz"])) == ["MGET"]
        sent = await commands(lambda: docs.transition("d000", DocStatus.PROCESSING))
        assert sent[:2] == ["WATCH", "GET"] and sent[2] == "MULTI" and sent[-1] == "EXEC", sent
        sent = await commands(lambda: docs.delete(["d001", "d002"]))
        assert sent == ["MULTI", "UNLINK", "ZREM"] + ["ZREM"] * len(DocStatus) + ["EVAL", "EXEC"], sent
        assert await commands(lambda: docs.changes_since(since[0])) == ["MGET", "ZRANGEBYSCORE", "MGET"]
    assert (await docs.counts())[DocStatus.PROCESSING] == len(batch) // 4  # d000 in, d001 deleted


async def test_no_keys_command_in_commandstats(stores, make_config, redis_url):
    """Across a whole workload of both stores the server's ``INFO commandstats``
    counts no new KEYS or SCAN call (a second, server-wide check next to MONITOR).

    Troubleshoot: another client of the same server may call KEYS; run on the
    private server ``scripts/redis-server`` starts.
    """
    admin = Redis.from_url(redis_url)
    try:
        before = await admin.info("commandstats")
        kv = await stores(RedisKVStore, make_config("stats"))
        docs = await stores(RedisDocStatusStore, make_config("stats"))
        await kv.upsert({f"k{i}": {"i": i} for i in range(50)})
        await kv.get_many([f"k{i}" for i in range(60)])
        assert len(await _keys(kv)) == await kv.count() == 50
        await kv.delete(["k1", "k2"])
        await docs.upsert([rec(f"d{i}") for i in range(30)])
        await docs.transition("d1", DocStatus.PROCESSING)
        await docs.list_page(limit=7)
        await docs.counts()
        await kv.drop()
        await docs.drop()
        after = await admin.info("commandstats")
    finally:
        await admin.aclose()
    for cmd in ("cmdstat_keys", "cmdstat_scan"):
        assert after.get(cmd, {}).get("calls", 0) == before.get(cmd, {}).get("calls", 0), cmd
    assert after["cmdstat_mset"]["calls"] > before.get("cmdstat_mset", {}).get("calls", 0)


async def test_key_layout_prefix_and_hash_tag(stores, make_config, redis_url):
    """Keys are ``<prefix>:{<workspace>:<kind>:<namespace>}:...``; a custom
    prefix moves every key; the sorted-set index holds the record keys.

    Troubleshoot: the layout is documented in ragkit_redis/_base.py; changing it
    orphans existing data.
    """
    config = make_config("layout", key_prefix="myapp")
    kv = await stores(RedisKVStore, config)
    await kv.upsert({"a:b{c}": {"v": 1}})
    base = f"myapp:{{{config.workspace}:kv:layout}}"
    admin = Redis.from_url(redis_url)
    try:
        assert await admin.get(f"{base}:r:a:b{{c}}") == b'{"v": 1}'
        # Score 0 for every member: ZRANGEBYLEX pages are only ordered among equal scores.
        assert await admin.zrange(f"{base}:ids", 0, -1, withscores=True) == [(b"a:b{c}", 0.0)]
    finally:
        await admin.aclose()


async def test_doc_status_indexes_hold_every_member_at_score_0(stores, make_config, redis_url):
    config = make_config("layout")
    docs = await stores(RedisDocStatusStore, config)
    await docs.upsert([rec("a"), rec("b", DocStatus.FAILED)])
    base = f"ragkit:{{{config.workspace}:doc_status:layout}}"
    admin = Redis.from_url(redis_url)
    try:
        assert await admin.zrange(f"{base}:ids", 0, -1, withscores=True) == [(b"a", 0.0), (b"b", 0.0)]
        assert await admin.zrange(f"{base}:s:failed", 0, -1, withscores=True) == [(b"b", 0.0)]
    finally:
        await admin.aclose()


async def test_a_page_skips_index_members_whose_record_moved_on_and_still_fills(stores, make_config, redis_url):
    """A status index read just before a writer moved a record on (the index
    says failed, the record says pending): the record is skipped, and the page
    is filled from the members after it, without repeats.

    Troubleshoot: ``RedisDocStatusStore._list_page``'s loop (``after``, ``want``).
    """
    config = make_config("moved")
    docs = await stores(RedisDocStatusStore, config)
    await docs.upsert([rec("a"), rec("b", DocStatus.FAILED), rec("c", DocStatus.FAILED), rec("d", DocStatus.FAILED)])
    admin = Redis.from_url(redis_url)
    try:  # what a reader racing the writer sees: "a" still listed as failed
        await admin.zadd(f"ragkit:{{{config.workspace}:doc_status:moved}}:s:failed", {b"a": 0})
    finally:
        await admin.aclose()
    assert [r.id for r in (await docs.list_page(DocStatus.FAILED, 2)).items] == ["b", "c"]
    assert [r.id for r in (await docs.list_page(DocStatus.FAILED, 1)).items] == ["b"]
    assert [r.id for r in (await docs.list_page(DocStatus.FAILED, 5)).items] == ["b", "c", "d"]


@pytest.mark.parametrize(
    ("layout", "limit", "items", "cursor"),
    [("**f", 1, "c", None), ("*f**fff", 3, "bef", "f")],
    ids=["stale-first-page", "stale-runs"],
)
async def test_pages_over_runs_of_moved_records_neither_repeat_nor_invent_a_next_page(
    stores, make_config, redis_url, layout, limit, items, cursor
):
    """``*``: a member the failed index still lists whose record is pending."""
    config = make_config("runs")
    docs = await stores(RedisDocStatusStore, config)
    ids = "abcdefg"[: len(layout)]
    await docs.upsert([rec(i, DocStatus.FAILED if kind == "f" else DocStatus.PENDING) for i, kind in zip(ids, layout)])
    admin = Redis.from_url(redis_url)
    try:
        stale = {i.encode(): 0 for i, kind in zip(ids, layout) if kind == "*"}
        await admin.zadd(f"ragkit:{{{config.workspace}:doc_status:runs}}:s:failed", stale)
    finally:
        await admin.aclose()
    page = await docs.list_page(DocStatus.FAILED, limit)
    assert ("".join(r.id for r in page.items), page.next_cursor) == (items, cursor)


async def test_workspaces_prefixes_and_kinds_do_not_share_keys(stores, make_config):
    """The same workspace/namespace/key under KV and doc status, and under two
    prefixes, are four independent records.

    Troubleshoot: the kind and the prefix must both be part of every key.
    """
    ws = f"w{uuid.uuid4().hex[:8]}"
    kv1 = await stores(RedisKVStore, make_config("same", ws))
    kv2 = await stores(RedisKVStore, make_config("same", ws, key_prefix="other"))
    docs = await stores(RedisDocStatusStore, make_config("same", ws))
    await kv1.upsert({"x": {"who": 1}})
    await kv2.upsert({"x": {"who": 2}})
    await docs.upsert([rec("x")])
    assert (await kv1.get("x"), await kv2.get("x")) == ({"who": 1}, {"who": 2})
    await kv1.drop()
    assert await kv2.count() == 1 and await docs.count() == 1


async def test_paging_has_no_gaps_or_repeats_under_concurrent_writers(stores, make_config):
    """Readers paging with limit 2 (all statuses, and one status) while four
    writers, through another store instance and connection, insert ids between
    the stable ones, delete them and move other documents between statuses:
    every stable document is listed exactly once, in id order.

    Troubleshoot: offset paging or a cursor that is not the last id returned
    skips or repeats; a listing that trusts a stale index entry shows deleted
    or moved documents.
    """
    config = make_config("paging")
    reader_store = await stores(RedisDocStatusStore, config)
    writer_store = await stores(RedisDocStatusStore, config)
    stable = [f"s{i:03d}" for i in range(0, 120, 3)]
    await reader_store.upsert([rec(i) for i in stable])
    done = asyncio.Event()

    async def writer(w: int) -> None:
        i = 0
        while not done.is_set():
            churn = [f"s{(i * 3 + w) % 120:03d}-{w}", f"a{w}-{i}", f"z{w}-{i}"]
            await writer_store.upsert([rec(c, list(DocStatus)[i % 4]) for c in churn])
            await asyncio.sleep(0)
            await writer_store.delete(churn[:2])
            i += 1

    async def read(status: DocStatus | None) -> list[str]:
        seen: list[str] = []
        cursor = None
        while True:
            page = await reader_store.list_page(status, limit=2, cursor=cursor)
            seen += [r.id for r in page.items]
            if page.next_cursor is None:
                return seen
            cursor = page.next_cursor
            await asyncio.sleep(0)

    writers = [asyncio.create_task(writer(w)) for w in range(4)]
    try:
        everything, pending = await asyncio.gather(read(None), read(DocStatus.PENDING))
    finally:
        done.set()
        await asyncio.gather(*writers)
    for seen in (everything, pending):
        assert seen == sorted(seen) and len(seen) == len(set(seen)), "repeated or out of order"
        assert [i for i in seen if i in set(stable)] == stable, "a stable document was skipped"


async def test_concurrent_transitions_of_one_document_are_atomic(stores, make_config):
    """Ten tasks on two store instances move one pending document to
    processing at once: exactly one succeeds, the others see it is already
    processing and get ``InvalidTransitionError`` (the lifecycle check and the
    write are one check-and-set).

    Troubleshoot: a read, check, write sequence without WATCH lets several pass.
    """
    config = make_config("cas")
    first = await stores(RedisDocStatusStore, config)
    second = await stores(RedisDocStatusStore, config)
    await first.upsert([rec("doc")])

    async def attempt(store) -> bool:
        try:
            await store.transition("doc", DocStatus.PROCESSING)
        except InvalidTransitionError as exc:  # lost the race: the message names the document
            assert str(exc).startswith("document 'doc' cannot go from processing to processing"), exc
            return False
        return True

    results = await asyncio.gather(*(attempt(first if i % 2 else second) for i in range(10)))
    assert sum(results) == 1
    assert await first.counts() == {**{s: 0 for s in DocStatus}, DocStatus.PROCESSING: 1}


async def test_a_transition_racing_a_writer_on_every_try_gives_up_with_a_named_error(stores, make_config, redis_url):
    """When another client rewrites the record between every read and EXEC,
    the transition stops after its bounded retries with a ``StoreError`` that
    names the document and the status, and the record stays as the other
    client left it.

    Troubleshoot: ``RedisDocStatusStore._transition``'s retry loop and the
    error after it.
    """
    from redis import Redis as SyncRedis

    from ragkit_redis import doc_status

    class Raced(RedisDocStatusStore):
        tries: int | None = None  # counting once the transition starts

        def _queue_upsert(self, pipe, rows):
            if Raced.tries is not None:  # inside the transition, after the WATCH
                Raced.tries += 1
                key = self.record_key("doc")
                other.set(key, other.get(key))  # another client's write: the EXEC must abort
            super()._queue_upsert(pipe, rows)

    other = SyncRedis.from_url(redis_url)
    try:
        docs = await stores(Raced, make_config("raced"))
        await docs.upsert([rec("doc")])
        Raced.tries = 0
        with pytest.raises(StoreError, match=r"document 'doc' kept changing; transition to processing gave up after \d+ tries"):
            await docs.transition("doc", DocStatus.PROCESSING)
    finally:
        other.close()
    assert Raced.tries == doc_status._TRANSITION_RETRIES
    assert [r.status for r in await docs.get(["doc"])] == [DocStatus.PENDING]


async def test_status_sets_follow_replacing_upserts(stores, make_config):
    """Upserting a record with a new status (not through ``transition``) moves
    it between status sets: counts and status listings never show it twice.

    Troubleshoot: the upsert must remove the id from every other status set.
    """
    docs = await stores(RedisDocStatusStore, make_config("moves"))
    for status in [DocStatus.PENDING, DocStatus.FAILED, DocStatus.PROCESSED, DocStatus.PENDING]:
        await docs.upsert([rec("d", status), rec("e", DocStatus.FAILED)])
        counts = await docs.counts()
        assert sum(counts.values()) == 2
        assert [r.id for r in (await docs.list_page(status)).items] == (["d"] if status is not DocStatus.FAILED else ["d", "e"])


def test_options_are_validated(redis_url):
    """Unknown options and unsafe key prefixes are configuration errors."""
    with pytest.raises(ConfigError, match="key_prefix"):
        RedisKVStore(StoreConfig(namespace="n", options={"url": redis_url, "key_prefix": "a{b}"}))
    with pytest.raises(ConfigError, match="urll"):
        RedisKVStore(StoreConfig(namespace="n", options={"urll": redis_url}))


async def test_unreachable_server_is_a_store_error():
    """Opening against a port nobody listens on raises ``StoreError`` naming the URL."""
    from ragkit.errors import StoreError

    store = RedisKVStore(StoreConfig(namespace="n", options={"url": "redis://127.0.0.1:1/0", "socket_timeout": 2}))
    with pytest.raises(StoreError, match=r"redis://127\.0\.0\.1:1/0"):
        await store.open()
    assert not store.is_open


async def test_a_call_that_finds_every_connection_busy_for_socket_timeout_fails_saying_so(stores, make_config):
    """The wait for a free connection is bounded by ``socket_timeout``, and its
    error says that the connections were busy (not that the server is down)."""
    kv = await stores(RedisKVStore, make_config("busy", max_connections=1, socket_timeout=0.5))
    await kv.upsert({"k": {"v": 1}})
    held = await kv.client.connection_pool.get_connection()  # the one connection, busy elsewhere
    try:
        start = time.monotonic()
        with pytest.raises(StoreError, match=r"all 1 connections to Redis at redis://\S+ stayed busy for 0.5 s, "
                                             r"so a call could not .+: raise max_connections"):
            await asyncio.wait_for(kv.get("k"), 10)
        assert time.monotonic() - start >= 0.45
    finally:
        await kv.client.connection_pool.release(held)
    assert await kv.get("k") == {"v": 1}


async def test_a_burst_beyond_max_connections_waits_and_stays_within_it(stores, make_config, redis_url):
    """Forty concurrent reads on a store with ``max_connections=2`` all
    succeed, and the server sees them from at most two connections.

    Troubleshoot: the client's pool must block (``BlockingConnectionPool``):
    the plain pool fails the third concurrent call with "Too many
    connections", and a pool without the bound opens forty.
    """
    kv = await stores(RedisKVStore, make_config("burst", max_connections=2))
    await kv.upsert({"k": {"v": 1}})
    marker = kv.record_key("k").decode()
    addresses: set[str] = set()
    monitor_client = Redis.from_url(redis_url)
    try:
        async with monitor_client.monitor() as monitor:
            done = f"ragkit-burst-done-{uuid.uuid4().hex}"

            async def collect() -> None:
                while True:
                    cmd = await monitor.next_command()
                    if done in cmd["command"]:
                        return
                    if marker in cmd["command"]:
                        addresses.add(f"{cmd['client_address']}:{cmd['client_port']}")

            task = asyncio.create_task(collect())
            results = await asyncio.gather(*(kv.get("k") for _ in range(40)))
            await kv.client.echo(done)
            await asyncio.wait_for(task, 10)
    finally:
        await monitor_client.aclose()
    assert results == [{"v": 1}] * 40
    assert 1 <= len(addresses) <= 2, addresses


async def test_a_server_that_never_answers_fails_after_socket_timeout():
    """Opening against a server that accepts the connection and never
    replies raises ``StoreError`` after ``socket_timeout`` (0.5 s here; the
    client library's own default is 5 s), not never.

    Troubleshoot: ``socket_timeout`` must reach the client's connections.
    """
    from ragkit.errors import StoreError

    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # held open, never answered

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = RedisKVStore(StoreConfig(namespace="n", options={"url": f"redis://127.0.0.1:{port}/0", "socket_timeout": 0.5}))
    start = time.monotonic()
    try:
        with pytest.raises(StoreError, match=f"cannot reach Redis at redis://127.0.0.1:{port}/0 to connect: .+; is the server "
                                             "running and the url right\\?"):
            await asyncio.wait_for(store.open(), 15)
        assert time.monotonic() - start < 4
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()
    assert accepted and not store.is_open


@pytest.mark.parametrize("batch_size", [1, 2, 1000])
async def test_text_fill_pages_through_the_index_at_any_batch_size(stores, make_config, batch_size):
    """Opening a store with a text field indexes every record written without
    one, a page of ``batch_size`` at a time, whatever the page size.

    Troubleshoot: ``RedisKVStore._fill``'s keyset paging (the last key of a page).
    """
    config = make_config("fill", batch_size=batch_size)
    plain = await stores(RedisKVStore, config)
    await plain.upsert({f"k{i}": {"text": f"common word{i}"} for i in range(5)})
    indexed = await stores(RedisKVStore, config.model_copy(update={"text_field": "text"}))
    assert sorted(k for k, _ in await indexed.search_text("common", 10)) == [f"k{i}" for i in range(5)]
    assert [k for k, _ in await indexed.search_text("word3", 10)] == ["k3"]


async def test_a_store_whose_lease_is_on_another_database_writes_under_its_deadline(stores, make_config, redis_url):
    """The fencing counter can be WATCHed only where it lives: a store on
    another Redis (here another database of the same server) than its lease
    writes while the holder's deadline holds (``BaseStore.fence``), and is not
    refused for a counter it cannot see."""
    from urllib.parse import urlparse

    from ragkit.core.lock import LockSettings, WriterLock

    other = urlparse(redis_url)._replace(path="/1").geturl()
    assert other != redis_url
    config = make_config("elsewhere")
    docs = await stores(RedisDocStatusStore, config.model_copy(update={"options": {"url": other}}))
    kv = await stores(RedisKVStore, config)
    lock = WriterLock(docs.writer_lease(), LockSettings(lease_ttl=30))
    kv.fence = lock
    try:
        async with lock.hold("index"):
            await kv.upsert({"k": {"v": 1}})
    finally:
        kv.fence = None
    assert await kv.get("k") == {"v": 1}


async def test_a_write_whose_counter_moves_between_its_check_and_exec_is_refused(stores, make_config, redis_url):
    """Another writer's acquisition can land after the write read the
    counter and before its ``EXEC``: the WATCH aborts the transaction, and
    the write is refused as when the counter had moved before, with nothing
    of it applied.

    Troubleshoot: ``RedisStore.commit``'s ``WatchError`` branch.
    """
    from ragkit.core.lock import LockSettings, WriterLock
    from ragkit.errors import WriterLeaseLostError

    admin = Redis.from_url(redis_url)

    class Raced(RedisKVStore):
        async def watch_fence(self, pipe, permit):
            key = await super().watch_fence(pipe, permit)
            if key is not None:  # a fenced write (not the fixture's drop)
                await admin.incr(key)  # another writer took the lease just now
            return key

    config = make_config("raced")
    docs = await stores(RedisDocStatusStore, config)
    kv = await stores(Raced, config)
    lock = WriterLock(docs.writer_lease(), LockSettings(lease_ttl=30))
    kv.fence = lock
    try:
        with pytest.raises(WriterLeaseLostError):
            async with lock.hold("index"):
                await kv.upsert({"late": {"v": 1}})
    finally:
        kv.fence = None
        await admin.aclose()
    assert await kv.count() == 0


@pytest.mark.parametrize("kind", ["kv", "doc_status", "transition", "kv-counter-vanished"])
async def test_a_write_after_another_writer_took_the_fencing_counter_is_refused(stores, make_config, redis_url, kind):
    """Under a Redis lease on the same server, a write WATCHes the lease's
    fencing counter: once another acquisition moved it, the write is refused
    even while this holder's own deadline has not passed (a forced takeover,
    clocks that disagree), and nothing of it is applied. The same when the
    counter's key is gone (a FLUSHDB, an eviction: the next acquisition would
    get the first holder's token, 1, again): a missing counter is no token.

    Troubleshoot: ``RedisStore.commit`` / ``watch_fence``.
    """
    from ragkit.core.lock import LockSettings, WriterLock
    from ragkit.errors import WriterLeaseLostError

    config = make_config("fenced")
    docs = await stores(RedisDocStatusStore, config)
    store = await stores(RedisKVStore, config) if kind.startswith("kv") else docs
    if kind == "transition":
        await docs.upsert([rec("t")])
    lease = docs.writer_lease()
    lock = WriterLock(lease, LockSettings(lease_ttl=30))
    store.fence = lock
    admin = Redis.from_url(redis_url)
    try:
        with pytest.raises(WriterLeaseLostError):
            async with lock.hold("index"):
                if kind == "kv-counter-vanished":
                    assert int(await admin.get(lease.fence_key)) == 1  # the first acquisition's token
                    await admin.delete(lease.fence_key)
                else:
                    await admin.incr(lease.fence_key)  # what another writer's acquisition does
                if kind.startswith("kv"):
                    await store.upsert({"late": {"v": 1}})
                elif kind == "doc_status":
                    await store.upsert([rec("late")])
                else:
                    await docs.transition("t", DocStatus.PROCESSING)
    finally:
        store.fence = None
        await admin.aclose()
    assert await store.count() == (1 if kind == "transition" else 0)
    if kind == "transition":
        assert (await docs.get(["t"]))[0].status is DocStatus.PENDING
