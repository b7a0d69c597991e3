"""The doc-status generation and change feed: ``generation()`` grows with
every write, seen from every instance (``DocStatusGenerationTests``), and
``changes()`` names what was written and deleted since a generation, with
tombstones (``DocStatusChangesTests``); both behind ``Capability.GENERATION``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from ragkit.protocols.base import Capability
from ragkit.protocols.doc_status import DocStatusStore
from ragkit.schema import DocStatus
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import needs, reopened
from ragkit.testing.contracts.doc_status.records import record


@contextlib.asynccontextmanager
async def twin(store: DocStatusStore) -> AsyncIterator[DocStatusStore]:
    """A second instance over the same config, open beside ``store`` (its own
    connection); closed, not dropped, on exit: the data is ``store``'s."""
    other = type(store)(store.config)
    await other.open()
    try:
        yield other
    finally:
        await other.close()


class DocStatusGenerationTests:
    @needs(Capability.GENERATION)
    @checks("doc_status.generation.every-write")
    async def test_generation_grows_with_every_write(self, adapter):
        """(GENERATION) ``generation()`` is an int that grows with each upsert,
        transition, delete of a present id and drop of a non-empty store, and
        stays as it is across gets, listings and counts.

        Troubleshoot: bump the counter in the same transaction as every write
        hook (``_upsert``, ``_delete``, ``_drop``, ``_transition``); reading
        must not bump it, or no reader can ever keep anything.
        """
        seen = [await adapter.generation()]

        async def grew(what: str) -> None:
            now = await adapter.generation()
            assert isinstance(now, int) and now > seen[-1], f"generation {seen[-1]} -> {now} after {what}"
            seen.append(now)

        await adapter.upsert([record("a"), record("b")])
        await grew("upsert")
        await adapter.get(["a", "x"])
        await adapter.list_page(None, 1)
        await adapter.counts()
        assert await adapter.generation() == seen[-1], "a read changed the generation"
        await adapter.upsert([record("a", DocStatus.PENDING, metadata={"k": 1})])
        await grew("a replacing upsert")
        await adapter.transition("a", DocStatus.PROCESSING)
        await grew("transition")
        await adapter.delete(["b"])
        await grew("delete")
        await adapter.drop()
        await grew("drop")

    @needs(Capability.GENERATION)
    @checks("doc_status.generation.every-write")
    async def test_concurrent_writes_each_raise_the_generation(self, adapter):
        """(GENERATION) 20 upserts at once raise the generation by at least 20.

        Troubleshoot: read-increment-write of the counter across an ``await``
        loses bumps; increment in the backend (``UPDATE ... + 1``, ``INCR``).
        """
        before = await adapter.generation()
        await asyncio.gather(*(adapter.upsert([record(f"c{i}")]) for i in range(20)))
        after = await adapter.generation()
        assert after - before >= 20, f"20 concurrent upserts raised the generation from {before} to {after}"

    @needs(Capability.GENERATION)
    @checks("doc_status.generation.shared", "doc_status.generation.every-write")
    async def test_generation_is_shared_and_survives_reopen(self, adapter):
        """(GENERATION) A second instance over the same config reads the same
        generation; a write through either raises what the other reads; close
        and reopen keep it.

        Troubleshoot: keep the counter in the backend, beside the records, not
        in the instance's memory.
        """
        await adapter.upsert([record("a")])
        async with twin(adapter) as other:
            assert await other.generation() == await adapter.generation()
            before = await adapter.generation()
            await other.upsert([record("b")])
            assert await adapter.generation() > before, "a write through another instance went unseen"
            before = await other.generation()
            await adapter.delete(["a"])
            assert await other.generation() > before
        kept = await adapter.generation()
        async with reopened(adapter) as again:
            assert await again.generation() == kept



def _named(changes) -> tuple[set[str], set[str]]:
    assert changes is not None, "changes_since() is None for a generation the store gave after its feed began"
    return {r.id for r in changes.records}, set(changes.deleted)


class DocStatusChangesTests:
    @needs(Capability.CHANGES)
    @checks("doc_status.changes.every-write")
    async def test_every_write_is_in_the_changes_from_the_generation_before_it(self, adapter):
        """(CHANGES) ``changes_since(g)`` names exactly the ids written after
        ``g``: each upsert, transition and delete from the generation before it
        on, none from its own generation on; records come as they are now, and
        the generation returned is at least the one read before the call.

        Troubleshoot: stamp each written id with the generation of its write,
        in the write's transaction; select ids stamped *after* ``g`` (``>``,
        not ``>=``); read the generation before the ids.
        """
        gens = [await adapter.generation()]
        await adapter.upsert([record("a"), record("b")])
        gens.append(await adapter.generation())
        await adapter.transition("a", DocStatus.PROCESSING)
        gens.append(await adapter.generation())
        await adapter.upsert([record("c")])
        gens.append(await adapter.generation())
        await adapter.delete(["b"])
        gens.append(await adapter.generation())
        expected = [({"a", "c"}, {"b"}), ({"a", "c"}, {"b"}), ({"c"}, {"b"}), (set(), {"b"}), (set(), set())]
        for g, want in zip(gens, expected):
            changes = await adapter.changes_since(g)
            assert _named(changes) == want, f"changes since {g} (of {gens}): {_named(changes)}, expected {want}"
            assert changes.generation >= gens[-1]
        changes = await adapter.changes_since(gens[0])
        assert {r.id: r.status for r in changes.records} == {"a": DocStatus.PROCESSING, "c": DocStatus.PENDING}
        async with twin(adapter) as other:
            await other.upsert([record("d")])
            assert _named(await adapter.changes_since(gens[-1])) == ({"d"}, set()), "another instance's write is missing"

    @needs(Capability.CHANGES)
    @checks("doc_status.changes.tombstones", "doc_status.changes.every-write")
    async def test_deletes_and_drops_leave_tombstones(self, adapter):
        """(CHANGES) A deleted id and every id a drop removed are named among
        ``deleted``; written again, it is a record again.

        Troubleshoot: a deleted row leaves nothing to select: keep a tombstone
        (id, generation) in the delete's transaction, for ``drop`` too.
        """
        await adapter.upsert([record(i) for i in ("x", "y", "z")])
        start = await adapter.generation()
        await adapter.delete(["x"])
        assert _named(await adapter.changes_since(start)) == (set(), {"x"})
        await adapter.drop()
        assert _named(await adapter.changes_since(start)) == (set(), {"x", "y", "z"})
        async with twin(adapter) as other:
            assert _named(await other.changes_since(start)) == (set(), {"x", "y", "z"})
        await adapter.upsert([record("y")])
        assert _named(await adapter.changes_since(start)) == ({"y"}, {"x", "z"})

    @needs(Capability.CHANGES)
    @checks("doc_status.changes.floor")
    async def test_changes_from_before_the_store_are_whole_or_none(self, adapter):
        """(CHANGES) Changes from before anything this store holds are
        ``None`` (the caller reads every record) or name every id written,
        never a part of them.

        Troubleshoot: when tombstones are pruned, or the feed began after
        some writes, remember from which generation it is complete and answer
        ``None`` below it.
        """
        start = await adapter.generation()
        await adapter.upsert([record(f"p{i}") for i in range(5)])
        await adapter.delete(["p0"])
        older = await adapter.changes_since(start - 1)
        if older is not None:
            named = {r.id for r in older.records} | set(older.deleted)
            assert {f"p{i}" for i in range(5)} <= named, f"a partial feed: {sorted(named)}"
