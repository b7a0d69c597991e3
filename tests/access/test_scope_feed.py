"""A kept scope follows writes through the doc-status change feed, so a
query after a write costs what changed: after a write, a principal's next
query reads the changed
records only, never a listing of all of them, and its scope is the one a
fresh, uncached resolve gives.

Troubleshoot: ``ragkit.core.scope.ReadableScopes._follow`` applies
``DocStatusStore.changes_since``; a write the feed does not name (a missing
trigger, tombstone or feed entry) shows here as a scope that differs from the
uncached one after some step of the random walk.
"""

from __future__ import annotations

import random
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from ragkit.access import AccessList, Principal
from ragkit.backends import build_store
from ragkit.core.scope import ReadableScopes, _resolve, resolve_scope
from ragkit.protocols.base import Capability
from ragkit.schema import DocStatus, DocStatusRecord
from ragkit.settings import Settings
from ragkit.testing.spies import count_listings

T0 = datetime(2024, 1, 2, tzinfo=timezone.utc)
USERS = ["ann", "ben", "cy"]
GROUPS = ["red", "blue"]
READERS = [Principal(user="ann", groups=frozenset({"red"})), Principal(user="ben"),
           Principal(user="cy", groups=frozenset({"red", "blue"}))]




def random_record(rng: random.Random, id: str) -> DocStatusRecord:
    access = None
    if rng.random() < 0.7:
        access = AccessList(users=rng.sample(USERS, rng.randint(0, 1)), groups=rng.sample(GROUPS, rng.randint(0, 1)))
    # Few chunk ids for many documents: chunks shared by documents (owners move) happen often.
    chunks = [f"c{rng.randrange(12)}" for _ in range(rng.randint(0, 3))]
    return DocStatusRecord(id=id, status=rng.choice(list(DocStatus)), created_at=T0, updated_at=T0,
                           chunk_ids=chunks, file_path=f"{id}.txt", access=access)


@pytest.fixture
async def store(tmp_path):
    store = build_store(Settings(working_dir=tmp_path), "doc_status", "doc_status")
    async with store:
        yield store


async def same_as_uncached(view, principal, listings: list[int] | None = None) -> int:
    """Checks the kept scope against an uncached resolve; returns the listings
    the kept one made (counted by ``listings``, if given)."""
    before = listings[0] if listings else 0
    kept = await resolve_scope(view, None, None, principal)
    made = listings[0] - before if listings else 0
    fresh = await _resolve(view, None, None, principal)
    if fresh is None:
        assert kept is None, f"{principal.user}: kept a restricted scope, yet they may read every record"
        return made
    assert kept is not None, f"{principal.user}: kept scope reads everything, fresh one holds {fresh.doc_ids}"
    assert (kept.doc_ids, kept.chunk_ids, kept.owners) == (fresh.doc_ids, fresh.chunk_ids, fresh.owners)
    return made


async def test_one_write_updates_the_scope_without_a_listing(store):
    """A scope kept for a principal; one record written: the next resolve
    lists nothing and shows the change. Failed before the feed: every write
    made the next resolve list every record."""
    view = SimpleNamespace(doc_status=store)
    rng = random.Random(1)
    await store.upsert([random_record(rng, f"d{i:03d}") for i in range(200)])
    await store.upsert([DocStatusRecord(id="mine", status=DocStatus.PROCESSED, created_at=T0, updated_at=T0,
                                        chunk_ids=["m1"], access=AccessList(users=["nobody"]))])
    ann = READERS[0]
    before = await resolve_scope(view, None, None, ann)
    assert before is not None and "mine" not in before.doc_ids
    listings = count_listings(store)
    (mine,) = await store.get(["mine"])
    await store.upsert([mine.model_copy(update={"access": AccessList(users=["ann"])})])
    after = await resolve_scope(view, None, None, ann)
    assert listings[0] == 0, f"{listings[0]} listings after a write of one record"
    assert after.doc_ids == before.doc_ids | {"mine"} and "m1" in after.chunk_ids
    assert before.doc_ids == after.doc_ids - {"mine"}, "the scope a query already held changed under it"
    await store.delete(["mine"])
    assert "mine" not in (await resolve_scope(view, None, None, ann)).doc_ids
    assert listings[0] == 0
    await same_as_uncached(view, ann)


@pytest.mark.parametrize("seed", range(4))
async def test_kept_scopes_equal_uncached_ones_over_random_writes(store, seed):
    """Random upserts, transitions, deletes and the odd drop; after each, two
    principals' kept scopes equal fresh resolves, and no write costs the kept
    ones a listing (the feed names deletions and drops too)."""
    view = SimpleNamespace(doc_status=store)
    rng = random.Random(seed)
    ids = [f"d{i:02d}" for i in range(30)]
    await store.upsert([random_record(rng, i) for i in rng.sample(ids, 15)])
    for reader in READERS:
        await same_as_uncached(view, reader)
    listings, made = count_listings(store), 0
    for step in range(60):
        kind = rng.random()
        if kind < 0.5:
            await store.upsert([random_record(rng, i) for i in rng.sample(ids, rng.randint(1, 4))])
        elif kind < 0.7:
            present = [r.id for r in await store.get(ids) if r is not None and r.status is not DocStatus.DELETING]
            if present:
                await store.transition(rng.choice(present), DocStatus.DELETING)
        elif kind < 0.97:
            await store.delete(rng.sample(ids, rng.randint(1, 3)))
        else:
            await store.drop()
        for reader in rng.sample(READERS, 2):
            made += await same_as_uncached(view, reader, listings)
    assert made == 0, f"{made} listings by kept scopes over 60 writes"


async def test_without_a_change_feed_scopes_are_read_again(store, monkeypatch):
    """An adapter with a generation but no feed (a third party's): a write
    drops what was kept, and the next resolve lists every record, as before."""
    view = SimpleNamespace(doc_status=store)
    monkeypatch.setattr(type(store), "capabilities", type(store).capabilities - {Capability.CHANGES})
    assert await store.changes_since(0) is None
    rng = random.Random(5)
    await store.upsert([random_record(rng, f"d{i}") for i in range(20)])
    await same_as_uncached(view, READERS[0])
    listings = count_listings(store)
    await store.upsert([random_record(rng, "d3")])
    await resolve_scope(view, None, None, READERS[0])
    assert listings[0] >= 1
    assert ReadableScopes.of(store).generation == await store.generation()
    await same_as_uncached(view, READERS[0])
