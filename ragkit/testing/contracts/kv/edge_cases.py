"""KV tests of the rules backends break most: keys a collation or normaliser
would merge, batches past SQL parameter limits, scans while keys are
deleted, durability after ``flush()``. Each names the rules it checks."""

from __future__ import annotations

from ragkit.protocols.base import Capability
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import collect, difference, needs
from ragkit.testing.contracts.base.inputs import (
    CONFUSABLE_KEYS,
    HUGE,
    LARGE,
    durable_view,
    many_keys,
    scan_result,
    scan_while_deleting,
)


class KVEdgeCaseTests:
    @checks("store.keys.exact")
    async def test_keys_differing_in_case_or_normalisation_are_distinct(self, adapter):
        """Keys that differ only in case, NFC/NFD, case-folding (ß, final sigma),
        compatibility forms or a trailing space are different records.

        Troubleshoot: a case-insensitive collation (MySQL's default, SQL
        Server's), a normalising index or ``key.lower()`` merges them: store the
        key in a binary/exact column.
        """
        records = {k: {"key": k, "n": i} for i, k in enumerate(CONFUSABLE_KEYS)}
        await adapter.upsert(records)
        assert await adapter.count() == len(records), "keys that differ only in case/normalisation were merged"
        got = await adapter.get_many(CONFUSABLE_KEYS)
        diff = difference([records[k] for k in CONFUSABLE_KEYS], got)
        assert diff is None, f"get_many of confusable keys: {diff}"
        assert set(await collect(adapter.keys())) == set(records)
        await adapter.delete(["apple", "e\u0301cole", "STRASSE"])
        left = {k for k in records if k not in {"apple", "e\u0301cole", "STRASSE"}}
        assert set(await collect(adapter.keys())) == left, "delete removed a key differing only in case/form"

    @checks("store.batch.large")
    async def test_batches_past_sql_parameter_limits(self, adapter):
        """One upsert of 2500 records, and one ``get_many``, ``missing`` and
        ``delete`` of 33000 keys (past SQLite's 32766 host parameters), answer
        like small calls.

        Troubleshoot: chunk ``IN (...)`` statements and pipelines inside the hooks.
        """
        stored = many_keys(LARGE)
        await adapter.upsert({k: {"k": k} for k in stored})
        asked = stored + many_keys(HUGE - LARGE, "absent")
        got = await adapter.get_many(asked)
        assert len(got) == len(asked)
        wrong = [k for k, v in zip(asked, got) if v != ({"k": k} if k in set(stored) else None)]
        assert not wrong, f"get_many of {len(asked)} keys got {len(wrong)} wrong (first {wrong[:3]})"
        assert await adapter.missing(asked) == set(asked) - set(stored)
        await adapter.delete(asked)
        assert await adapter.count() == 0, "a delete of 33000 keys left records behind"

    @checks("store.scan.complete-under-delete")
    async def test_key_scan_is_complete_while_keys_are_deleted(self, adapter):
        """A ``keys()`` scan whose consumer deletes each key it gets, and a
        batch of other keys after the first, still yields every key that was
        stored for the whole scan exactly once.

        Troubleshoot: paging with OFFSET skips rows once earlier rows are
        deleted; page by the last key seen (``WHERE key > ?``) or snapshot ids.
        """
        keys = many_keys(1500)
        await adapter.upsert({k: {} for k in keys})
        doomed = set(keys[700:760]) | set(keys[1400:1420])
        seen = await scan_while_deleting(adapter.keys, str, adapter.delete, doomed)
        problem = scan_result(seen, set(keys) - doomed, doomed)
        assert problem is None, problem

    @needs(Capability.PERSISTENT)
    @checks("store.flush.durable")
    async def test_flush_makes_writes_durable(self, adapter):
        """(PERSISTENT) After ``flush()``, with the store still open and never
        closed, a new instance over what is durable sees every write so far.

        Troubleshoot: ``_flush`` must commit (and write files) what ``_close``
        would; the indexer's crash recovery relies on flush.
        """
        await adapter.upsert({"a": {"v": 1}, "b": {"v": 2}})
        await adapter.upsert({"a": {"v": 3}})
        await adapter.delete(["b"])
        await adapter.flush()
        async with durable_view(adapter) as durable:
            got = await durable.get_many(["a", "b"])
            assert got == [{"v": 3}, None], f"after flush() a new instance reads {got}"
