"""A principal's scope kept over Redis doc status (``ragkit.core.scope.ReadableScopes``)
follows writes made by another process.

Troubleshoot: every doc-status write must ``INCR`` the generation key and
score the ids it wrote in the change feed (``...:changed``) inside its
``MULTI`` (``RedisDocStatusStore.wrote``); a process keeps a scope while that
number stays and follows it with the feed when it moves.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from types import SimpleNamespace

from ragkit.access import AccessList, Principal
from ragkit.core.scope import ReadableScopes, resolve_scope
from ragkit.schema import DocStatus, DocStatusRecord
from ragkit.testing.spies import count_listings
from ragkit_redis import RedisDocStatusStore

T0 = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
ALICE = Principal(user="alice", groups=frozenset({"team"}))

CHILD = textwrap.dedent("""
    import asyncio, json, sys
    from ragkit.protocols import StoreConfig
    from ragkit.schema import DocStatusRecord
    from ragkit_redis import RedisDocStatusStore

    async def main(config, records):
        async with RedisDocStatusStore(StoreConfig.model_validate(config)) as store:
            await store.upsert([DocStatusRecord.model_validate(r) for r in records])

    asyncio.run(main(json.loads(sys.argv[1]), json.loads(sys.argv[2])))
""")


def doc(id: str, **access) -> DocStatusRecord:
    return DocStatusRecord(id=id, status=DocStatus.PROCESSED, created_at=T0, updated_at=T0,
                           chunk_ids=[f"chunk-{id}"], access=AccessList(**access) if access else None)


async def alice_reads(store) -> set[str]:
    """The documents ALICE's scope holds, through the kept scopes."""
    scope = await resolve_scope(SimpleNamespace(doc_status=store), None, None, ALICE)  # type: ignore[arg-type]
    assert scope is not None
    return scope.doc_ids


def upsert_in_another_process(config, records) -> None:
    subprocess.run([sys.executable, "-c", CHILD, config.model_dump_json(),
                    json.dumps([r.model_dump(mode="json") for r in records])], check=True, timeout=120)


async def test_a_kept_scope_follows_another_processs_writes(stores, make_config):
    """This process resolves ALICE's scope (kept); another process revokes a
    document from her group, then adds one she may read: each change shows at
    the next resolve, and unchanged records are read from what was kept."""
    config = make_config("doc_status")
    store = await stores(RedisDocStatusStore, config)
    await store.upsert([doc("public"), doc("team", groups=["team"]), doc("exec", groups=["exec"])])

    assert await alice_reads(store) == {"public", "team"}
    kept = ReadableScopes.of(store)
    assert kept.generation == await store.generation() and len(kept.scopes) == 1
    listings = count_listings(store)

    upsert_in_another_process(config, [doc("team", groups=["exec"])])
    assert await alice_reads(store) == {"public"}
    upsert_in_another_process(config, [doc("new", users=["alice"])])
    assert await alice_reads(store) == {"public", "new"}
    assert kept.generation == await store.generation()
    assert listings[0] == 0, "a write of one record made the kept scope list every record (no change feed)"
    await store.delete(["new"])
    assert await alice_reads(store) == {"public"} and listings[0] == 0


async def test_kept_scopes_equal_uncached_ones_over_random_writes(stores, make_config):
    """Seeded random upserts and deletes; after each, the kept scope of each
    principal equals an uncached resolve, with no listing."""
    import random

    from ragkit.core.scope import _resolve

    store = await stores(RedisDocStatusStore, make_config("doc_status"))
    view = SimpleNamespace(doc_status=store)
    rng = random.Random(7)
    readers = [ALICE, Principal(user="bob"), Principal(user="cy", groups=frozenset({"exec"}))]

    def random_doc(i: str) -> DocStatusRecord:
        access = rng.choice([{}, {"groups": ["team"]}, {"groups": ["exec"]}, {"users": ["bob"]}])
        return doc(i, **access).model_copy(update={"status": rng.choice(list(DocStatus)),
                                                   "chunk_ids": [f"c{rng.randrange(6)}"]})

    ids = [f"d{i}" for i in range(12)]
    await store.upsert([random_doc(i) for i in ids])
    for reader in readers:
        await resolve_scope(view, None, None, reader)  # type: ignore[arg-type]
    for _ in range(30):
        if rng.random() < 0.7:
            await store.upsert([random_doc(i) for i in rng.sample(ids, 2)])
        else:
            await store.delete(rng.sample(ids, 2))
        for reader in readers:
            kept = await resolve_scope(view, None, None, reader)  # type: ignore[arg-type]
            fresh = await _resolve(view, None, None, reader)  # type: ignore[arg-type]
            assert (kept is None) == (fresh is None)
            if kept is not None:
                assert (kept.doc_ids, kept.owners) == (fresh.doc_ids, fresh.owners)


async def test_a_write_that_bypasses_the_feed_makes_kept_scopes_read_again(stores, make_config):
    """A process of the previous ragkit writes a record and INCRs the
    generation without recording the id in the feed: the feed says it is not
    whole from before that write (``None``), the kept scope is read again and
    shows the write, and the feed is whole again from the next write on."""
    from ragkit.protocols.doc_status import status_row

    store = await stores(RedisDocStatusStore, make_config("doc_status"))
    await store.upsert([doc("public"), doc("team", groups=["team"]), doc("exec", groups=["exec"])])

    assert await alice_reads(store) == {"public", "team"}
    before = await store.generation()
    async with store.client.pipeline(transaction=True) as pipe:  # the old writer: record and INCR only
        pipe.set(store.record_key("team"), status_row(doc("team", groups=["exec"])).data.encode())
        pipe.incr(store.generation_key)
        await pipe.execute()
    assert await store.changes_since(before) is None, "a write missing from the feed went unnoticed"
    assert await alice_reads(store) == {"public"}
    gap = await store.generation()
    await store.upsert([doc("new", users=["alice"])])
    assert await store.changes_since(before) is None
    changes = await store.changes_since(gap)
    assert changes is not None and [r.id for r in changes.records] == ["new"]
    assert await alice_reads(store) == {"public", "new"}
