"""Tests of the rules backends break most (issue 19), one mixin per store kind:
keys a collation or normaliser would merge, batches past SQL parameter
limits, scans while records are deleted, durability after ``flush()``, the
``min_score`` boundary, ``top_k=0``, filters comparing ``"1"`` with ``1``,
duplicate edges in one batch and the last page of a listing. Each test names
the rules it checks (``@checks``); the rules are stated in the protocol
docstrings."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ragkit.errors import InvalidValueError
from ragkit.protocols.base import Capability
from ragkit.schema import DocStatus, DocStatusRecord
from ragkit.testing.contracts._base import collect, difference, needs
from ragkit.testing.contracts.inputs import (
    CONFUSABLE_KEYS,
    HUGE,
    LARGE,
    durable_view,
    many_keys,
    scan_while_deleting,
)
from ragkit.testing.contracts.rules import checks


def _status(id: str, status: DocStatus = DocStatus.PENDING) -> DocStatusRecord:
    from ragkit.testing.contracts.doc_status import record

    return record(id, status)


def _vectors(n: int, dim: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def _scan_result(seen: list[str], keep: set[str], doomed: set[str]) -> str | None:
    dupes = sorted({k for k in seen if seen.count(k) > 1}) if len(seen) != len(set(seen)) else []
    if dupes:
        return f"the scan yielded {dupes[:5]} twice while keys were deleted during it"
    missed = sorted(keep - set(seen))
    if missed:
        return (
            f"the scan skipped {len(missed)} keys stored for the whole scan (first {missed[:5]}) "
            "while other keys were deleted during it: page by key, not by offset"
        )
    extra = sorted(set(seen) - keep - doomed)
    return f"the scan yielded keys never stored: {extra[:5]}" if extra else None


# -- KV --------------------------------------------------------------------------------


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
        problem = _scan_result(seen, set(keys) - doomed, doomed)
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


# -- vectors -------------------------------------------------------------------------------


class VectorEdgeCaseTests:
    @checks("store.keys.exact")
    async def test_ids_differing_in_case_or_normalisation_are_distinct(self, adapter):
        """Ids differing only in case, normalisation, case-folding or a trailing
        space are different records (get, count, delete, query hits).

        Troubleshoot: derive backend point ids from the exact UTF-8 bytes of the
        id, never from a lowered or normalised form.
        """
        ids = list(CONFUSABLE_KEYS)
        m = _vectors(len(ids), adapter.dimension, seed=91)
        await adapter.upsert(ids, m, [{"i": i} for i in range(len(ids))])
        assert await adapter.count() == len(ids), "ids differing only in case/normalisation were merged"
        got = await adapter.get(ids)
        assert [r.metadata["i"] if r else None for r in got] == list(range(len(ids)))
        for i in (0, 4, 8, 11):
            hits = await adapter.query(m[i], 1)
            assert [h.id for h in hits] == [ids[i]], f"query for {ids[i]!r} found {[h.id for h in hits]}"
        await adapter.delete(["apple", "STRASSE"])
        assert set(await collect(adapter.ids())) == set(ids) - {"apple", "STRASSE"}

    @checks("store.batch.large")
    async def test_get_and_delete_past_sql_parameter_limits(self, adapter):
        """``get`` and ``delete`` of 33000 ids (2500 stored) in one call.

        Troubleshoot: chunk ``IN (...)`` lists and request bodies in the hooks.
        """
        stored = many_keys(LARGE, "v")
        await adapter.upsert(stored, _vectors(LARGE, adapter.dimension, seed=92))
        asked = many_keys(HUGE - LARGE, "absent") + stored
        got = await adapter.get(asked)
        found = [r.id for r in got if r is not None]
        assert found == stored, f"get of {len(asked)} ids found {len(found)} of {len(stored)} stored"
        await adapter.delete(asked)
        assert await adapter.count() == 0, "a delete of 33000 ids left records behind"

    @checks("store.scan.complete-under-delete")
    async def test_id_scan_is_complete_while_ids_are_deleted(self, adapter):
        """An ``ids()`` scan whose consumer deletes as it goes still yields
        every id stored for the whole scan exactly once.

        Troubleshoot: page by id or snapshot the ids, not by offset.
        """
        ids = many_keys(1200, "s")
        await adapter.upsert(ids, _vectors(len(ids), adapter.dimension, seed=93))
        doomed = set(ids[500:540])
        seen = await scan_while_deleting(adapter.ids, str, adapter.delete, doomed)
        problem = _scan_result(seen, set(ids) - doomed, doomed)
        assert problem is None, problem

    @checks("vector.query.min-score-inclusive")
    async def test_min_score_keeps_a_hit_scoring_exactly_min_score(self, adapter):
        """A hit whose score equals ``min_score`` is returned (the bound is
        inclusive), whatever the score: the query uses each hit's own reported
        score as ``min_score``.

        Troubleshoot: push ``min_score`` down as ``>=`` (Qdrant's
        ``score_threshold`` and SQL ``score >= ?``), never ``>``; convert
        distances to scores before comparing.
        """
        d = adapter.dimension
        m = _vectors(12, d, seed=94)
        ids = [f"m{i:02d}" for i in range(12)]
        await adapter.upsert(ids, m)
        q = _vectors(1, d, seed=95)[0]
        hits = await adapter.query(q, 12)
        assert len(hits) == 12
        for h in hits[::3]:
            kept = await adapter.query(q, 12, min_score=h.score)
            assert h.id in [k.id for k in kept], (
                f"{h.id!r} scores {h.score!r}; query(min_score={h.score!r}) dropped it: the bound is inclusive"
            )

    @checks("vector.query.top-k")
    async def test_top_k_zero_returns_nothing(self, adapter):
        """``top_k=0`` returns ``[]`` (not "no limit"); a negative or non-int
        ``top_k`` raises ``InvalidValueError``.

        Troubleshoot: the protocol's ``query`` does this before the hook; an
        override must keep it.
        """
        await adapter.upsert(["a", "b"], _vectors(2, adapter.dimension, seed=96))
        q = _vectors(1, adapter.dimension, seed=97)[0]
        assert await adapter.query(q, 0) == []
        assert await adapter.query(q, 0, min_score=-1.0) == []
        for bad in (-1, 1.5, True, "2"):
            with pytest.raises(InvalidValueError):
                await adapter.query(q, bad)

    @needs(Capability.METADATA_FILTER)
    @checks("vector.filter.types")
    async def test_filter_compares_values_with_their_types(self, adapter):
        """(METADATA_FILTER) ``"1"`` never matches ``1`` (nor the reverse);
        ``3`` matches ``3.0`` and ``3.0`` matches ``3``; in ``$in`` too.

        Troubleshoot: backends that store metadata as strings or JSON text
        compare ``"1"`` with ``1``; typed payloads may miss ``3`` vs ``3.0``:
        keep the type and compare numbers numerically.
        """
        d = adapter.dimension
        metas: list[dict[str, Any]] = [
            {"v": 1}, {"v": "1"}, {"v": 3}, {"v": 3.0}, {"v": 2.5}, {"v": True}, {"v": "3"},
        ]
        ids = [f"t{i}" for i in range(len(metas))]
        await adapter.upsert(ids, _vectors(len(ids), d, seed=98), metas)
        q = _vectors(1, d, seed=99)[0]

        async def found(flt: dict[str, Any]) -> list[str]:
            return sorted(h.id for h in await adapter.query(q, 50, filter=flt))

        cases: list[tuple[dict[str, Any], list[str]]] = [
            ({"v": 1}, ["t0"]),
            ({"v": "1"}, ["t1"]),
            ({"v": 3}, ["t2", "t3"]),
            ({"v": 3.0}, ["t2", "t3"]),
            ({"v": "3"}, ["t6"]),
            ({"v": 2.5}, ["t4"]),
            ({"v": {"$in": [1, 3.0]}}, ["t0", "t2", "t3"]),
            ({"v": {"$in": ["1", "3"]}}, ["t1", "t6"]),
        ]
        for flt, want in cases:
            got = await found(flt)
            assert got == want, f"filter {flt!r} matched {got}, expected {want} (metadata {dict(zip(ids, metas))})"

    @needs(Capability.PERSISTENT)
    @checks("store.flush.durable")
    async def test_flush_makes_writes_durable(self, adapter):
        """(PERSISTENT) After ``flush()``, with the store still open, a new
        instance over what is durable sees every write so far.

        Troubleshoot: ``_flush`` must save what ``_close`` would.
        """
        m = _vectors(3, adapter.dimension, seed=100)
        await adapter.upsert(["a", "b", "c"], m, [{"n": 1}, {"n": 2}, {"n": 3}])
        await adapter.delete(["b"])
        await adapter.upsert(["c"], m[:1], [{"n": 4}])
        await adapter.flush()
        async with durable_view(adapter) as durable:
            got = await durable.get(["a", "b", "c"])
            meta = [r.metadata if r else None for r in got]
            assert meta == [{"n": 1}, None, {"n": 4}], f"after flush() a new instance reads {meta}"
            assert [h.id for h in await durable.query(m[0], 1)] in (["a"], ["c"])


# -- graph ---------------------------------------------------------------------------------


class GraphEdgeCaseTests:
    @checks("store.keys.exact", "graph.node-ids.any-str")
    async def test_node_ids_differing_in_case_or_normalisation_are_distinct(self, adapter):
        """Entity names differing only in case, normalisation, case-folding or a
        trailing space are different nodes, with their own edges.

        Troubleshoot: match nodes on the exact id property; no ``toLower`` or
        normalising index.
        """
        ids = list(CONFUSABLE_KEYS)
        await adapter.upsert_nodes({n: {"i": i} for i, n in enumerate(ids)})
        await adapter.upsert_edges([("Apple", "apple", {"w": 1}), ("stra\u00dfe", "STRASSE", {"w": 2})])
        assert await adapter.node_count() == len(ids), "node ids differing in case/normalisation were merged"
        assert [p["i"] if p else None for p in await adapter.get_nodes(ids)] == list(range(len(ids)))
        assert await adapter.degrees(["Apple", "apple", "APPLE", "strasse"]) == [1, 1, 0, 0]
        await adapter.delete_nodes(["APPLE"])
        assert await adapter.node_count() == len(ids) - 1
        assert await adapter.get_edge("apple", "Apple") == {"w": 1}

    @checks("graph.upsert-edges.last-wins")
    async def test_an_edge_twice_in_one_batch_keeps_the_last(self, adapter):
        """In one ``upsert_edges`` batch the last occurrence of an edge wins,
        whether repeated as (a, b) or as (b, a); there is one edge.

        Troubleshoot: a backend ``UNWIND`` or multi-row insert applies rows in
        an order of its own: de-duplicate the batch keeping the last first
        (the protocol's ``upsert_edges`` does before the hook).
        """
        await adapter.upsert_edges([
            ("a", "b", {"w": 1}), ("b", "a", {"w": 2}), ("c", "d", {"w": 3}), ("c", "d", {"w": 4}),
            ("e", "e", {"w": 5}), ("e", "e", {"w": 6}),
        ])
        assert await adapter.get_edges([("a", "b"), ("d", "c"), ("e", "e")]) == [{"w": 2}, {"w": 4}, {"w": 6}]
        assert await adapter.edge_count() == 3
        assert await adapter.degrees(["a", "b", "e"]) == [1, 1, 1]

    @checks("store.batch.large", "graph.batch.order")
    async def test_batches_past_sql_parameter_limits(self, adapter):
        """2500 nodes and 2500 edges in one upsert each; reads of 2500 ids and
        pairs, and deletes, in one call each.

        Troubleshoot: chunk statements and ``UNWIND`` lists inside the hooks.
        """
        nodes = many_keys(LARGE, "n")
        await adapter.upsert_nodes({n: {"i": i} for i, n in enumerate(nodes)})
        pairs = [(nodes[i], nodes[(i + 1) % LARGE]) for i in range(LARGE)]
        await adapter.upsert_edges([(a, b, {"i": i}) for i, (a, b) in enumerate(pairs)])
        assert await adapter.node_count() == LARGE and await adapter.edge_count() == LARGE
        got = await adapter.get_nodes(nodes + ["absent"])
        assert [p["i"] if p else None for p in got] == [*range(LARGE), None]
        edges = await adapter.get_edges(pairs)
        assert [p["i"] if p else None for p in edges] == list(range(LARGE))
        assert set(await adapter.degrees(nodes)) == {2}
        await adapter.delete_edges(pairs[: LARGE // 2])
        assert await adapter.edge_count() == LARGE - LARGE // 2
        await adapter.delete_nodes(nodes)
        assert await adapter.node_count() == 0 and await adapter.edge_count() == 0

    @checks("store.scan.complete-under-delete")
    async def test_node_scan_is_complete_while_nodes_are_deleted(self, adapter):
        """A ``nodes()`` scan whose consumer deletes as it goes still yields
        every node stored for the whole scan exactly once.

        Troubleshoot: page by id or snapshot, not by offset.
        """
        ids = many_keys(600, "g")
        await adapter.upsert_nodes({n: {} for n in ids})
        doomed = set(ids[300:320])
        seen = await scan_while_deleting(adapter.nodes, lambda n: n.id, adapter.delete_nodes, doomed)
        problem = _scan_result(seen, set(ids) - doomed, doomed)
        assert problem is None, problem

    @needs(Capability.PERSISTENT)
    @checks("store.flush.durable")
    async def test_flush_makes_writes_durable(self, adapter):
        """(PERSISTENT) After ``flush()``, with the store still open, a new
        instance over what is durable sees every write so far.

        Troubleshoot: ``_flush`` must save (commit, write the file) what
        ``_close`` would.
        """
        await adapter.upsert_nodes({"a": {"v": 1}, "b": {"v": 2}})
        await adapter.upsert_edges([("a", "b", {"w": 1}), ("b", "c", {"w": 2})])
        await adapter.delete_nodes(["c"])
        await adapter.flush()
        async with durable_view(adapter) as durable:
            assert await durable.get_nodes(["a", "b", "c"]) == [{"v": 1}, {"v": 2}, None]
            assert await durable.get_edges([("b", "a"), ("b", "c")]) == [{"w": 1}, None]


# -- doc status ------------------------------------------------------------------------------


class DocStatusEdgeCaseTests:
    @checks("store.keys.exact")
    async def test_ids_differing_in_case_or_normalisation_are_distinct(self, adapter):
        """Document ids differing only in case, normalisation, case-folding or a
        trailing space are different records, and list in code point order.

        Troubleshoot: a binary/exact id column (``COLLATE "C"``, ``BINARY``).
        """
        ids = list(CONFUSABLE_KEYS)
        await adapter.upsert([_status(i, DocStatus.PROCESSED if n % 2 else DocStatus.PENDING) for n, i in enumerate(ids)])
        assert await adapter.count() == len(ids), "ids differing only in case/normalisation were merged"
        assert [r.id if r else None for r in await adapter.get(ids)] == ids
        page = await adapter.list_page(limit=100)
        assert [r.id for r in page.items] == sorted(ids)
        await adapter.delete(["apple"])
        assert [r is None for r in await adapter.get(["Apple", "apple", "APPLE"])] == [False, True, False]

    @checks("store.batch.large", "doc_status.get.order")
    async def test_batches_past_sql_parameter_limits(self, adapter):
        """One upsert of 2500 records; ``get`` and ``delete`` of 33000 ids.

        Troubleshoot: chunk ``IN (...)`` lists inside the hooks.
        """
        stored = many_keys(LARGE, "d")
        await adapter.upsert([_status(i) for i in stored])
        asked = stored + many_keys(HUGE - LARGE, "absent")
        got = await adapter.get(asked)
        assert [r.id for r in got if r is not None] == stored
        assert (await adapter.counts())[DocStatus.PENDING] == LARGE
        await adapter.delete(asked)
        assert await adapter.count() == 0, "a delete of 33000 ids left records behind"

    @checks("doc_status.list-page.last-page")
    @pytest.mark.parametrize("total, limit", [(6, 3), (6, 2), (6, 6), (5, 5), (7, 3), (1, 1)])
    async def test_next_cursor_is_none_on_the_last_page(self, adapter, total, limit):
        """``next_cursor`` is ``None`` on the last page, also when the last page
        is full (no extra empty page), and a page with a cursor is full.

        Troubleshoot: fetch ``limit + 1`` rows to know whether another page
        exists (the protocol's ``list_page`` asks the hook for ``limit + 1``:
        return that many when there are).
        """
        ids = [f"p{i:02d}" for i in range(total)]
        await adapter.upsert([_status(i) for i in ids])
        pages, cursor = [], None
        while True:
            page = await adapter.list_page(limit=limit, cursor=cursor)
            pages.append([r.id for r in page.items])
            if page.next_cursor is None or len(pages) > total + 2:
                break
            assert len(page.items) == limit, f"page {pages[-1]} has a next_cursor but fewer than {limit} items"
            assert page.next_cursor == page.items[-1].id
            cursor = page.next_cursor
        want = [ids[i : i + limit] for i in range(0, total, limit)]
        assert pages == want, f"pages {pages}, expected {want} (no empty last page, nothing missing)"

    @checks("doc_status.upsert.whole")
    async def test_an_id_twice_in_one_upsert_keeps_the_last(self, adapter):
        """When one ``upsert`` holds a record twice, the last one wins.

        Troubleshoot: the protocol's ``upsert`` de-duplicates before the hook;
        a bulk insert must not reorder its rows.
        """
        await adapter.upsert([_status("x", DocStatus.PENDING), _status("y"), _status("x", DocStatus.PROCESSED)])
        got = await adapter.get(["x"])
        assert got[0] is not None and got[0].status == DocStatus.PROCESSED
        assert (await adapter.counts())[DocStatus.PENDING] == 1

    @needs(Capability.PERSISTENT)
    @checks("store.flush.durable")
    async def test_flush_makes_writes_durable(self, adapter):
        """(PERSISTENT) After ``flush()``, with the store still open, a new
        instance over what is durable sees every write so far.

        Troubleshoot: ``_flush`` must commit what ``_close`` would.
        """
        await adapter.upsert([_status("a"), _status("b"), _status("c")])
        await adapter.transition("a", DocStatus.PROCESSING)
        await adapter.delete(["b"])
        await adapter.flush()
        async with durable_view(adapter) as durable:
            got = await durable.get(["a", "b", "c"])
            assert [r.status if r else None for r in got] == [DocStatus.PROCESSING, None, DocStatus.PENDING]
