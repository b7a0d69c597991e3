"""Opening the stores while another process's write transaction is open.

Found by the fault campaign (tests/faults, docs/faults.md, the postgres
combination): a process that opened the stores while a writer was stopped
(SIGSTOP) inside its batch transaction waited for the writer to resume. The
open re-ran ``CREATE INDEX IF NOT EXISTS`` on tables that already existed, and
that statement takes a SHARE lock on its table before it looks, which waits
for every open transaction that wrote to the table: a ``ragkit query`` or a
server worker starting during an indexer's batch (which spans its embedding
calls) waited for the batch. Opening must not wait for writers.

Troubleshoot: ``Database._create_schema`` and ``Database.vector_table`` run
DDL only when the schema (its recorded version, the table and its index) is
not there yet.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import numpy as np

from ragkit_postgres import PostgresDocStatusStore, PostgresGraphStore, PostgresKVStore, PostgresVectorStore

OPEN_TIMEOUT = 10.0
"""Far above an open's cost; the statements the bug ran wait up to the 60 s command timeout."""


async def test_stores_open_while_another_session_holds_write_locks(make_config, postgres_url):
    prefix = f"t{uuid.uuid4().hex[:12]}"
    ws = f"w{uuid.uuid4().hex[:8]}"
    kinds = [(PostgresKVStore, "kv", None), (PostgresDocStatusStore, "docs", None),
             (PostgresGraphStore, "graph", None), (PostgresVectorStore, "vec", 4)]

    def make_stores():
        return [cls(make_config(ns, ws, dimension=dim, table_prefix=prefix)) for cls, ns, dim in kinds]

    first = make_stores()
    for store in first:  # creates the tables, then writes one row of each through the stores
        await store.open()
    kv, docs, graph, vec = first
    await kv.upsert({"k": {"v": 1}})
    await graph.upsert_node("n", {"entity_type": "x"})
    await vec.upsert(["a"], np.ones((1, 4), dtype=np.float32), [{}])
    for store in first:
        await store.close()

    writer = await asyncpg.connect(postgres_url)  # a writer mid-batch: row locks on every table, not committed
    try:
        batch = writer.transaction()
        await batch.start()
        # An UPDATE takes its table's ROW EXCLUSIVE lock (held to the end), rows or not.
        for table, column in [("kv", "value"), ("doc_status", "data"), ("nodes", "properties"),
                              ("edges", "properties"), ("vectors_4", "metadata")]:
            await writer.execute(f"UPDATE {prefix}_{table} SET {column} = {column}")
        second = make_stores()
        try:
            for store in second:
                await asyncio.wait_for(store.open(), OPEN_TIMEOUT)
            assert await second[0].get("k") == {"v": 1}  # and it reads the committed state
        finally:
            await batch.rollback()
            for store in second:
                if store.is_open:
                    await store.drop()
                    await store.close()
    finally:
        await writer.close()
        conn = await asyncpg.connect(postgres_url)
        try:
            for (name,) in await conn.fetch("SELECT tablename FROM pg_tables WHERE tablename LIKE $1", prefix + "\\_%"):
                await conn.execute(f'DROP TABLE "{name}"')
        finally:
            await conn.close()
