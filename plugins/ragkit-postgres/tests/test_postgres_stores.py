"""ragkit-postgres beyond the contract: the schema's version, one pool and one
transaction per database, halfvec above 2,000 dimensions, the advisory lock's
life with its process, bound parameters, errors.

The contract itself runs from ragkit's ``tests/contract`` (``TestKV_postgres``,
``TestDocStatus_postgres``, ``TestVector_postgres``, ``TestGraph_postgres`` and
the lease classes). Troubleshooting: every test needs the server at
``RAGKIT_POSTGRES_URL`` (``scripts/postgres-server start``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from datetime import datetime, timezone
from urllib.parse import urlsplit

import asyncpg
import numpy as np
import pytest

from ragkit.errors import ConfigError, DimensionMismatchError, StoreError
from ragkit.protocols import StoreConfig
from ragkit.protocols.lease import Holder
from ragkit.schema import DocStatus, DocStatusRecord
from ragkit_postgres import (
    SCHEMA_VERSION,
    PostgresDocStatusStore,
    PostgresGraphStore,
    PostgresKVStore,
    PostgresVectorStore,
)
from ragkit_postgres._db import safe_dsn
from ragkit_postgres._stats import Statistics
from ragkit_postgres.vector import vector_text
from ragkit_postgres.testing import drop_prefix, fresh_prefix

T0 = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def rec(id: str, status: DocStatus = DocStatus.PENDING) -> DocStatusRecord:
    return DocStatusRecord(id=id, status=status, created_at=T0, updated_at=T0)


async def test_schema_is_versioned_and_a_newer_one_is_refused(make_config, postgres_url):
    """Opening creates the tables once and records the schema version; a
    database recording a newer version is refused with a message naming both
    versions and the fix, and nothing is opened.

    Troubleshoot: ``Database._create_schema`` reads ``<prefix>_schema`` first.
    """
    prefix = fresh_prefix()
    try:
        store = PostgresKVStore(make_config("ns", table_prefix=prefix))
        async with store:
            await store.upsert({"k": {"v": 1}})
        async with store:  # again: idempotent, the data kept
            assert await store.get("k") == {"v": 1}
        conn = await asyncpg.connect(postgres_url)
        try:
            assert await conn.fetchval(f"SELECT version FROM {prefix}_schema") == SCHEMA_VERSION
            await conn.execute(f"UPDATE {prefix}_schema SET version = $1", SCHEMA_VERSION + 1)
        finally:
            await conn.close()
        with pytest.raises(StoreError, match=rf"schema version {SCHEMA_VERSION + 1}, newer.*upgrade ragkit-postgres "
                                             r"\(pip install -U ragkit-postgres\), or use another table_prefix$"):
            await store.open()
        assert not store.is_open
    finally:
        await drop_prefix(postgres_url, prefix)


async def test_a_schema_missing_a_table_is_completed_when_a_store_opens(make_config, postgres_url):
    """A database at this schema version that lacks one of its tables (dropped
    by hand, or a restore that left one out) gets it back on the next open,
    the other tables' rows untouched.

    Troubleshoot: ``Database._create_schema`` runs when ``_schema_ready`` finds a table missing.
    """
    prefix = fresh_prefix()
    try:
        store = PostgresKVStore(make_config("ns", table_prefix=prefix))
        async with store:
            await store.upsert({"k": {"v": 1}})
        conn = await asyncpg.connect(postgres_url)
        try:
            await conn.execute(f"DROP TABLE {prefix}_edges")
            async with store:
                assert await store.get("k") == {"v": 1}
            assert await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"{prefix}_edges")
            assert await conn.fetchval(f"SELECT version FROM {prefix}_schema") == SCHEMA_VERSION
        finally:
            await conn.close()
    finally:
        await drop_prefix(postgres_url, prefix)


async def test_stores_of_one_database_share_one_pool_and_one_transaction(stores, make_config, postgres_url):
    """The four stores of one DSN hold one pool (their ``transaction_scope()``
    is one object); writes of three of them inside its transaction are unseen
    by other connections until it ends, and a failure inside rolls all back.

    Troubleshoot: every statement must go through ``Database.connection()``,
    which hands out the transaction's connection inside one.
    """
    ws = f"w{uuid.uuid4().hex[:8]}"
    kv = await stores(PostgresKVStore, make_config("kv", ws))
    graph = await stores(PostgresGraphStore, make_config("graph", ws))
    docs = await stores(PostgresDocStatusStore, make_config("docs", ws))
    vectors = await stores(PostgresVectorStore, make_config("vec", ws, dimension=4))
    scope = kv.transaction_scope()
    assert scope is not None and all(s.transaction_scope() is scope for s in (graph, docs, vectors))

    other = await asyncpg.connect(postgres_url)
    try:
        async def seen() -> int:
            return await other.fetchval("SELECT count(*) FROM ragkit_kv WHERE workspace = $1", ws)

        with pytest.raises(RuntimeError, match="boom"):
            async with scope.transaction():
                await kv.upsert({"a": {"x": 1}})
                await graph.upsert_edges([("n1", "n2", {"w": 1})])
                await docs.upsert([rec("d1")])
                assert await kv.get("a") == {"x": 1}, "a read inside the transaction misses its writes"
                assert await seen() == 0
                raise RuntimeError("boom")
        assert (await kv.count(), await graph.node_count(), await docs.count()) == (0, 0, 0)

        async with scope.transaction():
            await kv.upsert({"a": {"x": 1}})
            async with scope.transaction():  # joins
                await graph.upsert_edges([("n1", "n2", {"w": 1})])
            await asyncio.gather(docs.upsert([rec("d1")]), vectors.upsert(["v"], [[1, 0, 0, 0]]))
            assert await seen() == 0
        assert await seen() == 1 and await graph.edge_count() == 1 and await docs.count() == 1
    finally:
        await other.close()


async def test_a_table_that_doubled_is_analysed_after_its_commit_and_searches_walk_the_index(
        make_config, postgres_url):
    """Right after a bulk load the planner must know the table's size: with no
    statistics it guessed a few rows per namespace and answered a search by
    sorting every vector of the namespace, not by the HNSW index (30-60 ms
    against 2-8 ms at 19k entities). A table that doubled since it was last
    analysed is analysed once the batch commits (also a write outside a
    batch); a small write after it is left to autovacuum.

    Troubleshoot: ``_stats.Statistics``; stores pass their rows to ``write()``.
    """
    prefix, ws = fresh_prefix(), f"w{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(7)
    try:
        big = PostgresVectorStore(make_config("big", ws, dimension=8, table_prefix=prefix))
        small = PostgresVectorStore(make_config("small", ws, dimension=8, table_prefix=prefix))
        async with big, small:
            async with big.transaction_scope().transaction():
                for start in range(0, 6000, 1000):
                    await big.upsert([f"b{i}" for i in range(start, start + 1000)], rng.normal(size=(1000, 8)))
            await small.upsert([f"s{i}" for i in range(50)], rng.normal(size=(50, 8)))
            conn = await asyncpg.connect(postgres_url)
            try:
                async def state() -> tuple[float, int]:
                    return tuple(await conn.fetchrow(
                        "SELECT c.reltuples, s.analyze_count FROM pg_class c JOIN pg_stat_user_tables s "
                        "ON s.relid = c.oid WHERE c.relname = $1", f"{prefix}_vectors_8"))

                # The checks between analyses read analyze_count alone: autovacuum's
                # VACUUM (not counted there) also sets reltuples, at a time of its own.
                rows, analyses = await state()
                assert analyses == 1 and rows in (6000, 6050), "the batch's commit left the table unanalysed"
                hits = await big.query(rng.normal(size=8), 10)
                assert len(hits) == 10
                async with conn.transaction():
                    await conn.execute("SET LOCAL hnsw.ef_search = 100")
                    plan = "\n".join(r[0] for r in await conn.fetch(
                        f"EXPLAIN SELECT id FROM {prefix}_vectors_8 WHERE workspace = $1 AND namespace = 'big' "
                        "ORDER BY embedding <=> $2::vector LIMIT 28", ws, "[" + ",".join(["0.5"] * 8) + "]"))
                assert f"{prefix}_vectors_8_hnsw" in plan, plan

                await big.upsert([f"c{i}" for i in range(3000)], rng.normal(size=(3000, 8)))
                assert (await state())[1] == 1, "3,050 rows written on 6,000 are not a doubling"
                # 6,050 written since the analysis: analysed again, outside a batch too
                await big.upsert([f"d{i}" for i in range(3000)], rng.normal(size=(3000, 8)))
                assert await state() == (12050, 2)
            finally:
                await conn.close()
    finally:
        await drop_prefix(postgres_url, prefix)


async def test_every_bulk_write_counts_its_rows_for_the_planner(make_config, postgres_url):
    """Each store passes the rows it changes, per table, to the statistics
    (``write(what, rows)``): 1,500 rows written to a fresh table have it
    analysed when the write commits, and 1,500 more changes on those rows
    again (a doubling, see the test above). Without the count, the planner
    is left with no statistics until autovacuum's turn.

    Troubleshoot: the ``rows`` argument of each store's ``write()`` calls.
    """
    n, prefix, ws = 1500, fresh_prefix(), f"w{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(postgres_url)

    async def analyses(table: str) -> int:
        return await conn.fetchval("SELECT analyze_count FROM pg_stat_user_tables WHERE relname = $1",
                                   f"{prefix}_{table}")

    def config(namespace: str, text_field: str | None = None) -> StoreConfig:
        return make_config(namespace, ws, table_prefix=prefix).model_copy(update={"text_field": text_field})

    try:
        kv, docs, graph = (PostgresKVStore(config("kv")), PostgresDocStatusStore(config("docs")),
                           PostgresGraphStore(config("g")))
        async with kv, docs, graph:
            await kv.upsert({f"k{i}": {"text": f"word{i}"} for i in range(n)})
            await docs.upsert([rec(f"d{i}") for i in range(n)])
            await graph.upsert_nodes({f"n{i}": {"i": i} for i in range(n)})
            await graph.upsert_edges([(f"n{i}", f"n{i + 1}", {}) for i in range(n)])
            # The edges' ends count as nodes written (1,501 on 1,500): the nodes' second analysis.
            assert [await analyses(t) for t in ("kv", "doc_status", "nodes", "edges")] == [1, 1, 2, 1]
            async with PostgresKVStore(config("kv", text_field="text")) as text:  # the fill: n rows updated
                assert await analyses("kv") == 2
                await text.upsert({"k0": {"text": "changed"}})  # indexed: the namespace stays filled
            async with PostgresKVStore(config("kv", text_field="text")):  # filled: nothing to update
                assert await analyses("kv") == 2
            await kv.delete([f"k{i}" for i in range(n)])
            await docs.delete([f"d{i}" for i in range(n)])
            await graph.delete_edges([(f"n{i}", f"n{i + 1}") for i in range(n)])
            await graph.delete_nodes([f"n{i}" for i in range(n + 1)])
            assert [await analyses(t) for t in ("kv", "doc_status", "nodes", "edges")] == [3, 2, 3, 2]
    finally:
        await conn.close()
        await drop_prefix(postgres_url, prefix)


async def test_the_doubling_is_counted_from_the_size_the_server_analysed(make_config, postgres_url):
    """999 rows written to a fresh table leave it to autovacuum, the 1,000th
    (``MIN_ROWS``) has it analysed; then 999 changes on its 1,000 analysed rows
    are no doubling, the 1,000th is. A store opened anew (a new process) reads
    the table's analysed size from the server: 1,000 rows written then are no
    doubling of 2,000.

    Troubleshoot: ``_stats.Statistics._due`` and ``_analyse_if_doubled``.
    """
    prefix, ws = fresh_prefix(), f"w{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(postgres_url)

    async def analyses() -> int:
        return await conn.fetchval("SELECT analyze_count FROM pg_stat_user_tables WHERE relname = $1",
                                   f"{prefix}_kv")

    config = make_config("kv", ws, table_prefix=prefix)
    try:
        async with PostgresKVStore(config) as kv:
            await kv.upsert({f"k{i}": {"v": 0} for i in range(999)})
            assert await analyses() == 0
            await kv.upsert({"k999": {"v": 0}})
            assert await analyses() == 1, "MIN_ROWS rows written to a fresh table: analysed"
            await kv.upsert({f"k{i}": {"v": 1} for i in range(999)})
            assert await analyses() == 1, "999 changes on 1,000 analysed rows are not a doubling"
            await kv.upsert({"k999": {"v": 1}})
            assert await analyses() == 2
            await kv.upsert({f"n{i}": {"v": 0} for i in range(1000)})  # 2,000 rows: analysed again
            assert await analyses() == 3
        async with PostgresKVStore(config) as kv:
            await kv.upsert({f"k{i}": {"v": 2} for i in range(1000)})
            assert await analyses() == 3, "a store opened anew took 1,000 changes on 2,000 rows for a doubling"
    finally:
        await conn.close()
        await drop_prefix(postgres_url, prefix)


class CountingPool:
    """A real asyncpg pool that counts the connections taken from it."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool, self.acquired = pool, 0

    def acquire(self):
        self.acquired += 1
        return self.pool.acquire()


async def test_a_commit_with_no_table_due_takes_no_connection(postgres_url):
    """Statistics decide from what they hold whether any table is due, so the
    many small commits of a run never wait for a connection of their own."""
    table = f"{fresh_prefix()}_t"
    pool = CountingPool(await asyncpg.create_pool(postgres_url, min_size=1, max_size=2))
    try:
        await pool.pool.execute(f"CREATE TABLE {table} AS SELECT g AS v FROM generate_series(1, 3000) g")
        stats = Statistics()
        stats.wrote(table, 3000)
        await stats.refresh(pool)
        assert pool.acquired == 1 and stats.analysed_rows[table] == 3000
        stats.wrote(table, 1000)
        stats.wrote(table, 1000)
        await stats.refresh(pool)
        assert pool.acquired == 1, "2,000 rows on 3,000 analysed took a connection"
    finally:
        await pool.pool.execute(f"DROP TABLE IF EXISTS {table}")
        await pool.pool.close()


async def test_a_refresh_that_fails_is_logged_naming_the_tables_and_never_raised(postgres_url, caplog):
    """The write it follows has committed: a failure to analyse is a warning
    naming the tables and the error, and autovacuum is left to do it."""
    pool = await asyncpg.create_pool(postgres_url, min_size=1, max_size=1)
    await pool.close()
    stats = Statistics()
    stats.wrote("rk_a_kv", 1000)
    stats.wrote("rk_a_nodes", 2000)
    with caplog.at_level(logging.WARNING, logger="ragkit_postgres._stats"):
        await stats.refresh(pool)
    [record] = caplog.records
    assert record.getMessage().startswith(
        "could not refresh the planner statistics of rk_a_kv, rk_a_nodes: "
    ) and "closed" in record.getMessage()


async def test_a_search_is_one_statement_under_its_own_stores_settings(make_config):
    """A vector search outside a batch is one statement: the search settings
    (``hnsw.ef_search``, ``hnsw.iterative_scan``) stay on the pooled
    connection's session, set again only when a store with other settings
    takes it (it was ``BEGIN``, ``SET LOCAL``, the search and ``COMMIT``:
    four round trips). Inside the batch they are local to it, so its rollback
    leaves the session as the connection recorded it.

    Troubleshoot: ``Database.configured`` and the connection class that
    records what it set (``_connection_class``).
    """
    ws = f"w{uuid.uuid4().hex[:8]}"
    # every statement on one connection; the index walked, however few the rows
    one = {"max_connections": 1, "min_connections": 1, "exact_search_below": 0}
    narrow = PostgresVectorStore(make_config("narrow", ws, dimension=4, hnsw_ef_search=40, **one))
    wide = PostgresVectorStore(make_config("wide", ws, dimension=4, hnsw_ef_search=1000, **one))
    async with narrow, wide:
        db = narrow.transaction_scope()
        assert wide.transaction_scope() is db
        await narrow.upsert(["a", "b"], [[1, 0, 0, 0], [0, 1, 0, 0]])
        await wide.upsert(["a", "b"], [[1, 0, 0, 0], [0, 1, 0, 0]])
        sent: list[str] = []
        async with db.pool.acquire() as conn:
            conn.add_query_logger(lambda record: sent.append(record.query))

        async def statements(store: PostgresVectorStore) -> list[str]:
            await asyncio.sleep(0.01)  # asyncpg calls the logger soon after, not at once
            sent.clear()
            assert [h.id for h in await store.query([1, 0, 0, 0], 1)] == ["a"]
            await asyncio.sleep(0.01)
            return list(sent)

        async def session_value(name: str = "hnsw.ef_search") -> str:
            async with db.pool.acquire() as conn:
                return await conn.fetchval("SELECT current_setting($1)", name)

        first = await statements(narrow)  # with asyncpg's first look at the vector type
        assert "set_config" in first[0] and first[-1].startswith("WITH walk"), first
        assert len(await statements(narrow)) == 1, "the settings were sent again for the same store"
        assert len(await statements(wide)) == 2, "another store's settings were not applied"
        assert len(await statements(wide)) == 1
        assert await session_value() == "1000"
        # pgvector 0.8 walks on until enough rows match (this server's is newer)
        assert db.vector_version >= (0, 8) and await session_value("hnsw.iterative_scan") == "strict_order"

        with pytest.raises(RuntimeError, match="undo"):
            async with db.transaction():
                in_batch = await statements(narrow)
                assert len(in_batch) == 2 and "true" in in_batch[0], "inside a batch the settings are local"
                assert await db.batch().conn.fetchval("SELECT current_setting('hnsw.ef_search')") == "40"
                raise RuntimeError("undo")
        assert await session_value() == "1000", "the batch's settings outlived it"
        assert len(await statements(wide)) == 1
        assert await session_value() == "1000"


async def test_the_pgvector_version_is_known_whether_the_schema_was_made_or_found(make_config, postgres_url):
    """A database learns pgvector's version (which decides the iterative index
    walk of 0.8) both when it creates the schema and when it finds it made.

    Troubleshoot: the version query of ``Database._create_schema`` and of
    ``Database._schema_ready``.
    """
    async def installed() -> tuple[int, ...]:  # the schema creates the extension
        conn = await asyncpg.connect(postgres_url)
        try:
            text = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        finally:
            await conn.close()
        return tuple(int(x) for x in text.split("."))

    prefix = fresh_prefix()
    try:
        for round in ("creates the schema", "finds it"):
            async with PostgresKVStore(make_config("version", table_prefix=prefix)) as store:
                assert store.db.vector_version == await installed() >= (0, 8), round
    finally:
        await drop_prefix(postgres_url, prefix)


async def test_a_search_the_index_walk_cuts_short_still_finds_every_matching_row(postgres_url):
    """The HNSW index of a dimension holds every workspace and namespace, so a
    small store (or a selective filter) in a crowded table is a handful of
    rows the index walk may stop before meeting: at ``hnsw.max_scan_tuples``
    or where deleted rows cut the graph. CI once lost one of three matching
    rows of a seven-row store that way. When the walk brings back fewer rows
    than asked, the same statement answers from an exact scan of the store's
    matching rows. Here a database whose planner takes the index whenever it
    can (``enable_sort = off``) and whose walk stops after 20 tuples stands
    for the crowded table.

    Troubleshoot: ``PostgresVectorStore._search_sql``.
    """
    name = f"ragkit_walk_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        await admin.execute(f'ALTER DATABASE "{name}" SET enable_sort = off')
        await admin.execute(f'ALTER DATABASE "{name}" SET hnsw.max_scan_tuples = 20')
        dsn = urlsplit(postgres_url)._replace(path=f"/{name}").geturl()
        rng = np.random.default_rng(11)
        options = {"dsn": dsn, "exact_search_below": 0}  # the index walked, however few the rows
        crowd = PostgresVectorStore(StoreConfig(namespace="crowd", workspace="w", dimension=8, options=options))
        store = PostgresVectorStore(StoreConfig(namespace="few", workspace="w", dimension=8, options=options))
        async with crowd, store:
            await crowd.upsert([f"c{i}" for i in range(400)], rng.normal(size=(400, 8)))
            vectors = rng.normal(size=(7, 8))
            await store.upsert([f"t{i}" for i in range(7)], vectors, [{"v": i % 3} for i in range(7)])
            query = rng.normal(size=8)
            unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
            nearest = [f"t{i}" for i in np.argsort(-(unit @ (query / np.linalg.norm(query))))]
            assert [h.id for h in await store.query(query, 5)] == nearest[:5]
            assert sorted(h.id for h in await store.query(query, 50)) == sorted(nearest)
            assert sorted(h.id for h in await store.query(query, 50, filter={"v": {"$in": [0, 2]}})) == [
                "t0", "t2", "t3", "t5", "t6"]
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def test_a_small_store_is_searched_exactly_and_a_large_one_through_the_index(make_config):
    """Below ``exact_search_below`` rows a search scores every row of the
    store (one statement, ordered off the index): the shared HNSW index
    would walk mostly other stores' rows. The row count is read once and
    read again after this process writes; from the threshold on, the
    search walks the index.

    Troubleshoot: ``PostgresVectorStore._small``.
    """
    ws = f"w{uuid.uuid4().hex[:8]}"
    one = {"max_connections": 1, "min_connections": 1, "exact_search_below": 30}
    store = PostgresVectorStore(make_config("few", ws, dimension=8, **one))
    rng = np.random.default_rng(3)
    async with store:
        db = store.transaction_scope()
        vectors = rng.normal(size=(29, 8))
        await store.upsert([f"v{i}" for i in range(29)], vectors)
        sent: list[str] = []
        async with db.pool.acquire() as conn:
            conn.add_query_logger(lambda record: sent.append(record.query))

        async def search() -> tuple[list[str], list[str]]:
            await asyncio.sleep(0.01)  # asyncpg calls the logger soon after, not at once
            sent.clear()
            hits = [h.id for h in await store.query(query, 5)]
            await asyncio.sleep(0.01)
            return hits, list(sent)

        query = rng.normal(size=8)
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        nearest = [f"v{i}" for i in np.argsort(-(unit @ (query / np.linalg.norm(query))))[:5]]
        hits, statements = await search()
        assert hits == nearest
        assert any("count(*)" in s for s in statements) and statements[-1].endswith("+ 0 LIMIT $4"), statements
        hits, statements = await search()
        assert hits == nearest and len(statements) == 1, "the row count was read again without a write"
        await store.upsert(["v29"], rng.normal(size=(1, 8)))
        _, statements = await search()
        assert any("count(*)" in s for s in statements) and statements[-1].startswith("WITH walk"), statements


async def test_a_reader_outside_the_batch_sees_committed_data_only(stores, make_config):
    """Another task (a query answered during a commit) is not in the batch
    transaction: it reads what was committed, and is not blocked."""
    kv = await stores(PostgresKVStore, make_config("kv"))
    await kv.upsert({"old": {"v": 0}})
    started, release = asyncio.Event(), asyncio.Event()

    async def batch() -> None:
        async with kv.transaction_scope().transaction():
            await kv.upsert({"new": {"v": 1}})
            started.set()
            await release.wait()

    task = asyncio.create_task(batch())
    await started.wait()
    assert await asyncio.wait_for(kv.missing(["old", "new"]), 10) == {"new"}
    release.set()
    await task
    assert await kv.missing(["old", "new"]) == set()


async def test_a_status_write_beside_the_batch_does_not_wait_for_its_commit(stores, make_config):
    """The indexer's batch writes statuses, then goes on with the rest of the
    batch; an extraction worker's status write meanwhile (another task, another
    connection) used to wait for the batch's commit, behind the generation
    counter's row lock taken at the batch's first status write. Now the counter
    is taken just before the commit: the worker's write goes through, and both
    count in the generation and the change feed, each from its own commit."""
    docs = await stores(PostgresDocStatusStore, make_config("docs"))
    await docs.upsert([rec("a"), rec("kept")])
    g0 = await docs.generation()
    started, release = asyncio.Event(), asyncio.Event()

    async def batch() -> None:
        async with docs.transaction_scope().transaction():
            await docs.upsert([rec("in-batch")])
            await docs.delete(["a"])
            started.set()
            await release.wait()

    task = asyncio.create_task(batch())
    await started.wait()
    try:
        await asyncio.wait_for(docs.upsert([rec("worker")]), 10)
        g1 = await docs.generation()
        seen = await docs.changes_since(g0)
    finally:
        release.set()  # the batch ends however the checks go (a task left waiting would hang the teardown)
        await task
    assert g1 > g0 and [r.id for r in seen.records] == ["worker"] and seen.deleted == []  # not the uncommitted batch
    g2 = await docs.generation()
    after = await docs.changes_since(g1)
    assert g2 > g1 and [r.id for r in after.records] == ["in-batch"] and after.deleted == ["a"]
    assert sorted(r.id for r in (await docs.changes_since(g0)).records) == ["in-batch", "worker"]
    assert (await docs.changes_since(g2)).records == []


async def test_halfvec_index_above_2000_dimensions(make_config, postgres_url):
    """A 2,048-dimension store gets its HNSW index on a halfvec cast (pgvector
    indexes vector up to 2,000 dimensions), and still returns full-precision
    vectors and exact cosine scores. (Tables of a fresh prefix: the store
    creates them.)"""
    prefix = fresh_prefix()
    try:
        async with PostgresVectorStore(make_config("big", dimension=2048, table_prefix=prefix)) as store:
            rng = np.random.default_rng(3)
            m = rng.standard_normal((20, 2048)).astype(np.float32)
            await store.upsert([f"v{i}" for i in range(20)], m, [{"i": i} for i in range(20)])
            hits = await store.query(m[7], 3)
            assert hits[0].id == "v7" and abs(hits[0].score - 1.0) < 1e-5
            assert np.array_equal(np.asarray((await store.get(["v7"]))[0].vector, dtype=np.float32), m[7])
        conn = await asyncpg.connect(postgres_url)
        try:
            indexdef = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = $1",
                                           f"{prefix}_vectors_2048_hnsw")
        finally:
            await conn.close()
        assert "hnsw" in indexdef and "halfvec(2048)" in indexdef and "halfvec_cosine_ops" in indexdef
    finally:
        await drop_prefix(postgres_url, prefix)


@pytest.mark.parametrize("dimension", [2000, 2001])
async def test_a_search_walks_the_index_of_its_dimension(make_config, postgres_url, dimension):
    """The walk orders by the expression its dimension's HNSW index is built
    on: the vector itself up to 2,000 dimensions, a halfvec cast above. Any
    other expression cannot use the index, and the search sorts every row of
    the table, every store's, instead. (Tables of a fresh prefix: the store
    creates the index.)

    Troubleshoot: ``PostgresVectorStore._search_sql``'s ``walk`` and
    ``Database.vector_table``'s index.
    """
    prefix = fresh_prefix()
    try:
        async with PostgresVectorStore(make_config("walk", dimension=dimension, table_prefix=prefix)) as store:
            rng = np.random.default_rng(5)
            await store.upsert(["a", "b"], rng.standard_normal((2, dimension)))
            args = [*store.scope, vector_text(rng.standard_normal(dimension)), 5]
            async with store.db.pool.acquire() as conn, conn.transaction():
                # Two rows: the planner would sort them; with sorting priced out it
                # takes the index whenever the index can serve the walk's order.
                await conn.execute("SET LOCAL enable_sort = off")
                plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + store._search_sql("", "$4"), *args))
        assert f"Index Scan using {prefix}_vectors_{dimension}_hnsw" in plan, plan
    finally:
        await drop_prefix(postgres_url, prefix)


async def test_a_vector_table_is_looked_up_once_per_database(make_config, postgres_url):
    """Once a database has found (or created) the table of a dimension, the
    next store of that dimension opens without asking the server again.

    Troubleshoot: ``Database.vector_table``'s ``_ready_tables``.
    """
    prefix, ws = fresh_prefix(), f"w{uuid.uuid4().hex[:8]}"
    one = {"max_connections": 1, "min_connections": 1, "table_prefix": prefix}
    try:
        for round in ("creates the table", "finds it"):
            first = PostgresVectorStore(make_config("first", ws, dimension=4, **one))
            async with first:
                sent: list[str] = []
                async with first.db.pool.acquire() as conn:
                    conn.add_query_logger(lambda record: sent.append(record.query))
                async with PostgresVectorStore(make_config("second", ws, dimension=4, **one)):
                    await asyncio.sleep(0.01)  # asyncpg calls the logger soon after, not at once
                assert not [q for q in sent if "to_regclass" in q], (round, sent)
    finally:
        await drop_prefix(postgres_url, prefix)


async def test_a_database_closed_by_its_last_store_forgets_its_tables(make_config, postgres_url):
    """When its last store closes, a database is gone with what it knew and
    its pool is closed; tables dropped after that (another process, an admin) are made again by
    the next store that opens, not assumed still there.

    Troubleshoot: ``Database.detach`` and ``Database._shared``.
    """
    prefix = fresh_prefix()
    config = make_config("again", dimension=4, table_prefix=prefix)
    try:
        for _ in range(2):
            async with PostgresVectorStore(config) as store:
                await store.upsert(["a"], np.ones((1, 4)))
                assert await store.count() == 1
                pool = store.db.pool
            assert pool.is_closing(), "the last store's close closes its pool (its connections)"
            await drop_prefix(postgres_url, prefix)
    finally:
        await drop_prefix(postgres_url, prefix)


async def test_stores_creating_one_schema_or_vector_table_at_once_wait_for_each_other(make_config, postgres_url):
    """Databases (pools) opening stores on a fresh prefix at once, or stores of
    a new dimension: one creates the tables, the others wait for it (an
    advisory lock), then find them; none fails on another's half-made table.

    Troubleshoot: the ``pg_advisory_xact_lock`` of ``Database._create_schema``
    and of ``Database.vector_table``.
    """
    prefix = fresh_prefix()
    try:
        # Other pool sizes: other databases, as other processes would have.
        # First a fresh prefix's schema, made by whichever comes first...
        kvs = [PostgresKVStore(make_config(f"k{n}", table_prefix=prefix, max_connections=n)) for n in (2, 3, 4)]
        await asyncio.gather(*(s.open() for s in kvs))
        for s in kvs:
            await s.close()
        # ...then, the schema there, a vector table the opens below all meet at.
        stores = [PostgresVectorStore(make_config(f"s{n}", dimension=6, table_prefix=prefix, max_connections=n))
                  for n in (2, 3, 4)]
        await asyncio.gather(*(s.open() for s in stores))
        for s in stores:
            await s.upsert(["a"], np.ones((1, 6)))
            assert await s.count() == 1
            await s.close()
    finally:
        await drop_prefix(postgres_url, prefix)


async def test_records_come_in_full_pages_of_the_batch(stores, make_config):
    """``records(batch)`` reads one keyset page of ``batch`` rows per
    statement and hands each over whole: 5 records in pages of 2 come as
    2, 2 and 1, in id order.

    Troubleshoot: ``PostgresVectorStore._records``.
    """
    store = await stores(PostgresVectorStore, make_config("pages", dimension=4))
    await store.upsert([f"v{i}" for i in range(5)], np.eye(5, 4) + 0.5, [{"i": i} for i in range(5)])
    pages = [[(r.id, r.metadata["i"]) for r in page] async for page in store.records(2)]
    assert pages == [[("v0", 0), ("v1", 1)], [("v2", 2), ("v3", 3)], [("v4", 4)]]


async def test_a_dimension_mismatch_names_the_store_and_its_database(stores, make_config, postgres_url):
    """The error names the store, the database holding it (the dsn with its
    password masked) and the embedder its first write recorded."""
    config = make_config("dims", dimension=4).model_copy(update={"embedder": "hash:4"})
    await (await stores(PostgresVectorStore, config)).upsert(["a"], np.ones((1, 4)))
    other = await stores(PostgresVectorStore, config.model_copy(update={"dimension": 8, "embedder": "hash:8"}))
    with pytest.raises(DimensionMismatchError) as caught:
        await other.query(np.ones(8), 1)
    assert str(caught.value).startswith(
        f"vector store {config.workspace}/dims in PostgreSQL {postgres_url} holds vectors of dimension 4 "
        "made by the embedder hash:4, but hash:8 makes vectors of dimension 8"), caught.value


async def test_filters_and_ids_are_bound_parameters(stores, make_config):
    """Field names, values and ids that look like SQL are data, never SQL."""
    store = await stores(PostgresVectorStore, make_config("sql", dimension=2))
    evil = "x') OR 1=1; DROP TABLE ragkit_kv; --"
    await store.upsert([evil, "plain"], [[1, 0], [0, 1]], [{evil: evil}, {"k": "v"}])
    hits = await store.query([1, 1], 5, filter={evil: evil})
    assert [h.id for h in hits] == [evil]
    assert await store.query([1, 1], 5, filter={evil: {"$in": ["nope"]}}) == []
    kv = await stores(PostgresKVStore, make_config("sql"))
    await kv.upsert({evil: {evil: 1}})
    assert await kv.get(evil) == {evil: 1}


LEASE_CHILD = textwrap.dedent("""
    import asyncio, sys
    from ragkit.protocols import StoreConfig
    from ragkit.protocols.lease import Holder
    from ragkit_postgres import PostgresDocStatusStore

    async def main(config):
        store = PostgresDocStatusStore(StoreConfig.model_validate_json(config))
        await store.open()
        lease = store.writer_lease()  # kept: its connection holds the lock
        assert await lease.acquire(Holder(what="child"), 30)
        print("HELD", flush=True)
        await asyncio.sleep(600)

    asyncio.run(main(sys.argv[1]))
""")


async def test_the_advisory_lock_goes_with_its_holders_process(make_config):
    """A process holding the writer lock is killed (-9): the server ends its
    session and the lock is free for the next writer, with no expiry to wait
    for; while it lived, every lease named it.

    Troubleshoot: the lock must be a session-level ``pg_try_advisory_lock`` on
    the lease's own connection, never a row with a TTL.
    """
    config = make_config("doc_status")
    child = subprocess.Popen([sys.executable, "-c", LEASE_CHILD, config.model_dump_json()],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = PostgresDocStatusStore(config)
    await store.open()
    try:
        assert child.stdout.readline().strip() == "HELD", child.stderr.read()
        lease = store.writer_lease()
        me = Holder(what="parent")
        assert not await lease.acquire(me, 30)
        holder = await lease.holder()
        assert holder is not None and (holder.pid, holder.what) == (child.pid, "child")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        deadline = time.monotonic() + 20
        while not await lease.acquire(me, 30):
            assert time.monotonic() < deadline, "the dead holder's lock was not freed"
            await asyncio.sleep(0.1)
        assert (await lease.holder()).token == me.token and await lease.renew(me, 30)
        await lease.release(me)
        assert await lease.holder() is None
    finally:
        if child.poll() is None:
            child.kill()
        await store.drop()
        await store.close()


def test_options_are_validated(postgres_url):
    """A table prefix that is not a plain identifier, a DSN of another scheme
    and unknown options are configuration errors."""
    with pytest.raises(ConfigError, match="table_prefix"):
        PostgresKVStore(StoreConfig(namespace="n", options={"dsn": postgres_url, "table_prefix": "a; drop"}))
    with pytest.raises(ConfigError, match="postgresql://"):
        PostgresKVStore(StoreConfig(namespace="n", options={"dsn": "mysql://x@y/z"}))
    with pytest.raises(ConfigError, match="dsnn"):
        PostgresKVStore(StoreConfig(namespace="n", options={"dsnn": postgres_url}))


@pytest.mark.parametrize("dsn", ["postgresql://u:s3cret@127.0.0.1:1/db",
                                 # the password written twice (an option repeating it): both hidden
                                 "postgresql://u:s3cret@127.0.0.1:1/db?application_name=u:s3cret@x"])
async def test_unreachable_server_is_a_store_error_without_the_password(dsn):
    store = PostgresKVStore(StoreConfig(namespace="n", options={"dsn": dsn}))
    with pytest.raises(StoreError, match=r"cannot reach PostgreSQL postgresql://u:\*\*\*\*@127\.0\.0\.1:1/db"
                                         r"\S* to connect") as info:
        await store.open()
    assert "s3cret" not in str(info.value) and not store.is_open


@pytest.mark.parametrize(("dsn", "shown"), [
    ("postgresql://u:s3cret@h/db", "postgresql://u:****@h/db"),
    ("postgresql://u@h/db?password=s3cret", "postgresql://u@h/db?password=****"),
    ("postgresql://u@h/db?sslmode=disable&PASSWORD=s3cret&x=1", "postgresql://u@h/db?sslmode=disable&PASSWORD=****&x=1"),
    ("postgresql://u@h/db", "postgresql://u@h/db"),
])
def test_messages_show_the_dsn_without_its_password(dsn, shown):
    """Wherever the DSN writes the password (asyncpg takes it in the user part
    or as a query parameter), messages show ``****`` in its place."""
    assert safe_dsn(dsn) == shown


async def test_stores_opened_at_once_on_an_unreachable_server_each_get_the_store_error():
    """Three stores of one DSN wait for the first one's connect; when it fails,
    each tries again in turn and fails the same way (not on the first one's
    clean-up).

    Troubleshoot: the failure path of ``Database.attach``.
    """
    config = StoreConfig(namespace="n", options={"dsn": "postgresql://u:s3cret@127.0.0.1:1/db"})
    stores = [PostgresKVStore(config) for _ in range(3)]
    errors = await asyncio.gather(*(s.open() for s in stores), return_exceptions=True)
    assert [type(e) for e in errors] == [StoreError] * 3, errors


async def test_a_server_that_never_answers_is_a_store_error_naming_the_connect():
    """A listener that takes the connection and says nothing (a hung server,
    a port forwarded to nowhere): the connect gives up after
    ``connect_timeout`` and says it could not reach the server, not that a
    statement ran too long.

    Troubleshoot: the pool's ``timeout`` in ``Database._connect``;
    ``errors``' TimeoutError branch without a command_timeout.
    """
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client gives up
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = PostgresKVStore(StoreConfig(namespace="n", options={
        "dsn": f"postgresql://u:s3cret@127.0.0.1:{port}/db", "connect_timeout": 1, "command_timeout": 5}))
    try:
        with pytest.raises(StoreError) as info:
            await asyncio.wait_for(store.open(), 20)
    finally:
        server.close()
    assert str(info.value) == (f"cannot reach PostgreSQL postgresql://u:****@127.0.0.1:{port}/db "
                               "to connect: no answer in time; is the server running and the dsn right?")


async def test_a_statement_past_command_timeout_is_cancelled_with_an_error_naming_it(make_config, postgres_url):
    """A write waiting on a lock another session holds fails after
    ``command_timeout`` with a StoreError saying which limit ran out and how
    to find the holder, rather than waiting for the lock; the store works
    again once the lock is gone.

    Troubleshoot: the pool's ``command_timeout`` in ``Database._connect``;
    ``errors``' TimeoutError branch.
    """
    prefix = fresh_prefix()
    admin = await asyncpg.connect(postgres_url)
    try:
        async with PostgresKVStore(make_config("kv", table_prefix=prefix, command_timeout=0.5)) as store:
            async with admin.transaction():
                await admin.execute(f"LOCK TABLE {prefix}_kv IN ACCESS EXCLUSIVE MODE")
                with pytest.raises(StoreError) as info:
                    await asyncio.wait_for(store.upsert({"k": {"x": 1}}), 15)
            await store.upsert({"k": {"x": 2}})
            assert await store.get_many(["k"]) == [{"x": 2}]
    finally:
        await admin.close()
        await drop_prefix(postgres_url, prefix)
    assert "failed to write records within command_timeout (0.5 s), and the statement was cancelled" in str(
        info.value), info.value
    assert "pg_stat_activity" in str(info.value) and "raise command_timeout" in str(info.value)


async def test_a_store_opens_at_most_max_connections_to_the_server(make_config, postgres_url):
    """Six reads at once through a store allowed two connections run on two
    server sessions, the others waiting for one to be free.

    Troubleshoot: the pool's ``max_size`` in ``Database._connect``.
    """
    prefix = fresh_prefix()
    try:
        async with PostgresKVStore(make_config("kv", table_prefix=prefix, max_connections=2)) as store:
            async def backend() -> int:
                async with store.read("probe") as conn:
                    pid = await conn.fetchval("SELECT pg_backend_pid()")
                    await asyncio.sleep(0.2)
                    return pid

            pids = await asyncio.gather(*(backend() for _ in range(6)))
    finally:
        await drop_prefix(postgres_url, prefix)
    assert len(set(pids)) == 2, pids


async def test_stores_of_other_table_prefixes_hold_databases_of_their_own(make_config, postgres_url):
    """One DSN, two table prefixes: each store opens its own database (pool
    and schema), and a write lands in its own prefix's tables only.

    Troubleshoot: the key of ``Database.attach``.
    """
    first, second = fresh_prefix(), fresh_prefix()
    ws = f"w{uuid.uuid4().hex[:8]}"
    try:
        async with PostgresKVStore(make_config("kv", ws, table_prefix=first)) as a, \
                PostgresKVStore(make_config("kv", ws, table_prefix=second)) as b:
            assert a.transaction_scope() is not b.transaction_scope()
            await b.upsert({"k": {"x": 1}})
            assert (await a.count(), await b.count()) == (0, 1)
    finally:
        await drop_prefix(postgres_url, first)
        await drop_prefix(postgres_url, second)


async def test_the_text_fill_indexes_every_page_of_a_large_namespace(stores, make_config):
    """2,500 records written by a store given no text field are all indexed
    when a store with one opens: the fill reads and indexes them a page
    (1,000) at a time, the last partial page included, and a record written
    afterwards without terms makes the next indexed open fill again.

    Troubleshoot: ``PostgresKVStore._fill``'s pages and ``kv_text_filled``.
    """
    config = make_config("fill")
    plain = await stores(PostgresKVStore, config)
    await plain.upsert({f"k{i:04d}": {"text": f"common word{i}"} for i in range(2500)})
    indexed_config = config.model_copy(update={"text_field": "text"})
    indexed = await stores(PostgresKVStore, indexed_config)
    for i in (0, 999, 1000, 1999, 2000, 2499):
        assert [k for k, _ in await indexed.search_text(f"word{i}", 5)] == [f"k{i:04d}"]
    assert len(await indexed.search_text("common", 3000)) == 2500
    await plain.upsert({"late": {"text": "latecomer"}})
    again = await stores(PostgresKVStore, indexed_config)
    assert [k for k, _ in await again.search_text("latecomer", 5)] == ["late"]


def test_table_names_are_the_schemas_own():
    """``table_name`` knows exactly the tables the schema creates (and the
    vectors' tables, one per dimension), and refuses any other name."""
    import re

    from ragkit_postgres._db import TABLES, _schema, table_name

    created = {m.group(1).removeprefix("p_") for m in (re.match(r"CREATE TABLE IF NOT EXISTS (\w+)", s)
                                                     for s in _schema("p")) if m}
    assert TABLES == created | {"schema"}
    assert (table_name("pre", "kv"), table_name("pre", "vectors_384")) == ("pre_kv", "pre_vectors_384")
    for bad in ("KV", "XXkvXX", "vectors_0", "vectors_", "kv; DROP TABLE x", "None"):
        with pytest.raises(ValueError, match=f"ragkit-postgres has no table {re.escape(repr(bad))}"):
            table_name("pre", bad)


async def test_a_document_written_again_leaves_no_tombstone(stores, make_config, postgres_url):
    """A delete leaves a tombstone (the change feed reports the id as gone);
    writing the document again removes it, so the table of tombstones does
    not grow by one row per rewrite of a once-deleted document.

    Troubleshoot: ``PostgresDocStatusStore._write_rows``' second statement.
    """
    config = make_config("tombs")
    docs = await stores(PostgresDocStatusStore, config)
    conn = await asyncpg.connect(postgres_url)
    try:
        async def tombstones() -> int:
            return await conn.fetchval("SELECT count(*) FROM ragkit_doc_status_gone WHERE workspace = $1 "
                                       "AND namespace = $2", config.workspace, config.namespace)

        await docs.upsert([rec("d"), rec("e")])
        await docs.delete(["d", "e"])
        assert await tombstones() == 2
        await docs.upsert([rec("d")])
        assert await tombstones() == 1
        assert (await docs.get(["d"]))[0] is not None
    finally:
        await conn.close()


async def test_nodes_and_edges_are_listed_whole_across_pages(stores, make_config):
    """``nodes()`` and ``edges()`` read ``batch_size`` rows a page, keyed by
    the id and by the pair: with pages of 2, every node and edge comes once,
    in order, whatever the page boundaries cut.

    Troubleshoot: ``PostgresGraphStore._edges``' cursor is the last row's (a, b).
    """
    one = {"max_connections": 1, "min_connections": 1}
    graph = await stores(PostgresGraphStore, make_config("pages", batch_size=2, **one))
    pairs = [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f")]
    await graph.upsert_edges([(a, b, {"i": i}) for i, (a, b) in enumerate(pairs)])
    sent: list = []
    async with graph.db.pool.acquire() as conn:  # the pool's one connection: every statement after
        conn.add_query_logger(lambda record: sent.append(record))
    assert [(e.source, e.target, e.properties) async for e in graph.edges()] == [
        (a, b, {"i": i}) for i, (a, b) in enumerate(pairs)]
    assert [n.id async for n in graph.nodes()] == ["a", "b", "c", "d", "e", "f"]
    await asyncio.sleep(0.01)  # asyncpg calls the logger soon after, not at once
    # Each page asks for batch_size rows (4 pages of 7 edges, 4 of 6 nodes: the last is empty or short).
    assert [r.args[-1] for r in sent if "LIMIT" in r.query] == [2] * 8
